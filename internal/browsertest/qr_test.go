package browsertest_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
)

// The QR tab of the real hosted page shows a scannable code: a decoder reads
// the payload back from a screenshot of the rendered element and from the
// image the checkout function served, and the page's CSP lets it load.
func TestE2EQRCode(t *testing.T) {
	browser, b := e2eSetup(t)
	id := b.createRequest(t, "21.40")
	tab := bt.NewTab(t, browser)
	hookCSP(t, tab)
	bt.Navigate(t, tab, b.session(t, id))
	bt.WaitJS(t, tab, visible("#tab-qr"), readyTimeout)
	bt.Do(t, tab, chromedp.Click(chromedp.ID("tab-qr")))
	bt.WaitJS(t, tab, visible("#qr .pay"), 5*time.Second)
	bt.Do(t, tab, chromedp.Click(chromedp.CSS("#qr .pay")))
	bt.WaitJS(t, tab, visible("#wait-qr")+` && document.getElementById('wait-qr').complete && document.getElementById('wait-qr').naturalWidth > 0`, terminalTimeout)

	payload := bt.Eval[string](t, tab, text("#wait-code"))
	if !strings.HasPrefix(payload, "payreq-sandbox:qr?") {
		t.Fatalf("payload text %q, want the request's QR payload", payload)
	}
	src := bt.Eval[string](t, tab, `document.getElementById('wait-qr').getAttribute('src')`)
	served, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(src, "data:image/png;base64,"))
	if !strings.HasPrefix(src, "data:image/png;base64,") || err != nil {
		t.Fatalf("img src %.40q…: want a PNG data: URL (%v)", src, err)
	}
	if got := decodeQR(t, served); got != payload {
		t.Errorf("served image decodes to %q, want %q", got, payload)
	}

	c, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	shot, err := chromedp.Run(c, chromedp.Screenshot(chromedp.ID("wait-qr")))
	if err != nil {
		t.Fatalf("screenshot of #wait-qr: %v", err)
	}
	if got := decodeQR(t, shot); got != payload {
		t.Errorf("screenshot of the rendered code decodes to %q, want %q", got, payload)
	}
	wantNoCSPViolations(t, tab)
}
