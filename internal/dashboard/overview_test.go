package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// overviewNumbers reads the overview's figures from its HTML (without
// script: the values of the <data> elements).
type overviewNumbers struct {
	gross, count, rate, refunds, refundVolume string
	declines                                  map[string]string // code -> count
	methods                                   map[string]string // method label -> count/volume
}

var (
	kpiRE     = regexp.MustCompile(`id="kpi-(gross|count|rate|refunds)">(?:<data class="(?:money|count)" value="([^"]*)"[^>]*>[^<]*</data>|([^<]*))</span>`)
	refVolRE  = regexp.MustCompile(`id="kpi-refund-volume"><data class="money" value="([^"]*)"`)
	declineRE = regexp.MustCompile(`<tr><td><code>(\d{3}|none)</code></td><td>([^<]*)</td><td><data class="count" value="(\d+)">`)
	methodRE  = regexp.MustCompile(`<tr><td>([A-Za-z ]+)</td><td><data class="count" value="(\d+)">\d+</data></td><td><data class="money" value="([^"]*)"`)
)

func readOverview(t testing.TB, body string) overviewNumbers {
	t.Helper()
	o := overviewNumbers{declines: map[string]string{}, methods: map[string]string{}}
	for _, m := range kpiRE.FindAllStringSubmatch(body, -1) {
		v := m[2]
		if v == "" {
			v = m[3]
		}
		switch m[1] {
		case "gross":
			o.gross = v
		case "count":
			o.count = v
		case "rate":
			o.rate = html(v)
		case "refunds":
			o.refunds = v
		}
	}
	if m := refVolRE.FindStringSubmatch(body); m != nil {
		o.refundVolume = m[1]
	}
	for _, m := range declineRE.FindAllStringSubmatch(body, -1) {
		o.declines[m[1]] = m[3] + " " + html(m[2])
	}
	for _, m := range methodRE.FindAllStringSubmatch(body, -1) {
		o.methods[m[1]] = m[2] + " / " + m[3]
	}
	return o
}

