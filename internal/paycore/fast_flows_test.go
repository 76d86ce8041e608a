package paycore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// refundIDs is the set of refund ids the acquirer was asked for (the
// acquirer's idempotency key: one id, at most one refund).
type refundRecorder struct {
	provider.Provider
	mu  sync.Mutex
	ids map[string]int
}

func (r *refundRecorder) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	r.mu.Lock()
	r.ids[req.RefundID]++
	r.mu.Unlock()
	return r.Provider.Refund(ctx, req)
}

func (e *fastEnv) approved(t *testing.T, amount string) paycore.Result {
	t.Helper()
	r := e.request(t, amount)
	res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("approve: %+v %v", res, err)
	}
	return res
}

func TestFastRefund(t *testing.T) {
	e := newFastEnv(t)
	rec := &refundRecorder{Provider: e.svc.Provider, ids: map[string]int{}}
	e.svc.Provider = rec
	ctx := context.Background()
	res := e.approved(t, "42.10")

	v, err := e.svc.Refund(ctx, e.m, res.TransactionID)
	if err != nil || v.Status != payment.RefundRefunded || string(v.Amount) != "42.10" || v.Unit != "EUR" {
		t.Fatalf("full refund: %+v %v", v, err)
	}
	again, err := e.svc.Refund(ctx, e.m, res.TransactionID)
	if err != nil || again.RefundID != v.RefundID || again.Status != payment.RefundRefunded {
		t.Fatalf("repeating the refund: %+v %v, want refund %s", again, err, v.RefundID)
	}
	if len(rec.ids) != 1 {
		t.Fatalf("acquirer asked for %d refunds, want 1", len(rec.ids))
	}

	// Only an approved transaction of the caller can be refunded.
	r := e.request(t, "5.00")
	dec, _ := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardDecline))
	if _, err := e.svc.Refund(ctx, e.m, dec.TransactionID); errkind.KindOf(err) != errkind.Conflict {
		t.Fatalf("refund of a declined transaction: %v", err)
	}
	other := &merchant.Merchant{ID: "mer_other", Sandbox: true}
	if _, err := e.svc.Refund(ctx, other, res.TransactionID); errkind.KindOf(err) != errkind.NotFound {
		t.Fatalf("another merchant's refund: %v", err)
	}
}

// Thirty refunds of one transaction at once: one refund, once, for the
// transaction's amount; every caller sees that same refund.
func TestFastConcurrentRefundsRefundOnce(t *testing.T) {
	e := newFastEnv(t)
	rec := &refundRecorder{Provider: e.svc.Provider, ids: map[string]int{}}
	e.svc.Provider = rec
	res := e.approved(t, "30.00")
	e.store.SetLatency(time.Millisecond) // the refunds interleave, as on DynamoDB
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := e.svc.Refund(context.Background(), e.m, res.TransactionID)
			if err != nil {
				t.Errorf("refund: %v", err)
				return
			}
			if string(v.Amount) != "30.00" {
				t.Errorf("refund amount %s, want the transaction's 30.00", v.Amount)
			}
			mu.Lock()
			seen[v.RefundID]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if len(seen) != 1 || len(rec.ids) != 1 {
		t.Fatalf("refunds seen by callers %v, asked of the acquirer %v: want one", seen, rec.ids)
	}
	tx, _ := e.store.Transaction(context.Background(), res.TransactionID)
	if tx.Refund == nil || tx.Refund.Status != payment.RefundRefunded || !tx.Refund.Amount.Equal(tx.Amount) {
		t.Fatalf("stored refund %+v", tx.Refund)
	}
}

