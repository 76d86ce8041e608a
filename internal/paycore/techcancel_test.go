package paycore_test

// The technical cancel (recover.go, cancelUnknown): an attempt whose
// charge got no answer, at a connector whose lookup cannot prove a
// reference unused (Adyen), is cancelled there by its reference once the
// process that sent it is gone, and declined 001: the request is payable
// again and the next attempt charges once.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// cancellingConnector is an Adyen-like connector: its lookup of a
// reference it has no answer for says "unknown", never "not charged", and
// it cancels by reference (counted per reference).
type cancellingConnector struct {
	*countingConnector
	cmu        sync.Mutex
	cancels    map[string]int
	failCancel bool
	voids      []string // PSP references of the charges voided
}

var _ provider.ReferenceCanceller = (*cancellingConnector)(nil)

func (c *cancellingConnector) Lookup(ctx context.Context, ref string) (provider.Outcome, error) {
	out, err := c.countingConnector.Lookup(ctx, ref)
	if errors.Is(err, provider.ErrUnknownReference) {
		return provider.Outcome{}, fmt.Errorf("no stored answer for %s: %w", ref, provider.ErrOutcomeUnknown)
	}
	return out, err
}

func (c *cancellingConnector) CancelReference(_ context.Context, ref string) error {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	c.cancels[ref]++
	if c.failCancel {
		return errDown
	}
	return nil
}

// Refund answers a void (of a late charge) itself: the sandbox ledger
// underneath never saw the charge the test's event reports.
func (c *cancellingConnector) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	if !req.Void {
		return c.countingConnector.Refund(ctx, req)
	}
	c.cmu.Lock()
	defer c.cmu.Unlock()
	c.voids = append(c.voids, req.ProviderRef)
	return provider.RefundOutcome{Status: provider.Pending, ProviderRef: "void_of_" + req.ProviderRef}, nil
}

func (c *cancellingConnector) cancelsOf(ref string) int {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	return c.cancels[ref]
}

// cancelEnv: a merchant on the Adyen-like connector "adyen" (the default),
// with a request whose first attempt got no answer from it (503, the
// transaction waiting): the state a process that died mid-charge leaves.
func cancelEnv(t *testing.T) (*fastEnv, *cancellingConnector, *paycore.Service, *payment.Request, *payment.Transaction) {
	t.Helper()
	return cancelEnvIn(t, context.Background())
}

// cancelEnvIn is cancelEnv with the first attempt paid in ctx (an
// Idempotency-Key's seed makes a retry in ctx the same attempt).
func cancelEnvIn(t *testing.T, ctx context.Context) (*fastEnv, *cancellingConnector, *paycore.Service, *payment.Request, *payment.Transaction) {
	t.Helper()
	e := newFastEnv(t)
	c := &cancellingConnector{countingConnector: newCountingConnector(e), cancels: map[string]int{}}
	svc := e.withConnectors(t, "adyen", map[string]provider.Provider{"adyen": c})
	c.failCharge = true // sent; no answer, and the acquirer never got it
	r := e.request(t, "25.00")
	if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Unavailable) {
		t.Fatalf("pay without answer: %v, want 503", err)
	}
	tx := e.onlyTx(t, r.ID)
	if tx.Status != payment.TxWaiting || c.cancelsOf(tx.Reference) != 0 {
		t.Fatalf("after the unanswered charge: status %d, %d cancels; want waiting, none (its sender is alive)", tx.Status, c.cancelsOf(tx.Reference))
	}
	c.mu.Lock()
	c.failCharge = false
	c.mu.Unlock()
	return e, c, svc, r, tx
}

// deadlinePassed moves the clock past the cancel's deadline: tx's sender's
// lease (SyncLease, 30 s) and one more for a re-send begun within it.
func (e *fastEnv) deadlinePassed(tx *payment.Transaction) {
	e.clock.Add(tx.CreatedAt.Add(2*paycore.DefaultSyncLease).Sub(e.clock.Now()) + paycore.DefaultSyncLease/10)
}

