package paycore_test

// The merchant refund's state machine (none → processing → refunded)
// under store failures at its two writes: the begin (before the acquirer
// is asked) and the completion (after it answered), each failing before
// it applies or after (its answer lost). Whatever failed, the refund ends
// refunded, asked of the acquirer under the one refund id the begin
// recorded — its idempotency key, so never refunded twice.
// TestFastRefundLeftInProcessingIsFinished (fast_flows_test.go) covers a
// failed completion finished by the reconciler; these add the others.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
)

// refundEnv is fastEnv with the acquirer's refunds recorded by refund id.
func refundEnv(t *testing.T) (*fastEnv, *refundRecorder) {
	t.Helper()
	e := newFastEnv(t)
	rec := &refundRecorder{Provider: e.svc.Provider, ids: map[string]int{}}
	e.svc.Provider = rec
	return e, rec
}

// refundFaulted approves a payment, makes the store's next op go wrong as f
// and asks for its refund, which must answer the store's error.
func refundFaulted(t *testing.T, op string, f storeFault) (*fastEnv, *refundRecorder, paycore.Result) {
	t.Helper()
	e, rec := refundEnv(t)
	res := e.approved(t, "12.00")
	e.inject(op, f)
	if _, err := e.svc.Refund(context.Background(), e.m, res.TransactionID); !errors.Is(err, errInjected) {
		t.Fatalf("refund with %s %s: %v, want the store's error", op, f, err)
	}
	return e, rec, res
}

// refundOf is the transaction's stored refund (nil: none).
func (e *fastEnv) refundOf(t *testing.T, txID int64) *payment.Refund {
	t.Helper()
	tx, err := e.store.Transaction(context.Background(), txID)
	if err != nil {
		t.Fatal(err)
	}
	return tx.Refund
}

// refundedOnce: the refund is refunded, and the acquirer was asked under
// its id only, at most calls times.
func refundedOnce(t *testing.T, r *payment.Refund, rec *refundRecorder, calls int) {
	t.Helper()
	if r == nil || r.Status != payment.RefundRefunded {
		t.Fatalf("refund %+v, want refunded", r)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ids) != 1 || rec.ids[r.ID] == 0 || rec.ids[r.ID] > calls {
		t.Fatalf("acquirer asked %v, want refund %s only, at most %d times", rec.ids, r.ID, calls)
	}
}

// The begin fails before it applies: no refund recorded, the acquirer not
// asked; the merchant's retry refunds.
func TestRefundBeginFails(t *testing.T) {
	e, rec, res := refundFaulted(t, "BeginRefund", failsBeforeApplying)
	ctx := context.Background()
	if r := e.refundOf(t, res.TransactionID); r != nil || len(rec.ids) != 0 {
		t.Fatalf("after the failed begin: refund %+v, acquirer asked %v; want neither", r, rec.ids)
	}
	v, err := e.svc.Refund(ctx, e.m, res.TransactionID)
	if err != nil || v.Status != payment.RefundRefunded {
		t.Fatalf("retry: %+v %v", v, err)
	}
	refundedOnce(t, e.refundOf(t, res.TransactionID), rec, 1)
}

// The begin applies and its answer is lost: the refund is recorded in
// processing and the acquirer not asked; the retry asks under the recorded
// refund's id (not a new one) and ends it refunded.
func TestRefundBeginAnswerLost(t *testing.T) {
	e, rec, res := refundFaulted(t, "BeginRefund", answerLost)
	ctx := context.Background()
	begun := e.refundOf(t, res.TransactionID)
	if begun == nil || begun.Status != payment.RefundProcessing || len(rec.ids) != 0 {
		t.Fatalf("after the lost answer: refund %+v, acquirer asked %v; want processing, not asked", begun, rec.ids)
	}
	v, err := e.svc.Refund(ctx, e.m, res.TransactionID)
	if err != nil || v.Status != payment.RefundRefunded || v.RefundID != begun.ID {
		t.Fatalf("retry: %+v %v, want refund %s refunded", v, err, begun.ID)
	}
	refundedOnce(t, e.refundOf(t, res.TransactionID), rec, 1)
}

// The completion fails before it applies: the merchant's retry, before
// the reconciler, asks the acquirer again under the same id (which
// answers the refund it made) and records it refunded.
func TestRefundCompletionFailsRetriedByTheMerchant(t *testing.T) {
	e, rec, res := refundFaulted(t, "WriteRefund", failsBeforeApplying)
	ctx := context.Background()
	if r := e.refundOf(t, res.TransactionID); r == nil || r.Status != payment.RefundProcessing {
		t.Fatalf("refund %+v, want processing", r)
	}
	v, err := e.svc.Refund(ctx, e.m, res.TransactionID)
	if err != nil || v.Status != payment.RefundRefunded {
		t.Fatalf("retry: %+v %v", v, err)
	}
	refundedOnce(t, e.refundOf(t, res.TransactionID), rec, 2)
}

// The completion applies and its answer is lost: the refund is stored
// refunded, and neither the merchant's retry nor the reconciler asks the
// acquirer again.
func TestRefundCompletionAnswerLost(t *testing.T) {
	e, rec, res := refundFaulted(t, "WriteRefund", answerLost)
	ctx := context.Background()
	refundedOnce(t, e.refundOf(t, res.TransactionID), rec, 1)
	v, err := e.svc.Refund(ctx, e.m, res.TransactionID)
	if err != nil || v.Status != payment.RefundRefunded {
		t.Fatalf("retry: %+v %v", v, err)
	}
	e.clock.Add(time.Hour)
	if _, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	refundedOnce(t, e.refundOf(t, res.TransactionID), rec, 1)
}

// The begin applies, its answer is lost, and the merchant never retries:
// the begin opened the transaction for the reconciler, which asks the
// acquirer under the recorded id and ends the refund refunded.
func TestRefundBeginAnswerLostFinishedByTheReconciler(t *testing.T) {
	e, rec, res := refundFaulted(t, "BeginRefund", answerLost)
	ctx := context.Background()
	begun := e.refundOf(t, res.TransactionID)
	e.clock.Add(time.Hour)
	if _, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	r := e.refundOf(t, res.TransactionID)
	if r.ID != begun.ID {
		t.Fatalf("refund %s finished, want the begun %s", r.ID, begun.ID)
	}
	refundedOnce(t, r, rec, 1)
}
