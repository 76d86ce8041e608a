package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

// In Chromium: an admin opens Connectors from the navigation, types a
// Stripe account's keys, connects it (checked against stripe-mock), sees it
// listed with its masks only, tests it and disables it (confirming).
func TestBrowserConnectorsFlow(t *testing.T) {
	accountDoubles(t)
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	tab := bt.New(t)
	signInTab(t, tab, u)
	navigateBy(t, tab, `document.querySelector('nav a[href$="/connectors"]').click()`)
	if got := bt.Eval[string](t, tab, `document.title`); !strings.HasPrefix(got, "Connectors") {
		t.Fatalf("the navigation's Connectors link opened %q", got)
	}
	bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("stripe-name"), "eustripe"),
		chromedp.SendKeys(chromedp.ID("stripe-secretKey"), accountStripeKey),
		chromedp.SendKeys(chromedp.ID("stripe-webhookSecret"), accountStripeWhsec))
	navigateBy(t, tab, `document.querySelector("#add-stripe-submit").click()`)
	if msg := bt.Eval[string](t, tab, text(".notice")); !strings.Contains(msg, "eustripe connected") {
		t.Fatalf("connect: %q %q", msg, bt.Eval[string](t, tab, text(".error")))
	}
	creds := bt.Eval[string](t, tab, text(`tr[data-name="eustripe"] .credentials`))
	if !strings.Contains(creds, "sk_test_…4321") || !strings.Contains(creds, "whsec_…8765") {
		t.Errorf("credentials shown: %q", creds)
	}
	src := bt.Eval[string](t, tab, `document.documentElement.outerHTML`)
	for _, s := range []string{accountStripeKey, accountStripeWhsec} {
		if strings.Contains(src, s) {
			t.Error("the page holds a secret after connecting")
		}
	}
	if v := bt.Eval[string](t, tab, `document.querySelector("#stripe-secretKey").value`); v != "" {
		t.Error("the secret key field is filled in again")
	}
	navigateBy(t, tab, `document.querySelector('tr[data-name="eustripe"] button.test').click()`)
	if msg := bt.Eval[string](t, tab, text(".notice")); !strings.Contains(msg, "passed the check") {
		t.Errorf("test: %q %q", msg, bt.Eval[string](t, tab, text(".error")))
	}
	navigateBy(t, tab, `document.querySelector('tr[data-name="eustripe"] button.disable').click()`)
	if st := bt.Eval[string](t, tab, text(`tr[data-name="eustripe"] .status`)); st != "disabled" {
		t.Errorf("after Disable: %q", st)
	}
}