// A refund a crash left in processing (the store lost the write of its
// answer before it was written) is finished by the reconciler with the
// same refund id.
func TestFastRefundLeftInProcessingIsFinished(t *testing.T) {
	e := newFastEnv(t)
	rec := &refundRecorder{Provider: e.svc.Provider, ids: map[string]int{}}
	e.svc.Provider = rec
	ctx := context.Background()
	res := e.approved(t, "8.00")
	e.store.Fail("WriteRefund", 1, errInjected)
	if _, err := e.svc.Refund(ctx, e.m, res.TransactionID); err == nil {
		t.Fatal("refund reported done although its completion was not stored")
	}
	tx, _ := e.store.Transaction(ctx, res.TransactionID)
	if tx.Refund == nil || tx.Refund.Status != payment.RefundProcessing {
		t.Fatalf("refund %+v, want processing", tx.Refund)
	}
	e.clock.Add(time.Hour)
	if _, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	tx, _ = e.store.Transaction(ctx, res.TransactionID)
	if tx.Refund.Status != payment.RefundRefunded || len(rec.ids) != 1 {
		t.Fatalf("refund %+v, acquirer asked %v: want refunded under one id", tx.Refund, rec.ids)
	}
}

func (e *fastEnv) challenged(t *testing.T) (*payment.Request, paycore.Result) {
	t.Helper()
	r := e.request(t, "20.00")
	res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardChallenge))
	if err != nil || res.TransactionStatusID != payment.TxPending || res.NextAction == nil {
		t.Fatalf("3-D Secure card: %+v %v, want pending with a next action", res, err)
	}
	return r, res
}

