package paycore_test

// The 3-D Secure challenge's result under store failures: the payer's
// answer is booked at the acquirer first, then the request commit, then
// the transaction's settle with its notification. A failure between them
// leaves the commit's decision, which the payer's retry (a reload, a
// second click, whatever it answers) or the reconciler completes, once.
// TestFastThreeDSChallengeCompletedOnce and
// TestFastThreeDSCompletionAfterExpiry (fast_flows_test.go) cover the
// paths without failures.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
)

// challengeFaulted opens a 3-D Secure challenge, makes the store's next op
// go wrong as f and has the payer authenticate: the completion must answer
// the store's error.
func challengeFaulted(t *testing.T, op string, f storeFault) (*fastEnv, *payment.Request, paycore.Result) {
	t.Helper()
	e := newFastEnv(t)
	r, res := e.challenged(t)
	e.inject(op, f)
	if _, err := e.svc.CompleteChallenge(context.Background(), "ev1", res.TransactionID, r.ID, true); !errors.Is(err, errInjected) {
		t.Fatalf("completion with %s %s: %v, want the store's error", op, f, err)
	}
	return e, r, res
}

// committedNotSettled: the commit paid the request for tx, whose settle is
// missing (still pending, nothing in the outbox, nothing sent).
func (e *fastEnv) committedNotSettled(t *testing.T, r *payment.Request, txID int64) {
	t.Helper()
	tx, err := e.store.Transaction(context.Background(), txID)
	if err != nil || tx.Status != payment.TxPending || e.store.Outbox(txID) != nil {
		t.Fatalf("transaction %+v (%v), want pending with an empty outbox", tx, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid || got.TransactionID != txID {
		t.Fatalf("request %+v, want paid by %d (the commit came first)", got, txID)
	}
	if n := len(e.queue.events()); n != 0 {
		t.Fatalf("%d notifications before the settle", n)
	}
}

// approvedOnce: tx approved after an authenticated challenge, the request
// paid by it, notified once (sent or in the outbox), charged once.
func (e *fastEnv) approvedOnce(t *testing.T, r *payment.Request, txID int64, sent int) {
	t.Helper()
	tx, _ := e.store.Transaction(context.Background(), txID)
	if tx.Status != payment.TxApproved || tx.ThreeDS != payment.ThreeDSAuthenticated {
		t.Fatalf("transaction %d, 3-D Secure %q; want approved, authenticated", tx.Status, tx.ThreeDS)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid || got.TransactionID != txID {
		t.Fatalf("request %+v, want paid by %d", got, txID)
	}
	if ev := e.store.Outbox(txID); ev == nil || ev.TransactionStatusID != payment.TxApproved || ev.PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("outbox %+v, want the approval", ev)
	}
	if evs := e.queue.events(); len(evs) != sent {
		t.Fatalf("%d notifications sent, want %d", len(evs), sent)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}

// The settle fails after the commit paid the request: the payer's retry
// answering "fail" this time still completes the approval the acquirer
// booked first, and it is this retry that settles and notifies.
func TestThreeDSSettleFailsRetriedByThePayer(t *testing.T) {
	e, r, res := challengeFaulted(t, "SettleTransaction", failsBeforeApplying)
	ctx := context.Background()
	e.committedNotSettled(t, r, res.TransactionID)
	st, err := e.svc.CompleteChallenge(ctx, "ev2", res.TransactionID, r.ID, false)
	if err != nil || !st.Changed || st.Transaction.Status != payment.TxApproved {
		t.Fatalf("retry: %+v %v, want this call to settle the approval", st, err)
	}
	e.approvedOnce(t, r, res.TransactionID, 1)
}

// The same failure and the payer never comes back: once the challenge's
// window has passed, the reconciler asks the acquirer and settles the
// approval as authenticated.
func TestThreeDSSettleFailsFinishedByTheReconciler(t *testing.T) {
	e, r, res := challengeFaulted(t, "SettleTransaction", failsBeforeApplying)
	ctx := context.Background()
	e.clock.Add(paycore.DefaultChallengeWindow + paycore.DefaultPendingGrace + time.Minute)
	if n, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("reconciler: %d %v", n, err)
	}
	e.approvedOnce(t, r, res.TransactionID, 1)
}

// The settle applies and its answer is lost: the retry changes nothing
// and sends nothing more (the notification waits in the outbox, which the
// notifier's sweep sends).
func TestThreeDSSettleAnswerLost(t *testing.T) {
	e, r, res := challengeFaulted(t, "SettleTransaction", answerLost)
	ctx := context.Background()
	st, err := e.svc.CompleteChallenge(ctx, "ev2", res.TransactionID, r.ID, true)
	if err != nil || st.Changed || st.Transaction.Status != payment.TxApproved {
		t.Fatalf("retry: %+v %v, want the stored approval, unchanged", st, err)
	}
	e.approvedOnce(t, r, res.TransactionID, 0)
}

// The commit fails: nothing is written (the request unpaid, the attempt
// still holding it, the transaction pending), and the retry completes.
func TestThreeDSCommitFails(t *testing.T) {
	e, r, res := challengeFaulted(t, "CommitAttempt", failsBeforeApplying)
	ctx := context.Background()
	cur, held, _ := e.store.PaymentRequestLease(ctx, r.ID)
	tx, _ := e.store.Transaction(ctx, res.TransactionID)
	if cur.Status != payment.RequestUnpaid || held.TransactionID != res.TransactionID || tx.Status != payment.TxPending {
		t.Fatalf("after the failed commit: request %+v lease %+v transaction %d; want unpaid, held, pending", cur, held, tx.Status)
	}
	if st, err := e.svc.CompleteChallenge(ctx, "ev2", res.TransactionID, r.ID, true); err != nil || !st.Changed {
		t.Fatalf("retry: %+v %v", st, err)
	}
	e.approvedOnce(t, r, res.TransactionID, 1)
}
