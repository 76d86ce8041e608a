package dashboard_test

// The dashboard in real headless Chromium (internal/browsertest) against the
// local stack: sign in, set the notify URL and receive a notification there,
// rotate the API key and use the new key on the API, find the payment,
// see its delivery attempt, redeliver, refund with confirmation.
//
//	go test -count=1 -run TestBrowser -v ./internal/dashboard/
//	PAYREQ_SCREENSHOTS=1 go test -count=1 -run TestBrowser ./internal/dashboard/   # regenerate docs/img/dashboard-*.png

import (
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

type received struct {
	body      []byte
	signature string
	webhookID string
}

// receiver is the merchant's notification endpoint.
type receiver struct {
	mu   sync.Mutex
	got  []received
	srv  *httptest.Server
	seen chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{seen: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{b, req.Header.Get("X-Signature"), req.Header.Get("webhook-id")})
		r.mu.Unlock()
		r.seen <- struct{}{}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the n-th notification (1-based) once it arrived.
func (r *receiver) wait(t *testing.T, n int) received {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		if len(r.got) >= n {
			got := r.got[n-1]
			r.mu.Unlock()
			return got
		}
		r.mu.Unlock()
		select {
		case <-r.seen:
		case <-deadline:
			t.Fatalf("notification %d did not arrive", n)
		}
	}
}

const (
	pageTimeout = 20 * time.Second
	// A bound against a hang, not a speed test: beside another full test
	// run on two cores, 30 payments' notifications took over a minute.
	settleTimeout = 3 * time.Minute
)

// submit runs a form action in the page (confirm dialogs answered yes) and
// waits for the next page to load.
func navigateBy(t *testing.T, tab context.Context, js string) {
	t.Helper()
	bt.Eval[bool](t, tab, `(() => { window.confirm = () => true; window.__old = true; return true; })()`)
	bt.Eval[bool](t, tab, `(() => { `+js+`; return true; })()`)
	bt.WaitJS(t, tab, `!window.__old && document.readyState === "complete"`, pageTimeout)
}

func text(sel string) string {
	return `(document.querySelector(` + bt.JS(sel) + `) || {}).textContent`
}

func TestBrowserDashboardJourney(t *testing.T) {
	stack := testenv.Stack(t)
	base := stack.Info.APIBase
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	hook := newReceiver(t)
	shots := bt.ScreenshotDir(t)
	if os.Getenv("PAYREQ_SCREENSHOTS") == "1" {
		shots = filepath.Join("..", "..", "docs", "img")
	}

	tab := bt.New(t)
	bt.Do(t, tab, chromedp.EmulateViewport(1280, 900))
	bt.Navigate(t, tab, base+"/dashboard")
	bt.WaitJS(t, tab, `location.pathname === "/dashboard/login" && !!document.querySelector("#email")`, pageTimeout)
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-login.png"))
	// Sign in by typing, as a person does.
	bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("email"), u.email), chromedp.SendKeys(chromedp.ID("password"), password))
	bt.Eval[bool](t, tab, `(() => { window.__old = true; return true; })()`)
	bt.Do(t, tab, chromedp.Click(chromedp.CSS("main button[type=submit]")))
	bt.WaitJS(t, tab, `!window.__old && location.pathname === "`+u.home()+`"`, pageTimeout)
	if cookies := bt.Eval[string](t, tab, `document.cookie`); strings.Contains(cookies, "payreq_session") {
		t.Error("the session cookie is readable by scripts (not HttpOnly)")
	}

	// Profile: set the notify URL (the API's validation applies).
	bt.Navigate(t, tab, base+u.at("/dashboard/profile"))
	navigateBy(t, tab, `document.querySelector("#notifyUrl").value = "not a url"; document.querySelector("#notifyUrl").type = "text"; document.querySelector("#settings").submit()`)
	if msg := bt.Eval[string](t, tab, text(".error")); !strings.Contains(msg, "notify URL") {
		t.Errorf("invalid notify URL: %q", msg)
	}
	navigateBy(t, tab, `document.querySelector("#notifyUrl").value = `+bt.JS(hook.srv.URL+"/hook")+`; document.querySelector("#settings").submit()`)
	if msg := bt.Eval[string](t, tab, text(".notice")); msg != "Settings saved." {
		t.Fatalf("save settings: %q %q", msg, bt.Eval[string](t, tab, text(".error")))
	}

	// Rotate the API key: shown once, the old key's grace visible.
	navigateBy(t, tab, `document.querySelector("#rotate-key").click()`)
	newKey := strings.TrimSpace(bt.Eval[string](t, tab, text("#new-api-key")))
	grace := bt.Eval[string](t, tab, text("#old-key-grace"))
	if !strings.HasPrefix(newKey, "prk_test_") || newKey == m.APIKey || !strings.Contains(grace, m.APIKeyPrefix) {
		t.Fatalf("rotated key %q, grace %q", newKey, grace)
	}
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-profile.png"))
	bt.Navigate(t, tab, base+u.at("/dashboard/profile"))
	if strings.Contains(bt.Eval[string](t, tab, `document.body.innerHTML`), newKey) {
		t.Error("the new key is shown again after the rotation page")
	}
	m.APIKey = newKey

	// The new key works on the API; the payment's notification reaches the
	// notify URL set above, signed with the new key.
	ref := "dash-" + dashuser.NewToken()[:10]
	reqID, txID := payH2H(t, m, ref)
	n1 := hook.wait(t, 1)
	mac := hmac.New(sha512.New, []byte(newKey))
	mac.Write(n1.body)
	if n1.signature != base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
		t.Error("the notification is not signed with the new key")
	}
	if q, _ := url.ParseQuery(string(n1.body)); q.Get("paymentRequestId") == "" && !strings.Contains(string(n1.body), ref) {
		t.Logf("notification body: %s", n1.body)
	}

	// Find the payment by its reference; open it; its delivery attempt shows 200.
	bt.Navigate(t, tab, base+u.at("/dashboard/payments"))
	navigateBy(t, tab, `document.querySelector("#ref").value = `+bt.JS(ref)+`; document.querySelector("#filter").click()`)
	rows := bt.Eval[float64](t, tab, `document.querySelectorAll("#payments tbody a").length`)
	if rows != 1 {
		t.Fatalf("filtered list has %v rows", rows)
	}
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-payments.png"))
	navigateBy(t, tab, `document.querySelector("#payments tbody a").click()`)
	if id := bt.Eval[string](t, tab, text("#request-id")); id != itoa(reqID) {
		t.Fatalf("detail of %q, want %d", id, reqID)
	}
	// The attempt is recorded after the response; reload until it shows.
	deadline := time.Now().Add(settleTimeout)
	for bt.Eval[string](t, tab, text("#deliveries .response-code")) != "200" {
		if time.Now().After(deadline) {
			t.Fatalf("no delivery attempt with 200 on the page: %s", bt.Eval[string](t, tab, text("#deliveries")))
		}
		bt.Navigate(t, tab, base+u.at("/dashboard/payments/"+itoa(reqID)))
	}
	if ll := bt.Eval[string](t, tab, text("#last-log")); !strings.Contains(ll, "transactionStatusId 1") {
		t.Errorf("lastLog: %q", ll)
	}

	// Redeliver: the same event (webhook-id) arrives again.
	navigateBy(t, tab, `document.querySelector("#redeliver").click()`)
	if msg := bt.Eval[string](t, tab, text(".notice")); !strings.Contains(msg, "queued") {
		t.Errorf("redeliver: %q", msg)
	}
	n2 := hook.wait(t, 2)
	if n2.webhookID != n1.webhookID || string(n2.body) != string(n1.body) {
		t.Errorf("redelivered notification differs: id %q vs %q", n2.webhookID, n1.webhookID)
	}

	// Refund, with confirmation.
	navigateBy(t, tab, `document.querySelector(".refund-link").click()`)
	if !strings.Contains(bt.Eval[string](t, tab, `location.pathname`), "/refund") {
		t.Fatal("no confirmation page")
	}
	navigateBy(t, tab, `document.querySelector("#do-refund").form.submit()`) // unticked: refused
	if msg := bt.Eval[string](t, tab, text(".error")); !strings.Contains(msg, "confirm") {
		t.Errorf("refund without confirmation: %q", msg)
	}
	navigateBy(t, tab, `document.querySelector("#confirm").checked = true; document.querySelector("#do-refund").click()`)
	if st := bt.Eval[string](t, tab, text(".refund-status")); st != "refunded" {
		t.Fatalf("refund status %q (%s)", st, bt.Eval[string](t, tab, text(".error")))
	}
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-payment.png"))
	tx, err := stack.Store.Transaction(context.Background(), txID)
	if err != nil || tx.Refund == nil || tx.Refund.Status != "refunded" {
		t.Errorf("stored refund: %+v %v", tx.Refund, err)
	}

	// The audit log names every change with who made it.
	bt.Navigate(t, tab, base+u.at("/dashboard/audit"))
	log := bt.Eval[string](t, tab, text("#audit"))
	for _, want := range []string{"settings.update", "apikey.rotate", "payment.refund", "(12.50 EUR)", u.email} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}

	// Phone: the payment page fits a 390 px screen without sideways scrolling of the page.
	bt.Do(t, tab, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	bt.Navigate(t, tab, base+u.at("/dashboard/payments/"+itoa(reqID)))
	if w := bt.Eval[float64](t, tab, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %v px wide on a 390 px phone", w)
	}
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-phone.png"))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