// A retry of the very attempt (same Idempotency-Key, card data again)
// never sends its charge a second time once the sender's lease ran out:
// between the lease and the cancel's deadline it gets 503 with nothing
// sent or cancelled; after the deadline it cancels and declines the
// attempt as the reconciler does and gets that decline. A cancel can then
// never release an authorisation the service booked from a re-send.
func TestTechnicalCancelRetryOfTheAttemptNeverResends(t *testing.T) {
	ctx := ids.WithSeed(context.Background(), []byte("idempotency-record-tcancel"))
	e, c, svc, r, tx := cancelEnvIn(t, ctx)
	e.clock.Add(tx.CreatedAt.Add(paycore.DefaultSyncLease).Sub(e.clock.Now()) + time.Second) // the lease ran out
	if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Unavailable) {
		t.Fatalf("the attempt's retry after its lease: %v, want 503", err)
	}
	if n, cancels := c.counts()[0], c.cancelsOf(tx.Reference); n != 1 || cancels != 0 {
		t.Fatalf("after the retry within the cancel's deadline: %d charges sent, %d cancels; want the first only, none", n, cancels)
	}
	e.deadlinePassed(tx)
	res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionID != tx.ID || res.TransactionStatusID != payment.TxDeclined {
		t.Fatalf("the attempt's retry after the deadline: %+v %v, want its decline", res, err)
	}
	declinedByCancel(t, e, c, tx, 1)
	if n := c.counts()[0]; n != 1 {
		t.Fatalf("%d charges sent for the attempt, want the first only", n)
	}
}

// declinedByCancel: tx was cancelled at c exactly `cancels` times and is
// declined 001, the request unpaid by it.
func declinedByCancel(t *testing.T, e *fastEnv, c *cancellingConnector, tx *payment.Transaction, wantCancels int) {
	t.Helper()
	got, err := e.store.Transaction(context.Background(), tx.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != payment.TxDeclined || got.Code != codes.BankSystemError || got.Connector != "adyen" {
		t.Fatalf("dead attempt: status %d code %q on %q; want declined 001 on adyen", got.Status, got.Code, got.Connector)
	}
	if n := c.cancelsOf(tx.Reference); n < 1 || wantCancels > 0 && n != wantCancels {
		t.Fatalf("%d technical cancels of %s, want %d", n, tx.Reference, wantCancels)
	}
	if ev := e.store.Outbox(tx.ID); ev == nil || ev.TransactionStatusID != payment.TxDeclined {
		t.Fatalf("outbox of the dead attempt %+v, want its decline", ev)
	}
}

// Before the deadline nothing is cancelled: the payer's new attempt is
// refused while the lease runs, and a recovery (the reconciler's, or one
// forced early) leaves the attempt waiting. After it, the payer's new
// attempt cancels the dead one once, declines it 001 and charges once.
func TestTechnicalCancelAfterTheDeadline(t *testing.T) {
	e, c, svc, r, tx := cancelEnv(t)
	ctx := context.Background()
	if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("a new attempt while the first one's lease runs: %v, want 409", err)
	}
	if err := svc.Recover(ctx, tx); err == nil || !errors.Is(err, provider.ErrOutcomeUnknown) {
		t.Fatalf("recovery before the deadline: %v, want the unknown outcome", err)
	}
	if n := c.cancelsOf(tx.Reference); n != 0 {
		t.Fatalf("%d technical cancels before the deadline, want none", n)
	}
	if got, _ := e.store.Transaction(ctx, tx.ID); got.Status != payment.TxWaiting {
		t.Fatalf("before the deadline the attempt is %d, want waiting", got.Status)
	}

	e.deadlinePassed(tx)
	res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved || res.PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("the payer's next attempt after the deadline: %+v %v, want approved and paid", res, err)
	}
	declinedByCancel(t, e, c, tx, 1)
	if res.TransactionID == tx.ID {
		t.Fatal("the new attempt reused the dead one")
	}
	// Two charges asked (the unanswered one and the new one); the ledger
	// holds one, the new attempt's.
	if n := c.counts()[0]; n != 2 {
		t.Fatalf("%d charges asked, want 2", n)
	}
	got := e.requestNow(t, r.ID)
	if got.Status != payment.RequestPaid || got.TransactionID != res.TransactionID {
		t.Fatalf("request %+v, want paid by %d", got, res.TransactionID)
	}
}