func TestFastThreeDSChallengeCompletedOnce(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r, res := e.challenged(t)
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestUnpaid {
		t.Fatalf("request during the challenge: %d", got.Status)
	}
	st, err := e.svc.CompleteChallenge(ctx, "ev1", res.TransactionID, r.ID, true)
	if err != nil || !st.Changed || st.Transaction.Status != payment.TxApproved || st.Transaction.ThreeDS != payment.ThreeDSAuthenticated {
		t.Fatalf("completion: %+v %v", st, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request after completion: %d", got.Status)
	}
	// Twice (a double click), and then failed: the first answer stands.
	for _, approve := range []bool{true, false} {
		st, err = e.svc.CompleteChallenge(ctx, "ev2", res.TransactionID, r.ID, approve)
		if err != nil || st.Changed || st.Transaction.Status != payment.TxApproved {
			t.Fatalf("completion again (approve=%v): %+v %v", approve, st, err)
		}
	}
	if evs := e.queue.events(); len(evs) != 1 {
		t.Fatalf("%d notifications, want 1", len(evs))
	}
	if _, err := e.svc.CompleteChallenge(ctx, "ev3", res.TransactionID, r.ID+1, true); !errors.Is(err, paycore.ErrMismatch) {
		t.Fatalf("completion naming another request: %v", err)
	}
}

func TestFastThreeDSCompletionAfterExpiry(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r, res := e.challenged(t)
	e.clock.Add(paycore.DefaultChallengeWindow + time.Minute)
	st, err := e.svc.ExpireChallenge(ctx, "exp", res.TransactionID, r.ID)
	if err != nil || st.Transaction.Status != payment.TxDeclined || st.Transaction.Code != codes.AuthenticationTimeout {
		t.Fatalf("expiry: %+v %v, want declined 013", st, err)
	}
	st, err = e.svc.CompleteChallenge(ctx, "late", res.TransactionID, r.ID, true)
	if err != nil || st.Changed || st.Transaction.Status != payment.TxDeclined {
		t.Fatalf("completion after expiry: %+v %v, want the expiry to stand", st, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestUnpaid {
		t.Fatalf("request after an expired challenge: %d, want unpaid", got.Status)
	}
	if refs, _ := e.acq.chargedReferences(); refs != 1 {
		t.Fatalf("%d charges", refs)
	}
	// Payable again.
	if res2, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err != nil || res2.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay after the expired challenge: %+v %v", res2, err)
	}
}

func (e *fastEnv) pendingUPI(t *testing.T) (*payment.Request, paycore.Result) {
	t.Helper()
	r := e.request(t, "15.00")
	res, err := e.svc.Pay(context.Background(), e.m, r.ID, paycore.Attempt{Method: provider.MethodUPI, Hosted: true, UPIID: "success@upi"})
	if err != nil || res.TransactionStatusID != payment.TxPending {
		t.Fatalf("UPI: %+v %v, want pending", res, err)
	}
	return r, res
}

func TestFastCallbacks(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r, res := e.pendingUPI(t)
	approve := paycore.ProviderResult{EventID: "evt_1", TransactionID: res.TransactionID, PaymentRequestID: r.ID, Status: provider.Approved, ProviderRef: "upi_1"}

	st, err := e.svc.Settle(ctx, approve)
	if err != nil || !st.Changed || st.Transaction.Status != payment.TxApproved {
		t.Fatalf("callback: %+v %v", st, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request %d, want paid", got.Status)
	}
	// Duplicate delivery: nothing changes, no second notification.
	st, err = e.svc.Settle(ctx, approve)
	if err != nil || !st.Duplicate || st.Changed {
		t.Fatalf("duplicate: %+v %v", st, err)
	}
	// Out of order: a decline arriving after the approval never undoes it.
	late := approve
	late.EventID, late.Status, late.Code = "evt_0", provider.Declined, codes.DeclinedContactIssuer
	st, err = e.svc.Settle(ctx, late)
	if err != nil || !st.Duplicate || st.Transaction.Status != payment.TxApproved {
		t.Fatalf("out of order: %+v %v", st, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request %d after a late decline", got.Status)
	}
	if evs := e.queue.events(); len(evs) != 1 || evs[0].TransactionStatusID != payment.TxApproved {
		t.Fatalf("notifications %+v, want the approval once", evs)
	}
	// Unknown reference, and a transaction of another request.
	unknown := approve
	unknown.TransactionID = res.TransactionID + 1
	if _, err := e.svc.Settle(ctx, unknown); !errors.Is(err, paycore.ErrUnknownTransaction) {
		t.Fatalf("unknown transaction: %v", err)
	}
	wrong := approve
	wrong.PaymentRequestID = r.ID + 1
	if _, err := e.svc.Settle(ctx, wrong); !errors.Is(err, paycore.ErrMismatch) {
		t.Fatalf("another request's transaction: %v", err)
	}
}

// The decline arrives first: it stands, and the request stays payable.
func TestFastCallbackDeclineFirstStands(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r, res := e.pendingUPI(t)
	decline := paycore.ProviderResult{EventID: "evt_d", TransactionID: res.TransactionID, Status: provider.Declined, Code: codes.DeclinedContactIssuer}
	if st, err := e.svc.Settle(ctx, decline); err != nil || !st.Changed || st.Transaction.Status != payment.TxDeclined {
		t.Fatalf("decline: %+v %v", st, err)
	}
	approve := decline
	approve.EventID, approve.Status, approve.Code = "evt_a", provider.Approved, ""
	if st, err := e.svc.Settle(ctx, approve); err != nil || st.Changed || st.Transaction.Status != payment.TxDeclined {
		t.Fatalf("approval after the decline: %+v %v", st, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestUnpaid {
		t.Fatalf("request %d, want unpaid", got.Status)
	}
}

// The store fails on the settle after the request commit was written (a
// crash mid-callback): the provider's retry of the callback completes it.
func TestFastCallbackRetryAfterAFailedSettle(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r, res := e.pendingUPI(t)
	e.store.Fail("SettleTransaction", 1, errInjected)
	e.store.Fail("CommitAndSettle", 1, errInjected)
	approve := paycore.ProviderResult{EventID: "evt_1", TransactionID: res.TransactionID, Status: provider.Approved}
	if _, err := e.svc.Settle(ctx, approve); err == nil {
		t.Fatal("a callback whose settle failed reported success")
	}
	st, err := e.svc.Settle(ctx, approve)
	if err != nil || st.Transaction.Status != payment.TxApproved {
		t.Fatalf("retry: %+v %v", st, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request %d, want paid", got.Status)
	}
	if ev := e.store.Outbox(res.TransactionID); ev == nil || ev.TransactionStatusID != payment.TxApproved {
		t.Fatalf("outbox %+v", ev)
	}
}
