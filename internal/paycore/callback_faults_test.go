package paycore_test

// A provider callback (the asynchronous result of a pending UPI attempt)
// under store failures: the request commit decides, the settle records
// that decision with its notification. A callback whose processing failed
// is retried by the provider and applied once: the commit's decision
// stands against a reordered result, and nothing is notified twice.
// TestFastCallbackRetryAfterAFailedSettle (fast_flows_test.go) covers the
// provider's plain retry after a failed settle.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/provider"
)

func approval(r *payment.Request, res paycore.Result) paycore.ProviderResult {
	return paycore.ProviderResult{EventID: "evt_ok", TransactionID: res.TransactionID, PaymentRequestID: r.ID,
		Status: provider.Approved, ProviderRef: "upi_ok"}
}

func decline(r *payment.Request, res paycore.Result) paycore.ProviderResult {
	return paycore.ProviderResult{EventID: "evt_no", TransactionID: res.TransactionID, PaymentRequestID: r.ID,
		Status: provider.Declined, Code: codes.DeclinedContactIssuer}
}

// callbackFaulted leaves a UPI attempt pending, makes the store's next op
// go wrong as f and delivers the provider's approval: the callback must
// answer the store's error.
func callbackFaulted(t *testing.T, op string, f storeFault) (*fastEnv, *payment.Request, paycore.Result) {
	t.Helper()
	e := newFastEnv(t)
	r, res := e.pendingUPI(t)
	e.inject(op, f)
	if _, err := e.svc.Settle(context.Background(), approval(r, res)); !errors.Is(err, errInjected) {
		t.Fatalf("callback with %s %s: %v, want the store's error", op, f, err)
	}
	return e, r, res
}

// paidOnceBy: tx approved, the request paid by it, the approval in the
// outbox and sent times.
func (e *fastEnv) paidOnceBy(t *testing.T, r *payment.Request, txID int64, sent int) {
	t.Helper()
	tx, _ := e.store.Transaction(context.Background(), txID)
	got := e.requestNow(t, r.ID)
	if tx.Status != payment.TxApproved || got.Status != payment.RequestPaid || got.TransactionID != txID {
		t.Fatalf("transaction %d, request %+v; want approved and paid by %d", tx.Status, got, txID)
	}
	if ev := e.store.Outbox(txID); ev == nil || ev.TransactionStatusID != payment.TxApproved || ev.PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("outbox %+v, want the approval", ev)
	}
	evs := e.queue.events()
	if len(evs) != sent {
		t.Fatalf("%d notifications sent, want %d", len(evs), sent)
	}
	for _, ev := range evs {
		if ev.TransactionStatusID != payment.TxApproved || ev.PaymentRequestStatusID != payment.RequestPaid {
			t.Fatalf("notification %+v, want the approval", ev)
		}
	}
}

// The approval's settle fails after its commit paid the request; before
// the provider retries, a reordered decline of the same charge arrives.
// The commit decided: the decline settles the transaction approved (never
// declined under a paid request), and the approval's retry is a duplicate.
func TestCallbackSettleFailsTheCommitDecides(t *testing.T) {
	e, r, res := callbackFaulted(t, "SettleTransaction", failsBeforeApplying)
	ctx := context.Background()
	if tx, _ := e.store.Transaction(ctx, res.TransactionID); tx.Status != payment.TxPending || e.requestNow(t, r.ID).Status != payment.RequestPaid {
		t.Fatalf("after the failed settle: transaction %d, want pending under a paid request", tx.Status)
	}
	st, err := e.svc.Settle(ctx, decline(r, res))
	if err != nil || !st.Changed || st.Transaction.Status != payment.TxApproved {
		t.Fatalf("reordered decline: %+v %v, want it to settle the committed approval", st, err)
	}
	st, err = e.svc.Settle(ctx, approval(r, res))
	if err != nil || !st.Duplicate || st.Changed {
		t.Fatalf("the approval's retry: %+v %v, want a duplicate", st, err)
	}
	e.paidOnceBy(t, r, res.TransactionID, 1)
}

