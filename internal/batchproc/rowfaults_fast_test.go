package batchproc_test

// The batch row's record under store failures at each of its writes: the
// claim (the group's and a line's own), the completion that stores the
// charged rows' results, and the release of a row whose charge failed.
// TestFastEveryFailedCallLosesNoLine sweeps every call of a whole run and
// checks its end (one result per line, each paid once); these name the
// row's state each failure leaves and how the next run treats it.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
)

// rowRecord is line ref's record (bigMixed's lines have references).
func (e *fastEnv) rowRecord(t *testing.T, ref string) (*batch.RowRecord, error) {
	t.Helper()
	return e.store.BatchRowRecord(context.Background(), e.m.ID, batch.RowKeyOfReference(ref), e.clk.Now())
}

// finish drives what AWS does after a failed first invocation (Lambda's
// retries, the continuations, the stuck-job recovery) and checks the end:
// one result per line, every valid row paid once, the job done and closed.
func (e *fastEnv) finish(t *testing.T, ev events.S3Event, name string, want []expect) []resultLine {
	t.Helper()
	e.invoke(t, ev)
	e.drain(t)
	e.recover(t)
	lines := e.result(t, name)
	checkLines(t, lines, want)
	e.checkPaidOnce(t, lines, want)
	e.checkEnded(t, name, batch.JobDone)
	return lines
}

// The group claim is applied and its answer lost: each line, claiming on
// its own, finds the record its own run wrote and charges it as its own
// (not as a duplicate of another line), in the same invocation.
func TestFastRowGroupClaimAnswerLostIsTheLinesOwn(t *testing.T) {
	t.Parallel()
	e := newFastEnv(t, nil)
	content, want := bigMixed(t, 10)
	ev := e.upload(t, "claim-lost.csv", content)
	e.store.CrashAfter("ClaimBatchRows", 1, errFastInjected)
	if err := e.p.HandleS3(context.Background(), ev); err != nil {
		t.Fatalf("run: %v", err)
	}
	if e.store.Calls("ClaimBatchRows") != 1 {
		t.Fatalf("%d group claims, want the one that lost its answer", e.store.Calls("ClaimBatchRows"))
	}
	lines := e.result(t, "claim-lost.csv")
	checkLines(t, lines, want)
	e.checkPaidOnce(t, lines, want)
}

// A line's own claim fails before it applies: no record and no payment
// request exist for it (nothing to take over, nothing charged), the run
// fails, and its retry claims and charges the line once.
func TestFastRowClaimFailsLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newFastEnv(t, func(c *batchproc.Config) { c.Concurrency = 1 })
	content, want := bigMixed(t, 10)
	ev := e.upload(t, "claim-failed.csv", content)
	e.store.Fail("ClaimBatchRows", 1, errFastInjected) // each line claims on its own
	e.store.Fail("ClaimBatchRow", 1, errFastInjected)  // and the first one's fails
	if err := e.p.HandleS3(context.Background(), ev); !errors.Is(err, errFastInjected) {
		t.Fatalf("run with a failed claim: %v, want the store's error", err)
	}
	if rec, err := e.rowRecord(t, "REF-1"); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("line 1's record after its failed claim: %+v %v, want none", rec, err)
	}
	for _, r := range e.store.RequestsOf(e.m.ID) {
		if r.ReferenceID == "REF-1" {
			t.Fatalf("a payment request for line 1 was created without its claim: %+v", r)
		}
	}
	e.finish(t, ev, "claim-failed.csv", want)
}

