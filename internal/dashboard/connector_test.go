package dashboard_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

var tdRE = regexp.MustCompile(`<td[^>]*>(.*?)</td>`)

// The payment page names the connector that charged each attempt, and the
// overview groups settled attempts by connector: approved, declined,
// approval rate and volume (the local stack is a sandbox stage: every
// attempt goes to "sandbox").
func TestConnectorOnPaymentAndOverview(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	ok1 := payCard(t, m, "12.50", "EUR", cardApproved)
	payCard(t, m, "7.25", "EUR", cardApproved)
	payCard(t, m, "3.00", "EUR", cardDeclined999)

	detail := u.get("/dashboard/payments/" + itoa(ok1.RequestID))
	if got := cells(detail.body, "connector"); len(got) != 1 || got[0] != "sandbox" {
		t.Fatalf("payment page connector cells %q, want [sandbox]", got)
	}

	want := []string{"sandbox", "2", "1", "66.7 %", "19.75"}
	_, p := waitOverview(t, u, "/dashboard/overview?period=7d&unit=EUR", func(o overviewNumbers) bool { return o.count == "2" && len(o.declines) == 1 })
	i := strings.Index(p.body, `<table id="connectors">`)
	if i < 0 {
		t.Fatalf("overview has no connectors table:\n%.2000s", p.body)
	}
	table := p.body[i:]
	table = table[:strings.Index(table, "</table>")]
	row := tdRE.FindAllStringSubmatch(table, -1)
	var got []string
	for _, m := range row {
		got = append(got, html(tagRE.ReplaceAllString(m[1], "")))
	}
	if len(got) != 5 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] || !strings.Contains(got[4], want[4]) {
		t.Fatalf("connectors row %q, want %q", got, want)
	}
}
