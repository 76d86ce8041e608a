package batchproc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/testenv"
)

// A charged row costs at most 4 AWS calls of the service's own before its
// notification is sent: today 3 — the row's claim, its payment request
// (leased) with the write-ahead transaction in one TransactWriteItems, the
// request commit and transaction settle in one TransactWriteItems — and one
// result write per 25 rows. The sandbox acquirer's ledger write (the
// acquirer's call in production) and the notification send are counted apart
// (the batch's sends are coalesced: several rows' notifications per
// SendMessageBatch). The per-file calls (job, snapshot, parts, result) cancel
// out: the count is the difference between a 50-row and a 25-row file. On a
// loaded machine the service answers what the load does (a call that timed out
// or conflicted, a row taken up again) with calls of its own, such as a charge
// looked up; a file with a failed call or an extra acquirer call is run again,
// up to four times, because load only ever adds calls: the budget is what an
// undisturbed file costs, and a design that costs more fails every time.
func TestAWSCallsPerChargedRow(t *testing.T) {
	cfg, counter := testenv.CountingAWSConfig(t)
	f := fixtureWith(t, testenv.Stack(t), cfg)
	p, _, _ := f.processor(t, nil)
	run := func(rows int) (own, acquirer, sends int) {
		m := testenv.NewMerchant(t)
		var b strings.Builder
		for i := 1; i <= rows; i++ {
			b.WriteString(line("Holder", "4111 1111 1111 1111", "12/30", "123", "10.50", "EUR", fmt.Sprintf("BUDGET-%d-%s", i, m.ID)) + "\n")
		}
		name := fmt.Sprintf("budget-%d.csv", rows)
		ev := f.upload(t, m.ID, name, []byte(b.String()))
		counter.Reset()
		if err := p.HandleS3(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		o, a := counter.Split()
		for _, c := range o {
			if c == "SQS.SendMessage" || c == "SQS.SendMessageBatch" {
				sends++
			}
		}
		for _, l := range parseResult(t, f.result(t, m.ID, name)) {
			if l.status != "approved" {
				t.Fatalf("row not approved: %+v", l)
			}
		}
		t.Logf("%d rows: %d calls of its own (%d notification sends) %v, %d of the acquirer %v", rows, len(o), sends, summary(o), len(a), summary(a))
		return len(o), len(a), sends
	}
	undisturbed := func(rows int) (own, acquirer, sends int) {
		for try := 1; ; try++ {
			own, acquirer, sends = run(rows)
			n := counter.Disturbed()
			if (n == 0 && acquirer == rows) || try == 4 {
				return own, acquirer, sends
			}
			t.Logf("%d rows: %d calls timed out or conflicted, %d acquirer calls; counting again on a new file", rows, n, acquirer)
		}
	}
	own25, acq25, sends25 := undisturbed(25)
	own50, acq50, sends50 := undisturbed(50)
	perRow := float64((own50-sends50)-(own25-sends25)) / 25
	t.Logf("per charged row: %.2f AWS calls before the notification send, %.2f notification sends, %.2f acquirer calls",
		perRow, float64(sends50-sends25)/25, float64(acq50-acq25)/25)
	if perRow > 4 {
		t.Errorf("a charged row costs %.2f AWS calls before its notification, budget 4", perRow)
	}
	if sends25 > 25 || sends50 > 50 {
		t.Errorf("%d and %d notification sends for 25 and 50 rows: more than one per row", sends25, sends50)
	}
	if acq := float64(acq50-acq25) / 25; acq != 1 {
		t.Errorf("%.2f acquirer calls per row, want 1", acq)
	}
}

func summary(calls []string) string {
	by := map[string]int{}
	for _, c := range calls {
		by[c]++
	}
	return fmt.Sprint(by)
}