// waitOverview reloads path until the page shows want payments (the
// aggregates are kept by the notifier, after the payments' answers).
func waitOverview(t *testing.T, u *user, path string, ready func(overviewNumbers) bool) (overviewNumbers, page) {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		p := u.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("%s: %d\n%.500s", path, p.status, p.body)
		}
		o := readOverview(t, p.body)
		if ready(o) {
			return o, p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed the payments made: %+v", path, o)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The overview's numbers are those of the payments the test makes:
// approved, declined by two codes, a refund, two currencies, two methods;
// another merchant's payments do not count. Then the same page in Chromium
// (en-US and de-DE viewers) shows them formatted.
func TestBrowserOverviewMatchesThePaymentsMade(t *testing.T) {
	m := testenv.NewMerchant(t)
	other := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	base := testenv.Stack(t).Info.APIBase

	day := time.Now().UTC().Format("2006-01-02")
	payCard(t, m, "12.50", "EUR", cardApproved)
	refunded := payCard(t, m, "7.25", "EUR", cardMastercardOK)
	payToken(t, m, "30", "EUR", "tok_success")
	payCard(t, m, "5", "EUR", cardDeclined999)
	payCard(t, m, "6", "EUR", cardDeclined006)
	payCard(t, m, "1", "EUR", cardDeclined006)
	payCard(t, m, "1500", "JPY", cardApproved)
	payCard(t, m, "200", "JPY", cardDeclined999)
	payCard(t, other, "999", "EUR", cardApproved) // another merchant's
	if r := testenv.Do(t, "GET", base+"/payments/h2h/refund/"+itoa(refunded.TxID), m.APIKey, nil); r.Status != http.StatusOK {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}

	// "Today" holds them all unless the test ran across midnight (UTC);
	// 7 and 30 days hold them either way.
	today := "today"
	if time.Now().UTC().Format("2006-01-02") != day {
		today = "7d"
	}
	eur, _ := waitOverview(t, u, "/dashboard/overview?period="+today+"&unit=EUR", func(o overviewNumbers) bool {
		return o.count == "3" && len(o.declines) == 2 && o.refunds == "1"
	})
	want := overviewNumbers{gross: "49.75", count: "3", rate: "50.0 %", refunds: "1", refundVolume: "7.25",
		declines: map[string]string{"006": "2 Security code (CVV/PIN) incorrect", "999": "1 Declined, contact the card issuer"},
		methods:  map[string]string{"Card": "2 / 19.75", "Wallet": "1 / 30.00"}}
	checkOverview(t, "EUR today", eur, want)
	month, _ := waitOverview(t, u, "/dashboard/overview?period=30d&unit=EUR", func(o overviewNumbers) bool { return o.count == "3" })
	checkOverview(t, "EUR 30 days", month, want)
	jpy, jpyPage := waitOverview(t, u, "/dashboard/overview?period=7d&unit=JPY", func(o overviewNumbers) bool { return o.count == "1" })
	checkOverview(t, "JPY 7 days", jpy, overviewNumbers{gross: "1500", count: "1", rate: "50.0 %", refunds: "0", refundVolume: "0",
		declines: map[string]string{"999": "1 Declined, contact the card issuer"}, methods: map[string]string{"Card": "1 / 1500"}})
	if !regexp.MustCompile(`<option value="EUR"[^>]*>EUR</option>`).MatchString(jpyPage.body) {
		t.Error("the currency list lacks EUR")
	}
	// The volume chart has a bar per hour or day and a table of the same numbers.
	if n := len(regexp.MustCompile(`<rect class="bar"`).FindAllString(jpyPage.body, -1)); n < 7+1 {
		t.Errorf("7-day page: %d bars (7 days and the method's)", n)
	}
	if p := u.get("/dashboard/overview?period=year"); p.status != http.StatusBadRequest {
		t.Errorf("unknown period: %d", p.status)
	}
	if p := u.get("/dashboard/overview?unit=XXX1"); p.status != http.StatusBadRequest {
		t.Errorf("unknown currency: %d", p.status)
	}

	// In Chromium, as the merchant sees it.
	tab := bt.New(t)
	viewerLanguage(t, tab, "en-US,en;q=0.9")
	signInTab(t, tab, u)
	if p := bt.Eval[string](t, tab, `location.pathname`); p != u.home() {
		t.Errorf("home after sign-in: %s", p)
	}
	hour := time.Now().UTC().Hour()
	bt.Navigate(t, tab, base+u.at("/dashboard/overview?period="+today+"&unit=EUR"))
	got := bt.Eval[map[string]string](t, tab, `({gross: document.querySelector("#kpi-gross").textContent,
		count: document.querySelector("#kpi-count").textContent, rate: document.querySelector("#kpi-rate").textContent,
		refunds: document.querySelector("#kpi-refunds").textContent + " " + document.querySelector("#kpi-refund-volume").textContent,
		decline006: [...document.querySelectorAll("#declines tr")].find(r => r.textContent.includes("006")).textContent,
		chart: String(document.querySelectorAll("#volume-chart rect.bar").length),
		chartMax: document.querySelector("#volume-chart text[data-amount]").textContent,
		wallet: [...document.querySelectorAll("#methods-chart text[data-amount]")].map(e => e.textContent).join("|")})`)
	for k, w := range map[string]string{"gross": "€49.75", "count": "3", "rate": "50.0 %", "refunds": "1 €7.25",
		"decline006": "006Security code (CVV/PIN) incorrect2"} {
		if nbsp(got[k]) != w {
			t.Errorf("Chromium overview %s: %q, want %q", k, nbsp(got[k]), w)
		}
	}
	if !strings.HasPrefix(got["chartMax"], "€") || nbsp(got["wallet"]) != "€30.00|€19.75" {
		t.Errorf("chart labels not in the viewer's style: %q, %q", got["chartMax"], got["wallet"])
	}
	// One bar per hour so far (the hour may have turned meanwhile), or per day.
	if n, _ := strconv.Atoi(got["chart"]); today == "today" && n != hour+1 && n != time.Now().UTC().Hour()+1 || today == "7d" && n != 7 {
		t.Errorf("the %s chart has %s bars, want one per hour so far (%d)", today, got["chart"], hour+1)
	}
	axeClean(t, tab, "overview with payments, desktop")
	viewerLanguage(t, tab, "de-DE,de;q=0.9")
	bt.Navigate(t, tab, base+u.at("/dashboard/overview?period=7d&unit=JPY"))
	if g := nbsp(bt.Eval[string](t, tab, `document.querySelector("#kpi-gross").textContent`)); g != "1.500 ¥" {
		t.Errorf("de-DE JPY gross %q", g)
	}
	bt.Do(t, tab, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	bt.Navigate(t, tab, base+u.at("/dashboard/overview?period=30d&unit=EUR"))
	axeClean(t, tab, "overview with payments, phone")
	if w := bt.Eval[float64](t, tab, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the overview is %v px wide on a 390 px phone: %v", w, bt.Eval[[]string](t, tab, `[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > 390).map(e => e.tagName + "." + e.className + "#" + e.id + " " + e.getBoundingClientRect().right)`))
	}
}

func checkOverview(t *testing.T, name string, got, want overviewNumbers) {
	t.Helper()
	if got.gross != want.gross || got.count != want.count || got.rate != want.rate || got.refunds != want.refunds || got.refundVolume != want.refundVolume {
		t.Errorf("%s: gross %s count %s rate %s refunds %s (%s), want %s %s %s %s (%s)", name, got.gross, got.count, got.rate, got.refunds,
			got.refundVolume, want.gross, want.count, want.rate, want.refunds, want.refundVolume)
	}
	for k, v := range want.declines {
		if got.declines[k] != v {
			t.Errorf("%s: declines %s = %q, want %q", name, k, got.declines[k], v)
		}
	}
	if len(got.declines) != len(want.declines) {
		t.Errorf("%s: declines %v", name, got.declines)
	}
	for k, v := range want.methods {
		if got.methods[k] != v {
			t.Errorf("%s: method %s = %q, want %q", name, k, got.methods[k], v)
		}
	}
	if len(got.methods) != len(want.methods) {
		t.Errorf("%s: methods %v", name, got.methods)
	}
}

// 30 payments of one merchant settling at once are each counted exactly
// once; a redelivered settle event (the dashboard's "send again", the same
// event id on the queue) and 60 more concurrent aggregations of the same
// transactions (each twice) add nothing.
func TestConcurrentAndRedeliveredSettlesCountOnce(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	const n = 30
	paidAll := make([]paid, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paidAll[i] = payCard(t, m, strconv.Itoa(10+i)+".01", "EUR", cardApproved)
		}()
	}
	wg.Wait()
	// 10.01 + 11.01 + … + 39.01: 735 + 30 × 0.01
	const gross = "735.30"
	o, _ := waitOverview(t, u, "/dashboard/overview?period=7d&unit=EUR", func(o overviewNumbers) bool { return o.count == strconv.Itoa(n) })
	if o.gross != gross {
		t.Fatalf("30 concurrent payments: gross %s, want %s", o.gross, gross)
	}

	// The dashboard's redelivery queues the first payment's event again:
	// the notifier handles it (a second delivery record) and counts nothing.
	store := testenv.Stack(t).Store
	first := paidAll[0]
	detail := u.get("/dashboard/payments/" + itoa(first.RequestID))
	if p := u.post("/dashboard/payments/"+itoa(first.RequestID)+"/redeliver", url.Values{"csrf": {csrfOf(t, detail)}}); p.status != http.StatusOK {
		t.Fatalf("redeliver: %d", p.status)
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		ds, err := store.Deliveries(context.Background(), first.RequestID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the redelivered event was not handled: %d delivery records", len(ds))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Every transaction aggregated again, twice, at once: no call adds.
	var added sync.Map
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := store.Transaction(context.Background(), paidAll[i%n].TxID)
			if err != nil {
				t.Error(err)
				return
			}
			ok, err := store.AggregateSettled(context.Background(), tx, time.Now())
			if err != nil {
				t.Error(err)
			}
			if ok {
				added.Store(tx.ID, true)
			}
		}()
	}
	wg.Wait()
	added.Range(func(k, _ any) bool { t.Errorf("transaction %v was added again", k); return true })
	o = readOverview(t, u.get("/dashboard/overview?period=7d&unit=EUR").body)
	if o.count != strconv.Itoa(n) || o.gross != gross {
		t.Errorf("after the redelivery and the repeats: %s payments, gross %s; want %d, %s", o.count, o.gross, n, gross)
	}
}

// axeClean runs axe-core on the tab's page: no violation.
func axeClean(t *testing.T, tab context.Context, name string) {
	t.Helper()
	axe := axeSource(t)
	bt.Eval[bool](t, tab, `(() => { if (!window.axe) { `+axe+` } return true; })()`)
	v := bt.Eval[[]string](t, tab, `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.map(v => v.id + " (" + v.impact + "): " + v.nodes.map(n => n.target.join(" ")).join(", ")))`)
	if len(v) > 0 {
		t.Errorf("%s: %d axe violations:\n%s", name, len(v), strings.Join(v, "\n"))
	}
}

// A notification whose delivery fails shows on the overview as failing.
func TestOverviewShowsFailingNotifications(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(down.Close)
	m := testenv.NewMerchant(t, func(mm *merchant.Merchant) { mm.NotifyURL = down.URL + "/hook" })
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	if p := u.get("/dashboard/overview"); !strings.Contains(p.body, `<dd id="notify-failing"><data class="count" value="0">`) {
		t.Fatalf("a new merchant has failing notifications:\n%.2000s", p.body)
	}
	payCard(t, m, "3", "EUR", cardApproved)
	deadline := time.Now().Add(settleTimeout)
	for !strings.Contains(u.get("/dashboard/overview").body, `<dd id="notify-failing"><data class="count" value="1">`) {
		if time.Now().After(deadline) {
			t.Fatal("the failing notification is not on the overview")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The overview counts a merchant's open disputes and lists them, the
// nearest evidence deadline first, with a link to Stripe's Dashboard where
// the evidence is submitted; a closed one is neither counted nor listed.
// The payment's page shows its dispute.
func TestOverviewShowsOpenDisputes(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	if p := u.get("/dashboard/overview"); !strings.Contains(p.body, `id="kpi-disputes"><data class="count" value="0">`) {
		t.Fatalf("a new merchant has open disputes:\n%.3000s", p.body)
	}
	a := payCard(t, m, "30", "EUR", cardApproved)
	b := payCard(t, m, "31", "EUR", cardApproved)
	st := testenv.Stack(t).Store
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	due := now.Add(9 * 24 * time.Hour)
	for _, e := range []payment.DisputeEntry{
		{TransactionID: a.TxID, PaymentRequestID: a.RequestID, DisputeID: "dp_open", Status: "needs_response", Reason: "fraudulent",
			Amount: decimal.RequireFromString("30"), Unit: "EUR", EvidenceDueBy: due, UpdatedAt: now, Rev: 1},
		{TransactionID: b.TxID, PaymentRequestID: b.RequestID, DisputeID: "dp_won", Status: "won", Reason: "general",
			Amount: decimal.RequireFromString("31"), Unit: "EUR", UpdatedAt: now, Rev: 1},
	} {
		if err := st.PutDisputeEntry(ctx, m.ID, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.WriteAfter(ctx, a.TxID, 0, payment.After{Dispute: &payment.Dispute{ID: "dp_open", Status: "needs_response",
		Reason: "fraudulent", Amount: decimal.RequireFromString("30"), Unit: "EUR", EvidenceDueBy: due}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	p := u.get("/dashboard/overview")
	for _, want := range []string{`id="kpi-disputes"><data class="count" value="1">`, due.Format("2006-01-02 15:04") + " UTC",
		`href="https://dashboard.stripe.com/test/disputes/dp_open"`, "fraudulent"} {
		if !strings.Contains(p.body, want) {
			t.Fatalf("overview lacks %q:\n%.4000s", want, p.body)
		}
	}
	if strings.Contains(p.body, "dp_won") {
		t.Fatal("a closed dispute is listed as open")
	}
	detail := u.get(fmt.Sprintf("/dashboard/payments/%d", a.RequestID))
	if !strings.Contains(detail.body, `class="dispute-status">needs_response`) || !strings.Contains(detail.body, "evidence due "+due.Format("2006-01-02 15:04")) {
		t.Fatalf("the payment's page does not show its dispute:\n%.4000s", detail.body)
	}
}
