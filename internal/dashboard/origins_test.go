package dashboard_test

import (
	"context"
	"strings"
	"testing"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

// In Chromium, the profile's allowed origins refuse anything but scheme,
// host and port (a wildcard, an added directive, a path), with a message
// that names the field and the spec's 032, and store nothing; an
// international name is saved in punycode.
func TestBrowserProfileRefusesOriginsThatAreNotOrigins(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	tab := bt.New(t)
	signInTab(t, tab, u)
	st := testenv.Stack(t).Store
	before, err := st.Merchant(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"https://*", "https://a.com;sandbox", "https://shop.example/path", "https://user@shop.example"} {
		bt.Navigate(t, tab, u.base+u.at("/dashboard/profile"))
		navigateBy(t, tab, `document.querySelector("#allowedOrigins").value = `+bt.JS("https://ok.example\n"+o)+`; document.querySelector("#settings").submit()`)
		msg := bt.Eval[string](t, tab, text(".error"))
		if !strings.Contains(msg, "Allowed checkout origins") || !strings.Contains(msg, "032") || !strings.Contains(msg, o) {
			t.Errorf("%s: message %q", o, msg)
		}
	}
	if after, _ := st.Merchant(context.Background(), m.ID); after.Version != before.Version {
		t.Errorf("a refused form changed the merchant: %v", after.AllowedOrigins)
	}
	bt.Navigate(t, tab, u.base+u.at("/dashboard/profile"))
	navigateBy(t, tab, `document.querySelector("#allowedOrigins").value = "https://Bücher.example:443/"; document.querySelector("#settings").submit()`)
	if msg := bt.Eval[string](t, tab, text(".notice")); msg != "Settings saved." {
		t.Fatalf("save: %q %q", msg, bt.Eval[string](t, tab, text(".error")))
	}
	if got := bt.Eval[string](t, tab, `document.querySelector("#allowedOrigins").value`); got != "https://xn--bcher-kva.example" {
		t.Errorf("saved origins shown as %q", got)
	}
}
