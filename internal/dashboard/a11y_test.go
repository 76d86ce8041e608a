package dashboard_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

// axeSource is axe-core, pinned in infra/local/package.json (npm ci there).
func axeSource(t *testing.T) string {
	t.Helper()
	infra, err := devstack.InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(infra, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is missing (run npm ci in infra/local): %v", err)
	}
	return string(b)
}

// Every page of the dashboard, at desktop and phone size, has no axe-core
// violation (WCAG 2.x A and AA rules and best practices). axe is injected
// through DevTools, which the page's CSP does not govern; the page itself
// loads no inline script.
func TestBrowserEveryPageHasNoAxeViolations(t *testing.T) {
	needs.External(t, "Chromium", "the local stack", "axe-core (npm ci in infra/local)")
	axe := axeSource(t)
	stack := testenv.Stack(t)
	base := stack.Info.APIBase
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	reqID, txID := payH2H(t, m, "a11y-"+dashuser.NewToken()[:8])
	seedAccount(t, m.ID, "eustripe")
	link, _, err := dashboard.InviteUser(context.Background(), stack.Store, m.ID, "a11y."+strings.ToLower(m.ID)+"@shop.example",
		dashuser.RoleMember, "test", base, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	tab := bt.New(t)
	check := func(name string) {
		t.Helper()
		bt.Eval[bool](t, tab, `(() => { if (!window.axe) { `+axe+` } return true; })()`)
		v := bt.Eval[[]string](t, tab, `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.map(v => v.id + " (" + v.impact + "): " + v.nodes.map(n => n.target.join(" ")).join(", ")))`)
		if len(v) > 0 {
			t.Errorf("%s: %d axe violations:\n%s", name, len(v), strings.Join(v, "\n"))
		}
	}
	pages := []string{"/dashboard/overview", "/dashboard/overview?period=30d", "/dashboard/payments", "/dashboard/payments/" + itoa(reqID), "/dashboard/payments/" + itoa(reqID) + "/refund?tx=" + itoa(txID),
		"/dashboard/profile", "/dashboard/account", "/dashboard/users", "/dashboard/audit", "/dashboard/batches", "/dashboard/payments/1", "/dashboard/merchants",
		"/dashboard/connectors"}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		bt.Do(t, tab, chromedp.EmulateViewport(size.w, size.h))
		bt.Navigate(t, tab, base+"/dashboard/login")
		check(size.name + " login")
		bt.Navigate(t, tab, link)
		check(size.name + " set-password")
		bt.Navigate(t, tab, base+"/dashboard/login")
		bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("email"), u.email), chromedp.SendKeys(chromedp.ID("password"), password))
		bt.Eval[bool](t, tab, `(() => { window.__old = true; return true; })()`)
		bt.Do(t, tab, chromedp.Click(chromedp.CSS("main button[type=submit]")))
		bt.WaitJS(t, tab, `!window.__old && location.pathname === "`+u.home()+`"`, pageTimeout)
		for _, p := range pages {
			bt.Navigate(t, tab, base+u.at(p))
			check(size.name + " " + p)
		}
		// A refused account: the form's alert and field errors.
		bt.Navigate(t, tab, base+u.at("/dashboard/connectors"))
		navigateBy(t, tab, `document.querySelector("#stripe-name").value = "badkey"; document.querySelector("#stripe-secretKey").value = "pk_test_notasecret1234";`+
			` document.querySelector("#stripe-webhookSecret").value = "whsec_notchecked1234"; document.querySelector("#add-stripe").submit()`)
		check(size.name + " connectors refusing a key")
		navigateBy(t, tab, `document.querySelector("form.logout").submit()`)
	}
	// The second-factor form, for a user with TOTP on.
	key, err := devstack.SealKey(testenv.StateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	v := newUser(t, m, dashuser.RoleMember)
	stored := storedUser(t, v)
	stored.SealedTOTP = sealer.Seal(dashboard.NewTOTPSecret(), "totp:"+v.email)
	if err := stack.Store.UpdateIdentity(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	bt.Navigate(t, tab, base+"/dashboard/login")
	bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("email"), v.email), chromedp.SendKeys(chromedp.ID("password"), password))
	bt.Eval[bool](t, tab, `(() => { window.__old = true; return true; })()`)
	bt.Do(t, tab, chromedp.Click(chromedp.CSS("main button[type=submit]")))
	bt.WaitJS(t, tab, `!window.__old && location.pathname === "/dashboard/totp"`, pageTimeout)
	check("totp")
}

var (
	inlineScript = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`)
	eventHandler = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	styleAttr    = regexp.MustCompile(`(?i)\sstyle\s*=|<style`)
)

// Every page is served with the strict CSP and carries no inline script,
// event handler attribute or inline style.
func TestEveryPageHasAStrictCSPAndNoInlineCode(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	login := u.get("/dashboard/login")
	u.mustSignIn()
	reqID, _ := payH2H(t, m, "csp-"+dashuser.NewToken()[:8])
	pages := map[string]page{"login": login}
	for _, p := range []string{"/dashboard/overview", "/dashboard/overview?period=7d", "/dashboard/payments", "/dashboard/payments/" + itoa(reqID), "/dashboard/profile", "/dashboard/account",
		"/dashboard/users", "/dashboard/audit", "/dashboard/batches", "/dashboard/payments/1", "/dashboard/connectors", "/dashboard/assets/dashboard.js"} {
		pages[p] = u.get(p)
	}
	for name, p := range pages {
		csp := p.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", name, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP allows unsafe code: %q", name, csp)
		}
		if p.header.Get("X-Content-Type-Options") != "nosniff" || (p.header.Get("Cache-Control") != "no-store") != strings.HasSuffix(name, ".js") {
			t.Errorf("%s: headers %v", name, p.header)
		}
		if !strings.HasSuffix(name, ".js") {
			if inlineScript.MatchString(p.body) || eventHandler.MatchString(p.body) || styleAttr.MatchString(p.body) {
				t.Errorf("%s has inline code or style", name)
			}
		}
	}
	if pages["/dashboard/payments/1"].status != http.StatusNotFound {
		t.Errorf("unknown payment: %d", pages["/dashboard/payments/1"].status)
	}
}