// The completion of the charged rows fails: their records stay held, not
// done, each naming the payment request it charged. The run keeps its
// results (the checkpoint) and its retry continues after them, charging
// none again and creating no other request. The records are never marked
// done, which costs nothing: a later upload of the same lines reads each
// outcome off its payment request and reports the lines as duplicates of
// the charged ones.
func TestFastRowCompleteFailsNothingChargedAgain(t *testing.T) {
	t.Parallel()
	e := newFastEnv(t, nil)
	content, want := bigMixed(t, 10)
	ev := e.upload(t, "complete-failed.csv", content)
	e.store.Fail("CompleteBatchRows", 1, errFastInjected)
	if err := e.p.HandleS3(context.Background(), ev); !errors.Is(err, errFastInjected) {
		t.Fatalf("run with a failed completion: %v, want the store's error", err)
	}
	charged := map[int]string{} // line → payment request id
	for i, w := range want {
		if w.status == "rejected" {
			continue
		}
		rec, err := e.rowRecord(t, "REF-"+strconv.Itoa(i+1))
		if err != nil || rec.Done {
			t.Fatalf("line %d's record after the failed completion: %+v %v, want held, not done", i+1, rec, err)
		}
		charged[i+1] = strconv.FormatInt(rec.PaymentRequestID, 10)
	}
	paid, _ := e.pay.total()
	lines := e.finish(t, ev, "complete-failed.csv", want)
	if again, _ := e.pay.total(); again != paid {
		t.Fatalf("%d payments after the retry, %d before: a row was charged again", again, paid)
	}
	for _, l := range lines {
		if id, ok := charged[l.row]; ok && l.prID != id {
			t.Errorf("line %d reports payment request %s, want the charged %s", l.row, l.prID, id)
		}
	}

	again := e.upload(t, "complete-failed-again.csv", content)
	e.invoke(t, again)
	e.drain(t)
	for _, l := range e.result(t, "complete-failed-again.csv") {
		id, ok := charged[l.row]
		if !ok {
			continue
		}
		if l.status != "duplicate" || l.prID != id || !strings.Contains(l.message, want[l.row-1].status) {
			t.Errorf("line %d uploaded again: %+v, want a duplicate of payment request %s (%s)", l.row, l, id, want[l.row-1].status)
		}
	}
	if total, _ := e.pay.total(); total != paid {
		t.Fatalf("%d payments after the second upload, %d before", total, paid)
	}
}

// failingCharger fails its first n charges before they reach the acquirer.
type failingCharger struct {
	batchproc.Charger
	n atomic.Int32
}

var errChargeFailed = errors.New("charge failed before reaching the acquirer")

func (c *failingCharger) ChargeRow(ctx context.Context, m *merchant.Merchant, r batch.Row, ref batchproc.RowRef) (batch.Result, error) {
	if c.n.Add(-1) >= 0 {
		return batch.Result{}, errChargeFailed
	}
	return c.Charger.ChargeRow(ctx, m, r, ref)
}

// A row's charge fails and so does the release of its claim: the row
// stays held by the failed run until its lease lapses (a retry meanwhile
// does not charge it beside its holder), then the next run takes it over
// and charges it once.
func TestFastRowReleaseFailsHeldUntilItsLeaseLapses(t *testing.T) {
	t.Parallel()
	charger := &failingCharger{}
	charger.n.Store(3) // every try of the first row's charge
	e := newFastEnv(t, func(c *batchproc.Config) { c.Concurrency = 1 },
		func(d *batchproc.Deps) { charger.Charger, d.Charger = d.Charger, charger })
	content, want := bigMixed(t, 10)
	ev := e.upload(t, "release-failed.csv", content)
	e.store.Fail("ReleaseBatchRow", 1, errFastInjected)
	if err := e.p.HandleS3(context.Background(), ev); !errors.Is(err, errChargeFailed) {
		t.Fatalf("run with a failed charge: %v, want the charge's error", err)
	}
	held, err := e.rowRecord(t, "REF-1")
	if err != nil || held.Done || !held.LeaseActive(e.clk.Now()) {
		t.Fatalf("line 1's record after the failed release: %+v %v, want held by the failed run", held, err)
	}
	// A retry at once waits for the holder's lease, in vain on a clock
	// that stands still: it ends with the invocation's time, charging
	// nothing.
	paid, _ := e.pay.total()
	ctx, cancel := invocation()
	err = e.p.HandleS3(ctx, ev)
	cancel()
	if err == nil {
		t.Fatal("a retry charged line 1 while the failed run's claim was held")
	}
	if again, _ := e.pay.total(); again != paid {
		t.Fatalf("%d payments after the early retry, %d before", again, paid)
	}
	if rec, _ := e.rowRecord(t, "REF-1"); rec.Owner != held.Owner || rec.Done {
		t.Fatalf("line 1's record after the early retry: %+v, want still the failed run's", rec)
	}
	lines := e.finish(t, ev, "release-failed.csv", want)
	if lines[0].prID != strconv.FormatInt(held.PaymentRequestID, 10) {
		t.Fatalf("line 1 reports payment request %s, want its claim's %d", lines[0].prID, held.PaymentRequestID)
	}
}
