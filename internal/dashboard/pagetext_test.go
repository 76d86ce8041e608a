package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

// Every page the dashboard renders, as Chromium shows it — the pages of
// every GET route and the answers of the forms (an invitation's link, a
// rotated key, a revealed secret, a refused form, an error, the TOTP step)
// — has no format slip ("%!d(string=24)") in its text or markup, and every
// view of the dashboard is among them (a new view without a visit here
// fails the test). The invitation's answer says the link's lifetime in
// words.
func TestBrowserEveryPageReadsWithoutFormatSlips(t *testing.T) {
	stack := testenv.Stack(t)
	base := stack.Info.APIBase
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	reqID, txID := payH2H(t, m, "text-"+dashuser.NewToken()[:8])
	seedAccount(t, m.ID, "eustripe")
	link, _, err := dashboard.InviteUser(context.Background(), stack.Store, m.ID, "text."+strings.ToLower(m.ID)+"@shop.example",
		dashuser.RoleMember, "test", base, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	tab := bt.New(t)
	seen := map[string]bool{}
	check := func(name string) {
		t.Helper()
		title := bt.Eval[string](t, tab, `document.title`)
		seen[strings.TrimSuffix(title, " · PayReq dashboard")] = true
		if txt := bt.Eval[string](t, tab, `document.body.innerText`); strings.Contains(txt, "%!") {
			t.Errorf("%s (%s) shows a format slip: %q", name, title, slipAround(txt))
		}
		if src := bt.Eval[string](t, tab, `document.documentElement.outerHTML`); strings.Contains(src, "%!") {
			t.Errorf("%s (%s) has a format slip in its markup: %q", name, title, slipAround(src))
		}
	}
	// Signed out: sign-in (blank and refused), set-password (blank and refused).
	bt.Navigate(t, tab, base+"/dashboard/login")
	check("login")
	navigateBy(t, tab, `document.querySelector("#email").value = `+bt.JS(u.email)+
		`; document.querySelector("#password").value = "wrong password"; document.querySelector("main form").submit()`)
	check("refused sign-in")
	bt.Navigate(t, tab, link)
	check("set-password")
	navigateBy(t, tab, `document.querySelectorAll("input[type=password]").forEach(i => { i.removeAttribute("minlength"); i.value = "short" }); document.querySelector("main form").submit()`)
	check("refused set-password")

	signInTab(t, tab, u)
	for _, p := range []string{"/dashboard/overview", "/dashboard/overview?period=7d", "/dashboard/overview?period=30d", "/dashboard/payments",
		"/dashboard/payments/" + itoa(reqID), "/dashboard/payments/" + itoa(reqID) + "/refund?tx=" + itoa(txID), "/dashboard/batches",
		"/dashboard/profile", "/dashboard/account", "/dashboard/users", "/dashboard/audit", "/dashboard/payments/1", "/dashboard/overview?period=year",
		"/dashboard/merchants", "/dashboard/connectors"} {
		bt.Navigate(t, tab, base+u.at(p))
		check(p)
	}
	// The answers of forms.
	bt.Navigate(t, tab, base+u.at("/dashboard/users"))
	navigateBy(t, tab, `document.querySelector("#email").value = `+bt.JS("new."+strings.ToLower(m.ID)+"@shop.example")+`; document.querySelector("#invite").click()`)
	check("users after an invitation")
	if got := bt.Eval[string](t, tab, text("#invite-sent")); !strings.Contains(got, "(24 hours)") {
		t.Errorf("the invitation does not say the link's lifetime in words: %q", got)
	}
	bt.Navigate(t, tab, base+u.at("/dashboard/profile"))
	navigateBy(t, tab, `document.querySelector("#rotate-key").click()`)
	check("profile after a key rotation")
	navigateBy(t, tab, `document.querySelector("#reveal-secret").click()`)
	check("profile with the webhook secret")
	navigateBy(t, tab, `document.querySelector("#notifyUrl").type = "text"; document.querySelector("#notifyUrl").value = "not a url"; document.querySelector("#settings").submit()`)
	check("profile refusing a notify URL")
	navigateBy(t, tab, `document.querySelector("#sftp-password").value = "a long sftp password 1"; document.querySelector("#set-sftp-password").click()`)
	check("profile after an SFTP password")
	bt.Navigate(t, tab, base+u.at("/dashboard/connectors"))
	navigateBy(t, tab, `document.querySelector("#stripe-name").value = "badkey"; document.querySelector("#stripe-secretKey").value = "pk_test_notasecret1234";`+
		` document.querySelector("#stripe-webhookSecret").value = "whsec_notchecked1234"; document.querySelector("#add-stripe").submit()`)
	check("connectors refusing a key")
	navigateBy(t, tab, `document.querySelector("button.disable").click()`)
	check("connectors after disabling an account")
	if got := bt.Eval[string](t, tab, text(`tr[data-name="eustripe"] .status`)); got != "disabled" {
		t.Errorf("after Disable, the account's status reads %q", got)
	}
	bt.Navigate(t, tab, base+"/dashboard/account")
	if got := bt.Eval[string](t, tab, `document.body.innerText`); !strings.Contains(got, "(this form works for 15 minutes)") {
		t.Errorf("the TOTP form does not say its lifetime in words: %q", got)
	}
	navigateBy(t, tab, `document.querySelector("#code").value = "000000"; document.querySelector("#code").form.submit()`)
	check("account refusing a code")
	navigateBy(t, tab, `document.querySelector("form.logout").submit()`)

	// The second-factor step, for a user with TOTP on.
	v, _ := totpUser(t)
	bt.Navigate(t, tab, base+"/dashboard/login")
	bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("email"), v.email), chromedp.SendKeys(chromedp.ID("password"), password))
	navigateBy(t, tab, `document.querySelector("main form").submit()`)
	check("totp")
	navigateBy(t, tab, `document.querySelector("#code").value = "000000"; document.querySelector("main form").submit()`)
	check("refused totp")

	for _, title := range dashboard.ViewTitles() {
		if !seen[title] {
			t.Errorf("no page titled %q was visited", title)
		}
	}
}

// slipAround is the text around the first format slip.
func slipAround(s string) string {
	i := strings.Index(s, "%!")
	return s[max(0, i-80):min(len(s), i+80)]
}
