package dashboard_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

var moneyFunc = regexp.MustCompile(`(?s)\n(\s*)function money\(amount, unit\) \{\n.*?\n(\s*)\}\n`)

// moneyOf returns the money() function of a script, its lines trimmed.
func moneyOf(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := moneyFunc.FindString(string(b))
	if m == "" {
		t.Fatalf("%s has no function money(amount, unit)", file)
	}
	var lines []string
	for _, l := range strings.Split(m, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return strings.Join(lines, "\n")
}

// The dashboard formats amounts with the hosted page's own function: one
// set of rules (the currency's decimals as sent, Intl's currency style in
// the viewer's locale, a crypto unit after the number).
func TestDashboardMoneyIsTheHostedPagesFunction(t *testing.T) {
	hosted, dash := moneyOf(t, "../../web/checkout/checkout.js"), moneyOf(t, "../../web/dashboard/dashboard.js")
	if hosted != dash {
		t.Fatalf("money() differs:\nhosted page:\n%s\ndashboard:\n%s", hosted, dash)
	}
}

func TestViewerLocale(t *testing.T) {
	for in, want := range map[string]string{
		"de-DE,de;q=0.9,en;q=0.8": "de-DE", "en-US": "en-US", "": "en", "fr-CH;q=0.5,xx-!!": "fr-CH",
		"*": "en", "de;q=0.9;q=0.9,en": "de", strings.Repeat("a", 2000): "en",
	} {
		if got := dashboard.ViewerLocale(in); got != want {
			t.Errorf("ViewerLocale(%q) = %q, want %q", in, got, want)
		}
	}
}

// Amounts with their currency's decimals, in the viewer's locale, on the
// list and the payment page, in Chromium; the CSV keeps plain decimals with
// the currency's digits and the unit in its own column.
func TestBrowserMoneyInTheViewersLocale(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	eur := payCard(t, m, "12.5", "EUR", cardApproved)
	jpy := payCard(t, m, "1500", "JPY", cardApproved)
	kwd := payCard(t, m, "1.23", "KWD", cardApproved)

	tab := bt.New(t)
	signInTab(t, tab, u)
	for _, c := range []struct {
		lang string
		want map[int64]string
	}{
		{"de-DE,de;q=0.9", map[int64]string{eur.RequestID: "12,50 €", jpy.RequestID: "1.500 ¥", kwd.RequestID: "1,230 KWD"}},
		{"en-US,en;q=0.9", map[int64]string{eur.RequestID: "€12.50", jpy.RequestID: "¥1,500", kwd.RequestID: "KWD 1.230"}},
	} {
		viewerLanguage(t, tab, c.lang)
		bt.Navigate(t, tab, u.base+u.at("/dashboard/payments"))
		got := bt.Eval[map[string]string](t, tab, `Object.fromEntries([...document.querySelectorAll("#payments tbody tr")].map(r =>
			[r.querySelector("a").textContent, r.querySelector("data.money").textContent]))`)
		for id, want := range c.want {
			if g := nbsp(got[itoa(id)]); g != want {
				t.Errorf("%s list: request %d shows %q, want %q", c.lang, id, g, want)
			}
		}
		bt.Navigate(t, tab, u.base+u.at("/dashboard/payments/"+itoa(kwd.RequestID)))
		if g := nbsp(bt.Eval[string](t, tab, `[...document.querySelectorAll("data.money")].map(e => e.textContent).join("|")`)); g != c.want[kwd.RequestID]+"|"+c.want[kwd.RequestID] {
			t.Errorf("%s payment page amounts: %q", c.lang, g)
		}
	}

	u.mustSignIn()
	csv := u.get("/dashboard/payments/export")
	if csv.status != http.StatusOK {
		t.Fatalf("export: %d", csv.status)
	}
	for id, want := range map[int64]string{eur.RequestID: ",12.50,EUR,", jpy.RequestID: ",1500,JPY,", kwd.RequestID: ",1.230,KWD,"} {
		line := ""
		for _, l := range strings.Split(csv.body, "\n") {
			if strings.HasPrefix(l, itoa(id)+",") {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("CSV line of %d: %q, want it to hold %q", id, line, want)
		}
	}
}
