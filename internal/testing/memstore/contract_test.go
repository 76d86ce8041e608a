package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/memstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// contractStore is what both stores answer in the contract: the core's
// paycore.Store and the request writes tests seed it with.
type contractStore interface {
	paycore.Store
	CreatePaymentRequest(ctx context.Context, r *payment.Request) error
	CancelPaymentRequest(ctx context.Context, id int64, merchantID string, now time.Time) (*payment.Request, error)
	// The outbox's reconciler side (notifier.OutboxStore, and the notifier's clear).
	DueOutbox(ctx context.Context, shard int, cutoff time.Time, limit int32) ([]payment.OutboxEntry, error)
	LeaseOutbox(ctx context.Context, e payment.OutboxEntry, now time.Time) (bool, error)
	ClearOutbox(ctx context.Context, txID int64, eventID string) error
	MarkOutboxUnsent(ctx context.Context, txID int64, eventID string) error
	// The notifier's delivery side (notifier.Store).
	CreateMerchant(ctx context.Context, m *merchant.Merchant) error
	NotificationSubjects(ctx context.Context, evs []payment.NotifyEvent) (map[int64]merchant.NotificationSubject, error)
	RecordDeliveries(ctx context.Context, ws []payment.DeliveryWrite) []error
	Deliveries(ctx context.Context, requestID int64, now time.Time) ([]payment.DeliveryAttempt, error)
}

var (
	_ notifier.Store       = (*memstore.Store)(nil)
	_ notifier.OutboxStore = (*memstore.Store)(nil)
)

var (
	_ contractStore = (*memstore.Store)(nil)
	_ contractStore = (*dynamo.Store)(nil)
)

// afterContract is the store after a charge's first answer
// (paycore.AfterStore) and the merchants' dispute lists.
type afterContract interface {
	paycore.AfterStore
	Disputes(ctx context.Context, merchantID string, now time.Time) ([]payment.DisputeEntry, error)
}

var (
	_ afterContract = (*memstore.Store)(nil)
	_ afterContract = (*dynamo.Store)(nil)
)

// TestStoreContract runs the same assertions against the in-memory fake and
// against the DynamoDB store on the emulator (that half needs the stack, so
// it is skipped under -short; make test runs it on both backends). A
// difference between the two is a failure here, never a fake that passes
// tests the real store would fail.
func TestStoreContract(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { runContract(t, func(*testing.T) contractStore { return memstore.New() }) })
	t.Run("dynamo", func(t *testing.T) {
		runContract(t, func(t *testing.T) contractStore {
			st := testenv.Stack(t)
			cfg, _ := testenv.CountingAWSConfig(t)
			return dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{
				Merchants: st.Resources.Tables["MerchantsTable"], PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
				Operations: st.Resources.Tables["OperationsTable"], Transactions: st.Resources.Tables["TransactionsTable"],
			})
		})
	})
}

var seq atomic.Int64

// fixture makes ids no other test or run uses (the emulator's tables are shared).
func merchantID() string {
	return fmt.Sprintf("mer_contract_%d_%d", time.Now().UnixNano(), seq.Add(1))
}

func newID() int64 { return ids.New(time.Now()) }

