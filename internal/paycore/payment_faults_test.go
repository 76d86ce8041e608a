package paycore_test

// The payment attempt's state machine under store failures, step by step
// (lease, limit reservation, write-ahead, charge's commit): each failed
// write answers the store's error (no Result, no conflict or validation
// kind that would tell the payer something false), leaves the request and
// the counters as the steps before it left them, and the payer's retry or
// the reconciler finishes the payment with one charge.
// TestFastRetryWithTheSameKeyResumes and TestFastCrashAfterTheCommit
// (fast_test.go) cover a retry with the same Idempotency-Key; these retry
// without one, as a payer on the hosted page does.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
)

// storeFailure checks the answer of an attempt whose store call failed.
func storeFailure(t *testing.T, res paycore.Result, err error) {
	t.Helper()
	if !errors.Is(err, errInjected) || errkind.KindOf(err) != errkind.Unknown {
		t.Fatalf("attempt with a failed store call: %v (kind %q), want the store's error", err, errkind.KindOf(err))
	}
	if res != (paycore.Result{}) {
		t.Fatalf("attempt with a failed store call answered a result: %+v", res)
	}
}

// noAttemptLeft: the request is unpaid, no attempt holds it, nothing was
// charged and no transaction exists.
func (e *fastEnv) noAttemptLeft(t *testing.T, r *payment.Request) {
	t.Helper()
	cur, held, err := e.store.PaymentRequestLease(context.Background(), r.ID)
	if err != nil || cur.Status != payment.RequestUnpaid || held.TransactionID != 0 {
		t.Fatalf("request %+v lease %+v (%v), want unpaid and free", cur, held, err)
	}
	if txs := e.txsOf(t, r.ID); len(txs) != 0 {
		t.Fatalf("%d transactions written, want none", len(txs))
	}
	if refs, _ := e.acq.chargedReferences(); refs != 0 {
		t.Fatalf("%d charges, want none", refs)
	}
}

// paysAtOnce: a new attempt (no Idempotency-Key) pays the request, the
// acquirer charged once in all.
func (e *fastEnv) paysAtOnce(t *testing.T, r *payment.Request) {
	t.Helper()
	res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved || res.PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("retry: %+v %v, want approved and paid", res, err)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}

// A write before the charge fails: nothing is charged, the lease is free
// again, and the payer's retry pays at once.
func TestPaymentStoreFailureBeforeTheCharge(t *testing.T) {
	for _, method := range []string{"LeasePaymentRequest", "CreateTransaction"} {
		t.Run(method, func(t *testing.T) {
			e := newFastEnv(t)
			r := e.request(t, "10.00")
			e.store.Fail(method, 1, errInjected)
			res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
			storeFailure(t, res, err)
			e.noAttemptLeft(t, r)
			e.paysAtOnce(t, r)
		})
	}
}

// With count and amount limits: a failed reservation, or a write-ahead that
// fails after the reservation, leaves the counters as they were (the hold
// is given back), so the failure never uses up the merchant's limits.
func TestPaymentStoreFailureGivesTheLimitsBack(t *testing.T) {
	for _, method := range []string{"ReserveLimits", "CreateTransaction"} {
		t.Run(method, func(t *testing.T) {
			e := newFastEnv(t)
			daily := decimal.RequireFromString("100")
			e.m.Limits = merchant.Limits{DailyCount: 5, DailyAmount: &daily}
			e.store.PutMerchant(e.m)
			r := e.request(t, "10.00")
			e.store.Fail(method, 1, errInjected)
			res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
			storeFailure(t, res, err)
			e.noAttemptLeft(t, r)
			w := payment.WindowAt(e.m.ID, "EUR", e.clock.Now())
			u, err := e.store.LimitUsageOf(context.Background(), w)
			if err != nil || u.DailyCount != 0 || !u.DailyAmount.IsZero() {
				t.Fatalf("counters after the failed attempt: %+v %v, want nothing held", u, err)
			}
			e.paysAtOnce(t, r)
			if u, _ := e.store.LimitUsageOf(context.Background(), w); u.DailyCount != 1 || !u.DailyAmount.Equal(decimal.RequireFromString("10")) {
				t.Fatalf("counters after the payment: %+v, want the one payment", u)
			}
		})
	}
}

// The charge is made and the write of its outcome fails: the transaction
// stays waiting with the lease held (no notification, the request unpaid),
// a new attempt is refused while the lease runs, and the reconciler, once
// it has, books the charge's outcome from the acquirer: paid, notified
// once, charged once; later attempts see a paid request.
func TestPaymentStoreFailureAfterTheCharge(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r := e.request(t, "10.00")
	e.store.Fail("CommitAndSettle", 1, errInjected)
	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	storeFailure(t, res, err)

	txs := e.txsOf(t, r.ID)
	if len(txs) != 1 || txs[0].Status != payment.TxWaiting || e.store.Outbox(txs[0].ID) != nil {
		t.Fatalf("after the failed commit: %+v, want one waiting transaction, no outbox entry", txs)
	}
	cur, held, _ := e.store.PaymentRequestLease(ctx, r.ID)
	if cur.Status != payment.RequestUnpaid || held.TransactionID != txs[0].ID {
		t.Fatalf("request %+v lease %+v, want unpaid and held by the charged attempt", cur, held)
	}
	if n := len(e.queue.events()); n != 0 {
		t.Fatalf("%d notifications before the outcome is stored", n)
	}
	if _, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); errkind.KindOf(err) != errkind.Conflict {
		t.Fatalf("a new attempt while the charged one holds the lease: %v, want 409", err)
	}

	e.clock.Add(paycore.DefaultSyncLease + time.Second)
	if n, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("reconciler: %d %v, want the attempt finished", n, err)
	}
	tx, _ := e.store.Transaction(ctx, txs[0].ID)
	if got := e.requestNow(t, r.ID); tx.Status != payment.TxApproved || got.Status != payment.RequestPaid || got.TransactionID != tx.ID {
		t.Fatalf("after the reconciler: transaction %d, request %+v; want approved and paid by it", tx.Status, got)
	}
	if evs := e.queue.events(); len(evs) != 1 || evs[0].TransactionStatusID != payment.TxApproved || evs[0].PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("notifications %+v, want the approval once", evs)
	}
	if _, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); errkind.KindOf(err) != errkind.Conflict {
		t.Fatalf("an attempt on the paid request: %v, want 409", err)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}