// The settle applies and its answer is lost: the provider's retries (and a
// reordered decline) are duplicates that write and send nothing; the
// notification waits in the outbox for the notifier's sweep.
func TestCallbackSettleAnswerLostAppliedOnce(t *testing.T) {
	e, r, res := callbackFaulted(t, "SettleTransaction", answerLost)
	ctx := context.Background()
	before := e.requestNow(t, r.ID).Version
	commits, settles := e.store.Calls("CommitAttempt"), e.store.Calls("SettleTransaction")
	for _, again := range []paycore.ProviderResult{approval(r, res), approval(r, res), decline(r, res)} {
		st, err := e.svc.Settle(ctx, again)
		if err != nil || !st.Duplicate || st.Transaction.Status != payment.TxApproved {
			t.Fatalf("retry %s: %+v %v, want a duplicate of the approval", again.EventID, st, err)
		}
	}
	if e.requestNow(t, r.ID).Version != before || e.store.Calls("CommitAttempt") != commits || e.store.Calls("SettleTransaction") != settles {
		t.Fatal("a duplicate callback wrote, or tried to write, again")
	}
	e.paidOnceBy(t, r, res.TransactionID, 0)
}

// The commit fails: nothing is written (the transaction pending, the
// request unpaid and held by the attempt), and the provider's retry
// applies the result once.
func TestCallbackCommitFails(t *testing.T) {
	e, r, res := callbackFaulted(t, "CommitAttempt", failsBeforeApplying)
	ctx := context.Background()
	cur, held, _ := e.store.PaymentRequestLease(ctx, r.ID)
	tx, _ := e.store.Transaction(ctx, res.TransactionID)
	if cur.Status != payment.RequestUnpaid || held.TransactionID != res.TransactionID || tx.Status != payment.TxPending {
		t.Fatalf("after the failed commit: request %+v lease %+v transaction %d; want unpaid, held, pending", cur, held, tx.Status)
	}
	if st, err := e.svc.Settle(ctx, approval(r, res)); err != nil || !st.Changed {
		t.Fatalf("retry: %+v %v", st, err)
	}
	e.paidOnceBy(t, r, res.TransactionID, 1)
}

// The settle fails and the provider never calls again: the reconciler,
// once the attempt's window has passed, asks the acquirer and settles it.
func TestCallbackSettleFailsFinishedByTheReconciler(t *testing.T) {
	e, r, res := callbackFaulted(t, "SettleTransaction", failsBeforeApplying)
	ctx := context.Background()
	tx, _ := e.store.Transaction(ctx, res.TransactionID)
	e.clock.Add(tx.RecoverAfter.Sub(e.clock.Now()) + time.Minute)
	if n, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("reconciler: %d %v", n, err)
	}
	e.paidOnceBy(t, r, res.TransactionID, 1)
}

// Between the commit and the settle (here: the settle failed, and nothing
// has retried it yet) the request shows the approval; the transaction
// lookups show the same decision although the stored transaction still
// waits for its settle.
func TestLookupShowsTheCommittedDecisionBeforeTheSettle(t *testing.T) {
	e, r, res := callbackFaulted(t, "SettleTransaction", failsBeforeApplying)
	ctx := context.Background()
	if tx, _ := e.store.Transaction(ctx, res.TransactionID); tx.Status != payment.TxPending {
		t.Fatalf("stored transaction %d, want it still pending", tx.Status)
	}
	lookup := paymentsapi.TransactionLookup(e.svc, "https://pay.example")
	for _, ref := range []string{strconv.FormatInt(res.TransactionID, 10), res.TransactionNumber} {
		req := httptest.NewRequest(http.MethodGet, "/transactions/"+ref, nil)
		req = req.WithContext(apikey.WithMerchant(req.Context(), e.m))
		req.SetPathValue("id", ref)
		w := httptest.NewRecorder()
		if err := lookup(w, req); err != nil {
			t.Fatal(err)
		}
		var v paycore.TransactionView
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		if v.TransactionStatusID != payment.TxApproved || v.LastLog.TransactionStatusID != payment.TxApproved || v.NextAction != nil {
			t.Fatalf("lookup by %s: %s, want the committed approval", ref, w.Body)
		}
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request %d, want paid", got.Status)
	}
}