func newRequest(t *testing.T, s contractStore, merchant string) *payment.Request {
	t.Helper()
	now := time.Now().UTC()
	r := &payment.Request{ID: newID(), MerchantID: merchant, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("12.50"),
		Unit: "EUR", Client: &payment.Client{Email: "ann@example.com"}, CreatedAt: now, UpdatedAt: now}
	if err := s.CreatePaymentRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func newTx(req *payment.Request, status payment.TransactionStatus, recoverAfter time.Time) *payment.Transaction {
	now := time.Now().UTC()
	id := newID()
	return &payment.Transaction{ID: id, Number: fmt.Sprintf("T%d", id), PaymentRequestID: req.ID, MerchantID: req.MerchantID,
		Status: status, Method: "card", Amount: req.Amount, Unit: req.Unit, Reference: payment.ChargeReference(id),
		RecoverAfter: recoverAfter, CreatedAt: now, UpdatedAt: now}
}

func lease(req *payment.Request, txID int64) payment.Lease {
	now := time.Now()
	return payment.Lease{RequestID: req.ID, MerchantID: req.MerchantID, TransactionID: txID, Now: now, Until: now.Add(time.Minute)}
}

func final(req *payment.Request, tx *payment.Transaction, st payment.TransactionStatus) (payment.AttemptCommit, payment.Settlement) {
	now := time.Now()
	c := payment.AttemptCommit{RequestID: req.ID, TransactionID: tx.ID, TransactionNumber: tx.Number, Status: st, Code: codes.Code("000"), Message: "done", Now: now}
	ev := payment.NotifyEvent{EventID: fmt.Sprintf("ev_%d", tx.ID), RequestID: req.ID, TransactionID: tx.ID, TransactionStatusID: st, OccurredAt: now}
	return c, payment.Settlement{TransactionID: tx.ID, Status: st, Code: "000", Message: "done", ProviderRef: "pi_1", Event: ev, Now: now}
}

// approvedWithOutbox is a request approved a minute ago: its settlement
// wrote the notification's outbox entry.
func approvedWithOutbox(t *testing.T, s contractStore) (*payment.Request, *payment.Transaction, payment.Settlement) {
	t.Helper()
	r := newRequest(t, s, merchantID())
	tx := newTx(r, payment.TxWaiting, time.Time{})
	ok(t, "create tx", s.CreateTransaction(context.Background(), tx))
	_, st := final(r, tx, payment.TxApproved)
	st.Now = time.Now().Add(-time.Minute)
	_, err := s.SettleTransaction(context.Background(), st)
	ok(t, "settle", err)
	return r, tx, st
}

func is(t *testing.T, what string, err error, want errkind.Kind) {
	t.Helper()
	if !errkind.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// concurrently runs f n times at once and counts the nil answers.
func concurrently(n int, f func(i int) error) (oks int) {
	var wg sync.WaitGroup
	var count atomic.Int64
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if f(i) == nil {
				count.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(count.Load())
}

func runContract(t *testing.T, open func(*testing.T) contractStore) {
	ctx := context.Background()

	t.Run("missing items", func(t *testing.T) {
		s := open(t)
		_, err := s.PaymentRequest(ctx, newID())
		is(t, "PaymentRequest", err, errkind.NotFound)
		_, _, err = s.PaymentRequestLease(ctx, newID())
		is(t, "PaymentRequestLease", err, errkind.NotFound)
		_, err = s.Transaction(ctx, newID())
		is(t, "Transaction", err, errkind.NotFound)
		_, err = s.TransactionByNumber(ctx, "T-none")
		is(t, "TransactionByNumber", err, errkind.NotFound)
		_, err = s.Merchant(ctx, merchantID())
		is(t, "Merchant", err, errkind.NotFound)
		_, err = s.SettleTransaction(ctx, payment.Settlement{TransactionID: newID(), Status: payment.TxApproved, Now: time.Now()})
		is(t, "SettleTransaction", err, errkind.NotFound)
		_, err = s.MarkPending(ctx, payment.Pending{TransactionID: newID(), Now: time.Now()})
		is(t, "MarkPending", err, errkind.NotFound)
		// Conditional writes on a missing item fail their condition.
		_, err = s.LeasePaymentRequest(ctx, payment.Lease{RequestID: newID(), MerchantID: "m", TransactionID: 1, Now: time.Now(), Until: time.Now()})
		is(t, "LeasePaymentRequest", err, errkind.Conflict)
		is(t, "ReleaseLease", s.ReleaseLease(ctx, newID(), 1), errkind.Conflict)
		_, err = s.BeginRefund(ctx, newID(), "m", payment.NewRefund("rf", decimal.NewFromInt(1), "EUR", time.Now()), time.Now())
		is(t, "BeginRefund", err, errkind.Conflict)
	})

	t.Run("create is create-only", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		if r.Version != 1 {
			t.Fatalf("version %d", r.Version)
		}
		dup := *r
		is(t, "second create", s.CreatePaymentRequest(ctx, &dup), errkind.Exists)
		tx := newTx(r, payment.TxWaiting, time.Time{})
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		is(t, "second tx", s.CreateTransaction(ctx, tx), errkind.Exists)
	})

	t.Run("copies in and out", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		r.Client.Email = "changed@example.com" // the caller's copy, after the write
		got, err := s.PaymentRequest(ctx, r.ID)
		ok(t, "read", err)
		if got.Client.Email != "ann@example.com" {
			t.Fatalf("stored request aliases the caller's: %q", got.Client.Email)
		}
		got.Client.Email, got.Amount = "x", decimal.NewFromInt(1)
		again, _ := s.PaymentRequest(ctx, r.ID)
		if again.Client.Email != "ann@example.com" || !again.Amount.Equal(decimal.RequireFromString("12.5")) {
			t.Fatalf("a returned request aliases the stored one: %+v", again)
		}
	})

	t.Run("attempt lease", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		other, same := decimal.RequireFromString("12.51"), decimal.RequireFromString("12.5")
		l := lease(r, 11)
		l.MerchantID = "someone-else"
		_, err := s.LeasePaymentRequest(ctx, l)
		is(t, "another merchant", err, errkind.Conflict)
		l = lease(r, 11)
		l.Amount = &other
		_, err = s.LeasePaymentRequest(ctx, l)
		is(t, "another amount", err, errkind.Conflict)
		l.Amount, l.Unit = &same, "USD"
		_, err = s.LeasePaymentRequest(ctx, l)
		is(t, "another unit", err, errkind.Conflict)
		l.Unit = "EUR"
		got, err := s.LeasePaymentRequest(ctx, l)
		ok(t, "lease", err)
		if got.Version != 2 {
			t.Fatalf("version after lease %d, want 2", got.Version)
		}
		_, err = s.LeasePaymentRequest(ctx, lease(r, 12))
		is(t, "second lease", err, errkind.Conflict)
		_, held, err := s.PaymentRequestLease(ctx, r.ID)
		ok(t, "read lease", err)
		if held.TransactionID != 11 || held.Until != l.Until.UnixMilli() {
			t.Fatalf("lease %+v", held)
		}
		is(t, "release by another", s.ReleaseLease(ctx, r.ID, 12), errkind.Conflict)
		ok(t, "release", s.ReleaseLease(ctx, r.ID, 11))
		if _, held, _ = s.PaymentRequestLease(ctx, r.ID); held.TransactionID != 0 {
			t.Fatalf("lease after release %+v", held)
		}
	})

	t.Run("30 leases at once: one wins", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		won := concurrently(30, func(i int) error { _, err := s.LeasePaymentRequest(ctx, lease(r, int64(100+i))); return err })
		if won != 1 {
			t.Fatalf("%d leases granted, want 1", won)
		}
	})

	t.Run("pending, then commit and settle together", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		tx := newTx(r, payment.TxWaiting, time.Now().Add(time.Minute))
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		_, err := s.LeasePaymentRequest(ctx, lease(r, tx.ID))
		ok(t, "lease", err)
		now := time.Now()
		p := payment.Pending{TransactionID: tx.ID, Message: "3ds", ProviderRef: "pi_first", ThreeDS: payment.ThreeDSChallenge,
			NextAction: &payment.TxNextAction{Type: "redirect"}, PendingUntil: now.Add(10 * time.Minute), RecoverAfter: now.Add(11 * time.Minute), Now: now}
		got, err := s.MarkPending(ctx, p)
		ok(t, "pending", err)
		if got.Status != payment.TxPending || got.ProviderRef != "pi_first" || got.NextAction == nil || got.PendingUntil.UnixMilli() != p.PendingUntil.UnixMilli() {
			t.Fatalf("pending tx %+v", got)
		}
		cur, err := s.MarkPending(ctx, p)
		is(t, "pending twice", err, errkind.Conflict)
		if cur == nil || cur.Status != payment.TxPending {
			t.Fatalf("a failed MarkPending returns the current transaction: %+v", cur)
		}
		until := now.Add(12 * time.Minute)
		_, err = s.CommitAttempt(ctx, payment.AttemptCommit{RequestID: r.ID, TransactionID: tx.ID + 1, Status: payment.TxPending, LeaseUntil: until, Now: now})
		is(t, "commit by a transaction without the lease", err, errkind.Conflict)
		req, err := s.CommitAttempt(ctx, payment.AttemptCommit{RequestID: r.ID, TransactionID: tx.ID, TransactionNumber: tx.Number, Status: payment.TxPending, LeaseUntil: until, Now: now})
		ok(t, "pending commit", err)
		if req.Status != payment.RequestUnpaid || req.TransactionNumber != tx.Number || *req.TransactionStatus != payment.TxPending {
			t.Fatalf("request after pending commit %+v", req)
		}
		if _, held, _ := s.PaymentRequestLease(ctx, r.ID); held.Until != until.UnixMilli() {
			t.Fatalf("lease not extended: %+v", held)
		}
		c, st := final(r, tx, payment.TxApproved)
		st.ProviderRef = "pi_second" // written once: the first stays
		ok(t, "commit and settle", s.CommitAndSettle(ctx, c, st))
		req, _ = s.PaymentRequest(ctx, r.ID)
		if req.Status != payment.RequestPaid || req.LastLog == nil || req.LastLog.Code != "000" {
			t.Fatalf("request after approval %+v", req)
		}
		if _, held, _ := s.PaymentRequestLease(ctx, r.ID); held.TransactionID != 0 {
			t.Fatalf("lease kept after a final commit: %+v", held)
		}
		got, _ = s.Transaction(ctx, tx.ID)
		if got.Status != payment.TxApproved || got.ProviderRef != "pi_first" || got.SettledAt == nil || got.NextAction != nil ||
			!got.PendingUntil.IsZero() || !got.RecoverAfter.IsZero() {
			t.Fatalf("settled tx %+v", got)
		}
		is(t, "commit and settle twice", s.CommitAndSettle(ctx, c, st), errkind.Conflict)
		cur, err = s.SettleTransaction(ctx, st)
		is(t, "settle a final transaction", err, errkind.Conflict)
		if cur == nil || cur.Status != payment.TxApproved {
			t.Fatalf("a failed settle returns the stored transaction: %+v", cur)
		}
		if byNum, err := s.TransactionByNumber(ctx, tx.Number); err != nil || byNum.ID != tx.ID {
			t.Fatalf("by number: %+v %v", byNum, err)
		}
	})

	t.Run("commit and settle is all or nothing", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		tx := newTx(r, payment.TxWaiting, time.Time{})
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		_, err := s.LeasePaymentRequest(ctx, lease(r, tx.ID))
		ok(t, "lease", err)
		_, st := final(r, tx, payment.TxDeclined)
		_, err = s.SettleTransaction(ctx, st) // the transaction is final: its guard fails
		ok(t, "settle", err)
		c, st := final(r, tx, payment.TxApproved)
		is(t, "commit and settle", s.CommitAndSettle(ctx, c, st), errkind.Conflict)
		req, held, _ := s.PaymentRequestLease(ctx, r.ID)
		if req.Status != payment.RequestUnpaid || held.TransactionID != tx.ID || req.Version != 2 {
			t.Fatalf("the request half was written: %+v %+v", req, held)
		}
		// And the other way round: the request's guard fails, the
		// transaction stays open.
		r2 := newRequest(t, s, r.MerchantID)
		tx2 := newTx(r2, payment.TxWaiting, time.Time{})
		ok(t, "create tx2", s.CreateTransaction(ctx, tx2))
		c, st = final(r2, tx2, payment.TxApproved)
		is(t, "commit without the lease", s.CommitAndSettle(ctx, c, st), errkind.Conflict)
		if got, _ := s.Transaction(ctx, tx2.ID); got.Status != payment.TxWaiting {
			t.Fatalf("the transaction half was written: %+v", got)
		}
	})

	t.Run("declined commit keeps the request payable", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		_, err := s.LeasePaymentRequest(ctx, lease(r, 5))
		ok(t, "lease", err)
		req, err := s.CommitAttempt(ctx, payment.AttemptCommit{RequestID: r.ID, TransactionID: 5, Status: payment.TxDeclined, Code: "051", Now: time.Now()})
		ok(t, "commit", err)
		if req.Status != payment.RequestUnpaid || req.TransactionID != 5 {
			t.Fatalf("%+v", req)
		}
		_, err = s.LeasePaymentRequest(ctx, lease(r, 6))
		ok(t, "lease after a decline", err)
		_, err = s.CommitAttempt(ctx, payment.AttemptCommit{RequestID: r.ID, TransactionID: 5, Status: payment.TxApproved, Now: time.Now()})
		is(t, "late commit of the first attempt", err, errkind.Conflict)
	})

	t.Run("cancelled request", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		is(t, "record on an unpaid request", s.RecordCancelledAttempt(ctx, r.ID, 7, payment.TxDeclined, "012", "x", time.Now()), errkind.Conflict)
		_, err := s.CancelPaymentRequest(ctx, r.ID, "someone-else", time.Now())
		is(t, "another merchant's", err, errkind.NotFound)
		_, err = s.CancelPaymentRequest(ctx, r.ID, r.MerchantID, time.Now())
		ok(t, "cancel", err)
		cur, err := s.CancelPaymentRequest(ctx, r.ID, r.MerchantID, time.Now())
		is(t, "cancel twice", err, errkind.Conflict)
		if cur == nil || cur.Status != payment.RequestCancelled {
			t.Fatalf("%+v", cur)
		}
		_, err = s.LeasePaymentRequest(ctx, lease(r, 8))
		is(t, "lease a cancelled request", err, errkind.Conflict)
	})

	t.Run("discard attempt", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		tx := newTx(r, payment.TxWaiting, time.Time{})
		tx.ProviderRef = "pi_seen"
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		_, err := s.LeasePaymentRequest(ctx, lease(r, tx.ID))
		ok(t, "lease", err)
		is(t, "discard a transaction the provider saw", s.DiscardAttempt(ctx, r.ID, tx.ID), errkind.Conflict)
		if _, held, _ := s.PaymentRequestLease(ctx, r.ID); held.TransactionID != tx.ID {
			t.Fatalf("lease released by a refused discard: %+v", held)
		}
		ok(t, "release", s.ReleaseLease(ctx, r.ID, tx.ID))
		tx2 := newTx(r, payment.TxWaiting, time.Time{})
		ok(t, "create tx2", s.CreateTransaction(ctx, tx2))
		_, err = s.LeasePaymentRequest(ctx, lease(r, tx2.ID))
		ok(t, "lease2", err)
		ok(t, "discard", s.DiscardAttempt(ctx, r.ID, tx2.ID))
		_, err = s.Transaction(ctx, tx2.ID)
		is(t, "discarded transaction", err, errkind.NotFound)
		if _, held, _ := s.PaymentRequestLease(ctx, r.ID); held.TransactionID != 0 {
			t.Fatalf("lease kept: %+v", held)
		}
	})

	t.Run("leased request with its transaction", func(t *testing.T) {
		s := open(t)
		taken := newRequest(t, s, merchantID())
		r := *taken
		r.Version = 0
		tx := newTx(&r, payment.TxWaiting, time.Time{})
		is(t, "request id taken", s.CreateLeasedRequestWithTransaction(ctx, &r, tx, time.Now().Add(time.Minute)), errkind.Exists)
		_, err := s.Transaction(ctx, tx.ID)
		is(t, "transaction of a refused create", err, errkind.NotFound)
		ok(t, "existing tx", s.CreateTransaction(ctx, tx))
		r.ID = newID()
		is(t, "transaction id taken", s.CreateLeasedRequestWithTransaction(ctx, &r, tx, time.Now().Add(time.Minute)), errkind.Conflict)
		_, err = s.PaymentRequest(ctx, r.ID)
		is(t, "request of a refused create", err, errkind.NotFound)
		tx2 := newTx(&r, payment.TxWaiting, time.Time{})
		ok(t, "create both", s.CreateLeasedRequestWithTransaction(ctx, &r, tx2, time.Now().Add(time.Minute)))
		if _, held, _ := s.PaymentRequestLease(ctx, r.ID); held.TransactionID != tx2.ID {
			t.Fatalf("lease %+v", held)
		}
	})

	t.Run("refund", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		tx := newTx(r, payment.TxWaiting, time.Time{})
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		rf := payment.NewRefund("rf_1", decimal.RequireFromString("5"), "EUR", time.Now())
		_, err := s.BeginRefund(ctx, tx.ID, r.MerchantID, rf, time.Now().Add(time.Minute))
		is(t, "refund of an open transaction", err, errkind.Conflict)
		_, st := final(r, tx, payment.TxApproved)
		_, err = s.SettleTransaction(ctx, st)
		ok(t, "settle", err)
		_, err = s.BeginRefund(ctx, tx.ID, "someone-else", rf, time.Now().Add(time.Minute))
		is(t, "another merchant's refund", err, errkind.Conflict)
		won := concurrently(30, func(i int) error {
			rf := payment.NewRefund(fmt.Sprintf("rf_%d", i), decimal.RequireFromString("5"), "EUR", time.Now())
			_, err := s.BeginRefund(ctx, tx.ID, r.MerchantID, rf, time.Now().Add(-time.Second))
			return err
		})
		if won != 1 {
			t.Fatalf("%d refunds begun on one transaction, want 1", won)
		}
		got, _ := s.Transaction(ctx, tx.ID)
		if got.Refund == nil || got.Refund.Status != payment.RefundProcessing {
			t.Fatalf("%+v", got.Refund)
		}
		open, err := s.OpenAttempts(ctx, int(uint64(tx.ID)%payment.OpenShards), time.Now(), 1000)
		ok(t, "open attempts", err)
		if !containsTx(open, tx.ID) {
			t.Fatalf("a refund in processing is not open for the reconciler")
		}
		_, err = s.CompleteRefund(ctx, tx.ID, "rf_other", payment.RefundRefunded, "re_1", "000", time.Now())
		is(t, "complete another refund", err, errkind.Conflict)
		done, err := s.CompleteRefund(ctx, tx.ID, got.Refund.ID, payment.RefundRefunded, "re_1", "000", time.Now())
		ok(t, "complete", err)
		if done.Refund.Status != payment.RefundRefunded || done.Refund.CompletedAt == nil || !done.RecoverAfter.IsZero() {
			t.Fatalf("%+v %+v", done, done.Refund)
		}
		_, err = s.CompleteRefund(ctx, tx.ID, got.Refund.ID, payment.RefundFailed, "", "999", time.Now())
		is(t, "complete twice", err, errkind.Conflict)
		open, _ = s.OpenAttempts(ctx, int(uint64(tx.ID)%payment.OpenShards), time.Now(), 1000)
		if containsTx(open, tx.ID) {
			t.Fatalf("a completed refund is still open")
		}
	})

	t.Run("after the first answer", func(t *testing.T) {
		s := open(t)
		as := s.(afterContract)
		r := newRequest(t, s, merchantID())
		tx := newTx(r, payment.TxWaiting, time.Time{})
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		_, st := final(r, tx, payment.TxApproved)
		_, err := s.SettleTransaction(ctx, st)
		ok(t, "settle", err)
		_, err = as.WriteRefund(ctx, tx.ID, 0, payment.NewRefund("rf_x", decimal.RequireFromString("5"), "EUR", time.Now()), time.Time{})
		is(t, "refund write without a refund", err, errkind.Conflict)
		begun, err := s.BeginRefund(ctx, tx.ID, r.MerchantID, payment.NewRefund("rf_a", decimal.RequireFromString("12.5"), "EUR", time.Now()), time.Now().Add(time.Hour))
		ok(t, "begin refund", err)
		won := concurrently(30, func(i int) error {
			rf := *begun.Refund
			rf.AcquirerStatus, rf.ProviderRef = "pending", fmt.Sprintf("re_%d", i)
			_, err := as.WriteRefund(ctx, tx.ID, 0, rf, time.Time{})
			return err
		})
		if won != 1 {
			t.Fatalf("%d refund writes at one revision succeeded, want 1", won)
		}
		got, _ := s.Transaction(ctx, tx.ID)
		if got.Refund.Rev != 1 || got.Refund.AcquirerStatus != "pending" {
			t.Fatalf("refund after the writes %+v", got.Refund)
		}
		won = concurrently(30, func(i int) error {
			a := payment.After{Dispute: &payment.Dispute{ID: "dp_1", Status: "needs_response", Amount: tx.Amount, Unit: "EUR",
				LastEventID: fmt.Sprintf("evt_%d", i)}}
			_, err := as.WriteAfter(ctx, tx.ID, 0, a, time.Now().Add(-time.Second))
			return err
		})
		if won != 1 {
			t.Fatalf("%d after writes at one revision succeeded, want 1", won)
		}
		got, _ = s.Transaction(ctx, tx.ID)
		if got.After == nil || got.After.Rev != 1 || got.After.Dispute == nil || got.After.Dispute.ID != "dp_1" {
			t.Fatalf("after record %+v", got.After)
		}
		shard := int(uint64(tx.ID) % payment.OpenShards)
		due, _ := s.OpenAttempts(ctx, shard, time.Now(), 1000)
		if !containsTx(due, tx.ID) {
			t.Fatal("a write that opens the transaction did not list it for the reconciler")
		}
		next := time.Now().Add(-time.Millisecond * 500)
		is(t, "back-off from a stale look", as.DeferRecovery(ctx, tx.ID, got.RecoverAfter.Add(-time.Second), next, 1), errkind.Conflict)
		ok(t, "back-off", as.DeferRecovery(ctx, tx.ID, got.RecoverAfter, next, 1))
		if fresh, _ := s.OpenAttempts(ctx, shard, time.Now(), 1000); containsTx(fresh, tx.ID) {
			t.Fatal("a backed-off attempt is still in its fresh shard")
		}
		back, _ := s.OpenAttempts(ctx, payment.OpenShards+shard, time.Now(), 1000)
		if !containsTx(back, tx.ID) {
			t.Fatal("a backed-off attempt is not in its back-off shard")
		}
		cur, _ := s.Transaction(ctx, tx.ID)
		if cur.RecoverTries != 1 {
			t.Fatalf("recover tries %d", cur.RecoverTries)
		}
		is(t, "close a look that is no longer current", as.CloseOpen(ctx, tx.ID, next.Add(-time.Second)), errkind.Conflict)
		ok(t, "close", as.CloseOpen(ctx, tx.ID, cur.RecoverAfter))
		ok(t, "close again", as.CloseOpen(ctx, tx.ID, cur.RecoverAfter))
		if back, _ := s.OpenAttempts(ctx, payment.OpenShards+shard, time.Now(), 1000); containsTx(back, tx.ID) {
			t.Fatal("a closed transaction is still open")
		}
		e := payment.DisputeEntry{TransactionID: tx.ID, PaymentRequestID: r.ID, DisputeID: "dp_1", Status: "under_review",
			Amount: tx.Amount, Unit: "EUR", UpdatedAt: time.Now().UTC().Truncate(time.Second), Rev: 2}
		ok(t, "dispute entry", as.PutDisputeEntry(ctx, r.MerchantID, e))
		stale := e
		stale.Status, stale.Rev = "needs_response", 1
		ok(t, "stale dispute entry", as.PutDisputeEntry(ctx, r.MerchantID, stale))
		ds, err := as.Disputes(ctx, r.MerchantID, time.Now())
		ok(t, "disputes", err)
		if len(ds) != 1 || ds[0].Status != "under_review" || ds[0].Rev != 2 {
			t.Fatalf("disputes %+v", ds)
		}
	})

	t.Run("open attempts", func(t *testing.T) {
		s := open(t)
		r := newRequest(t, s, merchantID())
		due := newTx(r, payment.TxWaiting, time.Now().Add(-time.Minute))
		later := newTx(r, payment.TxWaiting, time.Now().Add(time.Hour))
		ok(t, "due", s.CreateTransaction(ctx, due))
		ok(t, "later", s.CreateTransaction(ctx, later))
		shardOf := func(id int64) int { return int(uint64(id) % payment.OpenShards) }
		got, err := s.OpenAttempts(ctx, shardOf(due.ID), time.Now(), 1000)
		ok(t, "open", err)
		if !containsTx(got, due.ID) {
			t.Fatalf("a due attempt is missing")
		}
		got, _ = s.OpenAttempts(ctx, shardOf(later.ID), time.Now(), 1000)
		if containsTx(got, later.ID) {
			t.Fatalf("an attempt not yet due is listed")
		}
		_, st := final(r, due, payment.TxDeclined)
		_, err = s.SettleTransaction(ctx, st)
		ok(t, "settle", err)
		got, _ = s.OpenAttempts(ctx, shardOf(due.ID), time.Now(), 1000)
		if containsTx(got, due.ID) {
			t.Fatalf("a settled attempt is still open")
		}
	})

	t.Run("outbox", func(t *testing.T) {
		s := open(t)
		_, tx, st := approvedWithOutbox(t, s)
		entry := findEntry(t, s, st.Event.EventID, time.Now())
		if entry == nil || entry.Event.TransactionID != tx.ID || entry.Event.TransactionStatusID != payment.TxApproved {
			t.Fatalf("the settle's outbox entry: %+v", entry)
		}
		if e := findEntry(t, s, st.Event.EventID, st.Now.Add(-time.Second)); e != nil {
			t.Fatalf("an entry listed before it was due: %+v", e)
		}
		won := concurrently(30, func(int) error {
			if got, err := s.LeaseOutbox(ctx, *entry, time.Now()); err != nil || !got {
				return errors.New("lost")
			}
			return nil
		})
		if won != 1 {
			t.Fatalf("30 reconcilers leased one entry %d times, want once", won)
		}
		ok(t, "mark unsent", s.MarkOutboxUnsent(ctx, tx.ID, st.Event.EventID))
		if e := findEntry(t, s, st.Event.EventID, time.Unix(1, 0)); e == nil {
			t.Fatal("an entry marked unsent is not due at the epoch")
		}
		ok(t, "clear another event", s.ClearOutbox(ctx, tx.ID, "ev_other"))
		if findEntry(t, s, st.Event.EventID, time.Now()) == nil {
			t.Fatal("clearing another event removed the entry")
		}
		ok(t, "clear", s.ClearOutbox(ctx, tx.ID, st.Event.EventID))
		if e := findEntry(t, s, st.Event.EventID, time.Now()); e != nil {
			t.Fatalf("a cleared entry is still due: %+v", e)
		}
		if got, err := s.LeaseOutbox(ctx, *entry, time.Now()); err != nil || got {
			t.Fatalf("lease of a cleared entry: %v %v", got, err)
		}
		ok(t, "clear a missing transaction", s.ClearOutbox(ctx, newID(), "ev_none"))
	})

	t.Run("notification subjects", func(t *testing.T) {
		s := open(t)
		// An API key hash: DynamoDB refuses an empty string as a key of the
		// merchants table's index on it.
		m := &merchant.Merchant{ID: merchantID(), Name: "Contract Shop", NotifyURL: "https://shop.example/notify", APIKeyHash: merchantID()}
		ok(t, "create merchant", s.CreateMerchant(ctx, m))
		is(t, "second merchant", s.CreateMerchant(ctx, &merchant.Merchant{ID: m.ID, APIKeyHash: merchantID()}), errkind.Exists)
		r := newRequest(t, s, m.ID)
		tx := newTx(r, payment.TxWaiting, time.Time{})
		ok(t, "create tx", s.CreateTransaction(ctx, tx))
		missing := newID()
		evs := []payment.NotifyEvent{
			{EventID: "ev_a", MerchantID: m.ID, RequestID: r.ID, TransactionID: tx.ID},
			{EventID: "ev_b", RequestID: r.ID, TransactionID: missing}, // no merchant named, no transaction
		}
		subs, err := s.NotificationSubjects(ctx, evs)
		ok(t, "subjects", err)
		a, b := subs[tx.ID], subs[missing]
		if len(subs) != 2 || a.Transaction == nil || a.Transaction.ID != tx.ID || a.Request == nil || a.Request.ID != r.ID ||
			a.Merchant == nil || a.Merchant.ID != m.ID || a.Merchant.NotifyURL != m.NotifyURL {
			t.Fatalf("subject of a whole event: %+v", a)
		}
		if b.Transaction != nil || b.Request == nil || b.Merchant != nil {
			t.Fatalf("subject of an event with no transaction or merchant: %+v", b)
		}
	})

	t.Run("delivery records clear a first attempt's outbox", func(t *testing.T) {
		s := open(t)
		r, tx, st := approvedWithOutbox(t, s)
		at := time.Now().UTC().Truncate(time.Millisecond)
		attempt := func(n int, outcome string) payment.DeliveryAttempt {
			return payment.DeliveryAttempt{RequestID: r.ID, EventID: st.Event.EventID, Attempt: n, At: at.Add(time.Duration(n) * time.Second),
				URL: "https://shop.example/notify", StatusCode: 500, LatencyMS: 12, Outcome: outcome}
		}
		other := payment.DeliveryAttempt{RequestID: r.ID, EventID: "ev_other", Attempt: 1, At: at, URL: "https://shop.example/notify", Outcome: "delivered"}
		errs := s.RecordDeliveries(ctx, []payment.DeliveryWrite{
			{Attempt: other, ClearOutboxOf: tx.ID}, // another event's first attempt: the entry stays
		})
		ok(t, "record another event's", errs[0])
		if findEntry(t, s, st.Event.EventID, time.Now()) == nil {
			t.Fatal("another event's record cleared the entry")
		}
		errs = s.RecordDeliveries(ctx, []payment.DeliveryWrite{
			{Attempt: attempt(1, "retry"), ClearOutboxOf: tx.ID},
			{Attempt: attempt(2, "delivered")},
			{Attempt: attempt(3, "delivered"), ClearOutboxOf: tx.ID}, // the entry is gone by then: recorded alone
		})
		for i, err := range errs {
			ok(t, fmt.Sprintf("record %d", i), err)
		}
		if e := findEntry(t, s, st.Event.EventID, time.Now()); e != nil {
			t.Fatalf("the first attempt's record left the entry: %+v", e)
		}
		got, err := s.Deliveries(ctx, r.ID, time.Now())
		ok(t, "deliveries", err)
		want := []payment.DeliveryAttempt{other, attempt(1, "retry"), attempt(2, "delivered"), attempt(3, "delivered")}
		if len(got) != len(want) {
			t.Fatalf("%d deliveries, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			if got[i].EventID != want[i].EventID || got[i].Attempt != want[i].Attempt || !got[i].At.Equal(want[i].At) ||
				got[i].Outcome != want[i].Outcome || got[i].StatusCode != want[i].StatusCode || got[i].LatencyMS != want[i].LatencyMS {
				t.Fatalf("delivery %d: %+v, want %+v", i, got[i], want[i])
			}
		}
	})

	t.Run("limit counters", func(t *testing.T) {
		s := open(t)
		w := payment.WindowAt(merchantID(), "EUR", time.Now())
		ten := decimal.NewFromInt(10)
		twentyFive := decimal.NewFromInt(25)
		caps := payment.LimitCaps{DailyCount: 2, DailyAmount: &twentyFive}
		ok(t, "release before any reservation", s.ReleaseLimits(ctx, w, ten))
		ok(t, "first", s.ReserveLimits(ctx, w, ten, caps))
		ok(t, "second", s.ReserveLimits(ctx, w, ten, caps))
		is(t, "third (count)", s.ReserveLimits(ctx, w, decimal.NewFromInt(1), caps), errkind.Conflict)
		ok(t, "release", s.ReleaseLimits(ctx, w, ten))
		is(t, "over the amount", s.ReserveLimits(ctx, w, decimal.RequireFromString("15.01"), caps), errkind.Conflict)
		ok(t, "up to the amount", s.ReserveLimits(ctx, w, decimal.NewFromInt(15), caps))
		u, err := s.LimitUsageOf(ctx, w)
		ok(t, "usage", err)
		if u.DailyCount != 2 || u.MonthlyCount != 2 || !u.DailyAmount.Equal(twentyFive) || !u.MonthlyAmount.Equal(twentyFive) {
			t.Fatalf("usage %+v", u)
		}
		w2 := w
		w2.MerchantID = merchantID()
		won := concurrently(30, func(int) error { return s.ReserveLimits(ctx, w2, ten, payment.LimitCaps{MonthlyCount: 3}) })
		if won != 3 {
			t.Fatalf("30 reservations at once under a cap of 3: %d granted", won)
		}
	})
}

// findEntry looks for eventID's entry among every shard's entries due
// before cutoff.
func findEntry(t *testing.T, s contractStore, eventID string, cutoff time.Time) *payment.OutboxEntry {
	t.Helper()
	for shard := range payment.OutboxAllShards {
		es, err := s.DueOutbox(context.Background(), shard, cutoff, 1000)
		ok(t, "due outbox", err)
		for _, e := range es {
			if e.Event.EventID == eventID {
				return &e
			}
		}
	}
	return nil
}

func containsTx(txs []*payment.Transaction, id int64) bool {
	for _, t := range txs {
		if t.ID == id {
			return true
		}
	}
	return false
}