// The reconciler finds the attempt past its deadline: it cancels it and
// declines it, and the request is payable again at once (no lease held).
// A cancel the acquirer does not acknowledge changes nothing: the attempt
// stays waiting and is looked at again.
func TestTechnicalCancelByTheReconciler(t *testing.T) {
	e, c, svc, r, tx := cancelEnv(t)
	ctx := context.Background()
	e.deadlinePassed(tx)
	c.cmu.Lock()
	c.failCancel = true
	c.cmu.Unlock()
	if n, err := svc.RecoverOpen(ctx, e.clock.Now()); err == nil || n != 0 {
		t.Fatalf("recovery with the cancel failing: %d finished, %v; want none, an error", n, err)
	}
	if got, _ := e.store.Transaction(ctx, tx.ID); got.Status != payment.TxWaiting {
		t.Fatalf("after a failed cancel the attempt is %d, want waiting", got.Status)
	}
	c.cmu.Lock()
	c.failCancel = false
	c.cmu.Unlock()
	e.clock.Add(paycore.RecoverBackoffCap) // past the back-off
	if n, err := svc.RecoverOpen(ctx, e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("recovery: %d finished, %v; want 1", n, err)
	}
	declinedByCancel(t, e, c, tx, 2)
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestUnpaid {
		t.Fatalf("request %d after the decline, want unpaid", got.Status)
	}
	if _, held, _ := e.store.PaymentRequestLease(ctx, r.ID); held.TransactionID != 0 {
		t.Fatalf("the declined attempt still holds the request: %+v", held)
	}
	e.queue.sent = nil
	res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay after the decline: %+v %v", res, err)
	}
	e.paidOnceBy(t, r, res.TransactionID, 1)
}

// The decline's writes lose their answer after the cancel: the request
// ends paid by the next attempt, charged once, and the dead attempt
// declined (by the retry, or, when the request commit was applied and so
// freed the request, by the reconciler's next pass: the guarded writes are
// no-ops the second time, and the cancel sent again is one at the
// acquirer).
func TestTechnicalCancelDeclineAnswerLost(t *testing.T) {
	for _, op := range []string{"CommitAttempt", "SettleTransaction"} {
		t.Run(op, func(t *testing.T) {
			e, c, svc, r, tx := cancelEnv(t)
			ctx := context.Background()
			e.deadlinePassed(tx)
			e.inject(op, answerLost)
			if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err == nil {
				t.Fatal("pay with the decline's answer lost: want the store's error")
			}
			res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
			if err != nil || res.TransactionStatusID != payment.TxApproved {
				t.Fatalf("pay again: %+v %v, want approved", res, err)
			}
			if _, err := svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
				t.Fatal(err)
			}
			declinedByCancel(t, e, c, tx, 0)
			if n := c.counts()[0]; n != 2 {
				t.Fatalf("%d charges asked, want the unanswered one and one more", n)
			}
			if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid || got.TransactionID != res.TransactionID {
				t.Fatalf("request %+v, want paid by %d", got, res.TransactionID)
			}
		})
	}
}