// The same, but the payer comes back after the lease ran out and before
// the reconciler: the new attempt finishes the charged one first (asking
// the acquirer, never charging), which pays the request, so the new
// attempt is refused as paid.
func TestPaymentStoreFailureAfterTheChargeFinishedByTheNextAttempt(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r := e.request(t, "10.00")
	e.store.Fail("CommitAndSettle", 1, errInjected)
	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	storeFailure(t, res, err)
	e.clock.Add(paycore.DefaultSyncLease + time.Second)
	if _, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); errkind.KindOf(err) != errkind.Conflict {
		t.Fatalf("the next attempt: %v, want 409 (paid by the first)", err)
	}
	txs := e.txsOf(t, r.ID)
	if got := e.requestNow(t, r.ID); len(txs) != 1 || txs[0].Status != payment.TxApproved || got.Status != payment.RequestPaid || got.TransactionID != txs[0].ID {
		t.Fatalf("request %+v, transactions %+v: want paid by the first attempt alone", got, txs)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}

// The write-ahead is stored but every answer to it is lost (the SDK's
// retries spent): the attempt reads it back and goes on as written, so the
// payer is charged once and paid at once, the limits count the payment
// once, and no orphan is left for the reconciler to close as declined
// after the approval.
func TestPaymentWriteAheadStoredDespiteItsErrorGoesOn(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	daily := decimal.RequireFromString("100")
	e.m.Limits = merchant.Limits{DailyCount: 5, DailyAmount: &daily}
	e.store.PutMerchant(e.m)
	r := e.request(t, "10.00")
	e.store.CrashAfter("CreateTransaction", 1, errInjected)
	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved || res.PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("attempt whose write-ahead was stored without an answer: %+v %v, want approved and paid", res, err)
	}
	e.clock.Add(paycore.DefaultSyncLease + time.Second)
	if _, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	txs := e.txsOf(t, r.ID)
	if len(txs) != 1 || txs[0].Status != payment.TxApproved {
		t.Fatalf("transactions %+v, want the one approved", txs)
	}
	if evs := e.queue.events(); len(evs) != 1 || evs[0].TransactionStatusID != payment.TxApproved {
		t.Fatalf("notifications %+v, want the approval alone", evs)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
	w := payment.WindowAt(e.m.ID, "EUR", e.clock.Now())
	if u, _ := e.store.LimitUsageOf(ctx, w); u.DailyCount != 1 || !u.DailyAmount.Equal(decimal.RequireFromString("10")) {
		t.Fatalf("counters %+v, want the one payment", u)
	}
}

// The write-ahead's outcome is unknown (its answers lost and the read back
// failing too): the payer gets the store's error and may pay again at once;
// the limits stay held, since a transaction stored after all is closed by
// the reconciler, which gives them back then. Given back at once too, they
// would be given back twice and the merchant's cap would count too little.
func TestPaymentWriteAheadUnknownKeepsTheLimitsForTheReconciler(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	daily := decimal.RequireFromString("100")
	e.m.Limits = merchant.Limits{DailyCount: 5, DailyAmount: &daily}
	e.store.PutMerchant(e.m)
	r := e.request(t, "10.00")
	e.store.CrashAfter("CreateTransaction", 1, errInjected)
	e.store.Fail("Transaction", 1, errInjected)
	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	storeFailure(t, res, err)
	e.paysAtOnce(t, r)
	e.clock.Add(paycore.DefaultSyncLease + paycore.DefaultPendingGrace + time.Hour)
	if _, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	txs := e.txsOf(t, r.ID)
	approved, open := 0, 0
	for _, tx := range txs {
		switch tx.Status {
		case payment.TxApproved:
			approved++
		case payment.TxWaiting, payment.TxPending:
			open++
		}
	}
	if len(txs) != 2 || approved != 1 || open != 0 {
		t.Fatalf("transactions %+v, want the paying one and the orphan closed", txs)
	}
	w := payment.WindowAt(e.m.ID, "EUR", r.CreatedAt)
	if u, _ := e.store.LimitUsageOf(ctx, w); u.DailyCount != 1 || !u.DailyAmount.Equal(decimal.RequireFromString("10")) {
		t.Fatalf("counters %+v, want the one payment (the orphan's hold given back once)", u)
	}
}
