package dashboard_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

var tagRE = regexp.MustCompile(`<[^>]+>`)

// cells returns the text of the attempt table's cells of class name.
func cells(body, class string) []string {
	re := regexp.MustCompile(`<td class="` + class + `">(.*?)</td>`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, html(tagRE.ReplaceAllString(m[1], "")))
	}
	return out
}

// The payment page says how each attempt ended in words, with the spec
// code's meaning, the method with card brand and last four, 3-D Secure and
// when; the raw lastLog stays in a details element.
func TestPaymentPageShowsAttemptsInPlainWords(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	ok := payCard(t, m, "20", "EUR", cardApproved)
	funds := payToken(t, m, "21", "EUR", "tok_insufficient_funds")
	cvc := payCard(t, m, "22", "EUR", cardDeclined006)

	for _, c := range []struct {
		id                    int64
		result, method, three string
	}{
		{ok.RequestID, "Approved", "Card · Visa ···· 1111", "No challenge"},
		{funds.RequestID, "Declined: insufficient funds (005)", "Wallet", "Not used"},
		{cvc.RequestID, "Declined: security code (CVV/PIN) incorrect (006)", "Card · Visa ···· 0127", "No challenge"},
	} {
		p := u.get("/dashboard/payments/" + itoa(c.id))
		if got := cells(p.body, "result"); len(got) != 1 || got[0] != c.result {
			t.Errorf("request %d: result %q, want %q", c.id, got, c.result)
		}
		if got := cells(p.body, "method"); len(got) != 1 || got[0] != c.method {
			t.Errorf("request %d: method %q, want %q", c.id, got, c.method)
		}
		if got := cells(p.body, "threeds"); len(got) != 1 || got[0] != c.three {
			t.Errorf("request %d: 3-D Secure %q, want %q", c.id, got, c.three)
		}
		if !strings.Contains(p.body, `<dd id="last-result">`+c.result+`</dd>`) {
			t.Errorf("request %d: no last attempt %q in the facts", c.id, c.result)
		}
		if !regexp.MustCompile(`<details class="raw"><summary>[^<]*</summary><pre><code id="last-log">transactionStatusId \d, code `).MatchString(p.body) {
			t.Errorf("request %d: the raw lastLog is not in a details element", c.id)
		}
		if !regexp.MustCompile(`<tr><td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td><td class="result">`).MatchString(p.body) {
			t.Errorf("request %d: the attempt has no time", c.id)
		}
	}
	if p := u.get("/dashboard/payments?ref=ov-w-EUR-21"); !strings.Contains(p.body, "<td>Declined: insufficient funds (005)</td>") {
		t.Error("the list does not say why the last attempt was declined")
	}
}