// Thirty new attempts at once after the deadline: the dead attempt is
// declined once (one settle applied, one decline notified), cancelled at
// least once (a cancel sent twice is one at the acquirer: its idempotency
// key), and exactly one new attempt charges and pays the request.
func TestTechnicalCancelThirtyAtOnce(t *testing.T) {
	e, c, svc, r, tx := cancelEnv(t)
	e.deadlinePassed(tx)
	e.store.SetLatency(1e6) // 1 ms: the attempts interleave, as on DynamoDB
	e.queue.sent = nil
	var wg sync.WaitGroup
	var mu sync.Mutex
	approved := map[int64]bool{}
	start := make(chan struct{})
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
			if err == nil && res.TransactionStatusID == payment.TxApproved {
				mu.Lock()
				approved[res.TransactionID] = true
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	declinedByCancel(t, e, c, tx, 0)
	if len(approved) != 1 {
		t.Fatalf("approved attempts %v, want exactly one", approved)
	}
	if n := c.counts()[0]; n != 2 {
		t.Fatalf("%d charges asked in all, want the unanswered one and one new", n)
	}
	declines, approvals := 0, 0
	for _, ev := range e.queue.events() {
		switch {
		case ev.TransactionID == tx.ID && ev.TransactionStatusID == payment.TxDeclined:
			declines++
		case ev.TransactionStatusID == payment.TxApproved:
			approvals++
		}
	}
	if declines != 1 || approvals != 1 {
		t.Fatalf("notifications: %d declines of the dead attempt, %d approvals; want one each", declines, approvals)
	}
	for id := range approved {
		if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid || got.TransactionID != id {
			t.Fatalf("request %+v, want paid by %d", got, id)
		}
	}
}

// A charge the technical cancel could not stop (captured already, or
// arriving after it) reports its success for the declined attempt, which
// has no PSP reference: it binds on its facts alone and is voided once,
// however often it is delivered, and the attempt stays declined. At a
// connector that cannot cancel by reference the same event for a declined
// attempt without a PSP reference is still refused.
func TestTechnicalCancelLateChargeIsVoided(t *testing.T) {
	e, c, svc, r, tx := cancelEnv(t)
	ctx := context.Background()
	e.deadlinePassed(tx)
	if _, err := svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	declinedByCancel(t, e, c, tx, 1)
	late := paycore.ProviderResult{EventID: "auth-late", TransactionID: tx.ID, Status: provider.Approved, ProviderRef: "PSP_LATE",
		Facts: &provider.ChargeFacts{Reference: tx.Reference, PaymentRequestID: r.ID, Amount: tx.Amount, Unit: tx.Unit}}
	for i := 0; i < 2; i++ {
		st, err := svc.Settle(ctx, late)
		if err != nil || !st.Duplicate {
			t.Fatalf("late success %d: %+v %v; want acknowledged, nothing booked", i, st, err)
		}
	}
	got, _ := e.store.Transaction(ctx, tx.ID)
	if got.Status != payment.TxDeclined || got.After == nil || got.After.LateCharge == nil ||
		got.After.LateCharge.Status != payment.LateVoided || got.After.LateCharge.ProviderRef != "PSP_LATE" {
		t.Fatalf("after the late success: status %d, after %+v; want declined, the late charge voided", got.Status, got.After)
	}
	c.cmu.Lock()
	voids := append([]string(nil), c.voids...)
	c.cmu.Unlock()
	if len(voids) != 1 || voids[0] != "PSP_LATE" {
		t.Fatalf("voids %v, want PSP_LATE once", voids)
	}
	if e.requestNow(t, r.ID).Status != payment.RequestUnpaid {
		t.Fatal("a late charge paid the request")
	}

	// A connector without the technical cancel: unchanged, refused.
	f, alpha, _, fsvc := failoverEnv(t)
	f.m.Routing.Failover = nil
	alpha.failCharge = true // no answer; its lookup proves no charge: declined 001
	fr := f.request(t, "40.00")
	if res, err := fsvc.Pay(ctx, f.m, fr.ID, cardAttempt(cardApprove)); err != nil || res.TransactionStatusID != payment.TxDeclined {
		t.Fatalf("pay: %+v %v, want declined", res, err)
	}
	ftx := f.onlyTx(t, fr.ID)
	_, err := fsvc.Settle(ctx, paycore.ProviderResult{EventID: "auth-other", TransactionID: ftx.ID, Status: provider.Approved, ProviderRef: "PSP_OTHER",
		Facts: &provider.ChargeFacts{Reference: ftx.Reference, PaymentRequestID: fr.ID, Amount: ftx.Amount, Unit: ftx.Unit}})
	if !errors.Is(err, paycore.ErrUnbound) {
		t.Fatalf("an event for a declined attempt without PSP reference at a plain connector: %v, want refused (unbound)", err)
	}
}

// lateCharged is cancelEnv's attempt declined by the technical cancel, then
// reported charged (PSP_LATE) and voided: the late charge voided, its
// void acknowledged by the acquirer and not yet confirmed.
func lateCharged(t *testing.T) (*fastEnv, *paycore.Service, *payment.Transaction) {
	t.Helper()
	e, c, svc, r, tx := cancelEnv(t)
	ctx := context.Background()
	e.deadlinePassed(tx)
	if _, err := svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	declinedByCancel(t, e, c, tx, 1)
	if _, err := svc.Settle(ctx, paycore.ProviderResult{EventID: "auth-late", TransactionID: tx.ID, Status: provider.Approved, ProviderRef: "PSP_LATE",
		Facts: &provider.ChargeFacts{Reference: tx.Reference, PaymentRequestID: r.ID, Amount: tx.Amount, Unit: tx.Unit}}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.store.Transaction(ctx, tx.ID)
	if l := got.After.LateCharge; l.Status != payment.LateVoided || l.RefundRef != "void_of_PSP_LATE" || l.ConfirmedAt != nil {
		t.Fatalf("late charge %+v; want voided by void_of_PSP_LATE, not confirmed yet", l)
	}
	return e, svc, got
}

// voidResult is the acquirer's event about tx's void (Adyen's
// CANCEL_OR_REFUND, as the connector reads it).
func voidResult(tx *payment.Transaction, id, status string) paycore.RefundResult {
	return paycore.RefundResult{EventID: id, TransactionID: tx.ID, RefundRef: "void_of_PSP_LATE", ChargeRef: "PSP_LATE",
		RefundID: paycore.VoidPrefix + tx.Reference, Status: status, FailureReason: "not reversible", Amount: tx.Amount, Unit: tx.Unit, Action: "cancel"}
}

// The acquirer's event about a late charge's void settles it: success
// confirms it (the money returned: cancelled or refunded), delivered 30
// times at once it changes the late charge once; a failure marks it failed
// for an operator, once, and nothing moves a failed void back. An event
// about another charge, or another void, is refused (unbound).
func TestLateChargeVoidSettledByItsEvent(t *testing.T) {
	ctx := context.Background()
	t.Run("success, 30 at once", func(t *testing.T) {
		e, svc, tx := lateCharged(t)
		rev := tx.After.Rev
		var (
			wg                sync.WaitGroup
			changed, dup, bad atomic.Int32
		)
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := svc.RefundEvent(ctx, voidResult(tx, "cor-ok", "succeeded"))
				switch {
				case err != nil:
					bad.Add(1)
				case st.Changed:
					changed.Add(1)
				case st.Duplicate:
					dup.Add(1)
				}
			}()
		}
		wg.Wait()
		if changed.Load() != 1 || dup.Load() != 29 || bad.Load() != 0 {
			t.Fatalf("30 deliveries: %d changed, %d duplicates, %d errors; want 1, 29, 0", changed.Load(), dup.Load(), bad.Load())
		}
		if st, err := svc.RefundEvent(ctx, voidResult(tx, "cor-ok", "succeeded")); err != nil || !st.Duplicate {
			t.Fatalf("a later delivery: %+v %v; want nothing changed", st, err)
		}
		got, _ := e.store.Transaction(ctx, tx.ID)
		l := got.After.LateCharge
		if got.Status != payment.TxDeclined || l.Status != payment.LateVoided || l.ConfirmedAt == nil || l.Action != "cancel" ||
			got.After.Rev != rev+1 || got.Refund != nil || len(got.After.Refunds) != 0 {
			t.Fatalf("after the void's success: status %d, late charge %+v, rev %d (was %d), refunds %+v %+v; want declined, confirmed once, no refund of the merchant's",
				got.Status, l, got.After.Rev, rev, got.Refund, got.After.Refunds)
		}
		if _, err := svc.RefundEvent(ctx, voidResult(tx, "cor-ok2", "pending")); err != nil {
			t.Fatal(err)
		}
		other := voidResult(tx, "cor-other", "succeeded")
		other.ChargeRef = "PSP_OTHER"
		if _, err := svc.RefundEvent(ctx, other); !errors.Is(err, paycore.ErrUnbound) {
			t.Fatalf("the void of another charge: %v, want unbound", err)
		}
		other = voidResult(tx, "cor-other", "succeeded")
		other.RefundRef = "void_of_SOMETHING_ELSE"
		if _, err := svc.RefundEvent(ctx, other); !errors.Is(err, paycore.ErrUnbound) {
			t.Fatalf("another void of the late charge: %v, want unbound", err)
		}
	})

	t.Run("failure", func(t *testing.T) {
		e, svc, tx := lateCharged(t)
		for i, want := range []bool{true, false} {
			st, err := svc.RefundEvent(ctx, voidResult(tx, "cor-failed", "failed"))
			if err != nil || st.Changed != want {
				t.Fatalf("failure delivery %d: %+v %v; want changed %v", i, st, err, want)
			}
		}
		if st, err := svc.RefundEvent(ctx, voidResult(tx, "cor-ok", "succeeded")); err != nil || !st.Duplicate {
			t.Fatalf("a success after the failure: %+v %v; want nothing changed (failed is final)", st, err)
		}
		got, _ := e.store.Transaction(ctx, tx.ID)
		if l := got.After.LateCharge; l.Status != payment.LateFailed || l.ConfirmedAt != nil || got.Status != payment.TxDeclined {
			t.Fatalf("after the void's failure: %+v; want failed, for an operator", l)
		}
	})
}
