package dashboard_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/payment"

	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/testenv"
)

// The overview, a payment's attempts and a running batch file as the
// documentation shows them, desktop and phone, from the local stack.
// `make screenshots` writes them to docs/img (with TestBrowserDashboardJourney's):
//
//	PAYREQ_SCREENSHOTS=1 go test -count=1 -run '^TestBrowserDashboard(Journey|Screenshots)$' ./internal/dashboard/
//
// Today's payments are made through the API; the six days before today are
// added to the aggregates directly (a week of history cannot be paid for in
// a test), so the 7-day chart has something to show.
func TestBrowserDashboardScreenshots(t *testing.T) {
	shots := bt.ScreenshotDir(t)
	if os.Getenv("PAYREQ_SCREENSHOTS") == "1" {
		shots = filepath.Join("..", "..", "docs", "img")
	}
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	st := testenv.Stack(t).Store
	ctx := context.Background()
	base := testenv.Stack(t).Info.APIBase

	for _, c := range []struct{ amount, card string }{{"129.00", cardApproved}, {"48.50", cardMastercardOK}, {"12.50", cardApproved},
		{"75.00", cardDeclined006}, {"19.99", cardApproved}, {"230.00", cardDeclined999}, {"64.20", cardMastercardOK}} {
		payCard(t, m, c.amount, "EUR", c.card)
	}
	payToken(t, m, "89.00", "EUR", "tok_success")
	funds := payToken(t, m, "42.00", "EUR", "tok_insufficient_funds")
	payCard(t, m, "35.00", "USD", cardApproved)
	refund := payCard(t, m, "27.30", "EUR", cardApproved)
	if r := testenv.Do(t, "GET", base+"/payments/h2h/refund/"+itoa(refund.TxID), m.APIKey, nil); r.Status != http.StatusOK {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for d := 1; d <= 6; d++ {
		n := int64(8 + 3*d%7)
		if err := st.SeedOverview(ctx, m.ID, payment.OverviewBucket{Start: today.AddDate(0, 0, -d), Unit: "EUR", Approved: n, Declined: int64(d % 3),
			Volume: decimal.NewFromInt(n * 47).Add(decimal.RequireFromString("0.35")), Declines: map[string]int64{"005": int64(d % 3)},
			Methods: map[string]payment.OverviewMethod{"card": {Count: n, Volume: decimal.NewFromInt(n * 47).Add(decimal.RequireFromString("0.35"))}}}); err != nil {
			t.Fatal(err)
		}
	}
	// A file halfway through.
	now := time.Now().UTC()
	job := &batch.Job{MerchantID: m.ID, JobID: batch.JobID("orders-2026-11.csv", "0001"), File: "orders-2026-11.csv",
		State: batch.JobCharging, NextLine: 41_201, Lines: 100_000,
		Counts:    batch.Counts{Rows: 41_200, Approved: 38_950, Declined: 1_870, Rejected: 380},
		CreatedAt: now.Add(-3 * time.Minute), UpdatedAt: now}
	if _, err := st.AcquireBatchJob(ctx, job, "screenshots", now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseBatchJob(ctx, m.ID, job.JobID); err != nil {
		t.Fatal(err)
	}

	tab := bt.New(t)
	bt.Do(t, tab, chromedp.EmulateViewport(1280, 900))
	viewerLanguage(t, tab, "en-US,en;q=0.9")
	signInTab(t, tab, u)
	u.mustSignIn()
	// 7 payments today and 69 seeded (11, 14, 10, 13, 9, 12): over 30 days whatever the hour.
	waitOverview(t, u, "/dashboard/overview?period=30d&unit=EUR", func(o overviewNumbers) bool { return o.count == "76" && o.refunds == "1" })
	bt.Navigate(t, tab, base+u.at("/dashboard/overview?period=7d&unit=EUR"))
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-overview.png"))
	bt.Navigate(t, tab, base+u.at("/dashboard/payments/"+itoa(funds.RequestID)))
	bt.Eval[bool](t, tab, `(() => { document.querySelector("details.raw").open = true; return true; })()`)
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-attempts.png"))
	bt.Navigate(t, tab, base+u.at("/dashboard/batches"))
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-batches.png"))

	bt.Do(t, tab, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	bt.Navigate(t, tab, base+u.at("/dashboard/overview?period=7d&unit=EUR"))
	if w := bt.Eval[float64](t, tab, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the overview is %v px wide on a 390 px phone", w)
	}
	bt.Screenshot(t, tab, filepath.Join(shots, "dashboard-overview-phone.png"))
}
