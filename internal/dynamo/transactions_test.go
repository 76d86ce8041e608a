package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

func txStore(t *testing.T) (*dynamo.Store, *testenv.CallCounter) {
	t.Helper()
	st := testenv.Stack(t)
	cfg, calls := testenv.CountingAWSConfig(t)
	return dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{
		Merchants: st.Resources.Tables["MerchantsTable"], PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
		Operations: st.Resources.Tables["OperationsTable"], Transactions: st.Resources.Tables["TransactionsTable"],
	}), calls
}

func newRequest(t *testing.T, s *dynamo.Store, merchantID string) *payment.Request {
	t.Helper()
	now := time.Now().UTC()
	r := &payment.Request{ID: ids.New(now), MerchantID: merchantID, Status: payment.RequestUnpaid,
		Amount: decimal.RequireFromString("12.50"), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	if err := s.CreatePaymentRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAttemptLeaseAndCommit(t *testing.T) {
	s, calls := txStore(t)
	ctx := context.Background()
	now := time.Now()
	r := newRequest(t, s, "mer_a")
	lease := func(tx int64, at time.Time, mer string, amt *decimal.Decimal) error {
		_, err := s.LeasePaymentRequest(ctx, payment.Lease{RequestID: r.ID, MerchantID: mer, TransactionID: tx, Now: at, Until: at.Add(time.Second), Amount: amt})
		return err
	}
	other := decimal.RequireFromString("12.51")
	same := decimal.RequireFromString("12.5")
	if err := lease(1, now, "mer_b", nil); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("another merchant's lease: %v", err)
	}
	if err := lease(1, now, "mer_a", &other); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("other amount: %v", err)
	}
	calls.Reset()
	if err := lease(1, now, "mer_a", &same); err != nil {
		t.Fatal(err)
	}
	if got := calls.Calls(); len(got) != 1 {
		t.Fatalf("lease made %v", got)
	}
	if err := lease(2, now.Add(500*time.Millisecond), "mer_a", nil); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("second lease while the first runs: %v", err)
	}
	_, l, err := s.PaymentRequestLease(ctx, r.ID)
	if err != nil || l.TransactionID != 1 || !l.Active(now) {
		t.Fatalf("%+v %v", l, err)
	}
	// The lease expired: still no takeover, since the first attempt may have
	// charged; once it is finished (here: released, as for an attempt that
	// never wrote its transaction) another attempt may lease, and the first
	// can no longer commit.
	if err := lease(2, now.Add(2*time.Second), "mer_a", nil); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("lease after expiry while the first attempt is unfinished: %v", err)
	}
	if err := s.ReleaseLease(ctx, r.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := lease(2, now.Add(2*time.Second), "mer_a", nil); err != nil {
		t.Fatalf("lease after the first attempt was finished: %v", err)
	}
	commit := func(tx int64, st payment.TransactionStatus) (*payment.Request, error) {
		return s.CommitAttempt(ctx, payment.AttemptCommit{RequestID: r.ID, TransactionID: tx, TransactionNumber: "TX" + strconv.FormatInt(tx, 10),
			Status: st, Code: "", Message: "Approved", Now: now})
	}
	if _, err := commit(1, payment.TxApproved); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("commit of a lapsed lease: %v", err)
	}
	got, err := commit(2, payment.TxApproved)
	if err != nil || got.Status != payment.RequestPaid || got.TransactionID != 2 || got.LastLog.TransactionStatusID != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := commit(2, payment.TxApproved); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("second commit: %v", err)
	}
	if err := lease(3, now.Add(time.Hour), "mer_a", nil); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("lease on a paid request: %v", err)
	}
	// The request commit writes no notification: the transaction's settle
	// does, one outbox entry per transaction.
	if hasOutbox(t, s, r.ID, 2) {
		t.Fatal("the request commit wrote an outbox entry")
	}
	tx := &payment.Transaction{ID: ids.New(now), Number: "TXO", PaymentRequestID: r.ID, MerchantID: "mer_a", Status: payment.TxWaiting,
		Method: "wallet", Amount: r.Amount, Unit: r.Unit, Reference: "ptx_o", RecoverAfter: now.Add(time.Minute), CreatedAt: now, UpdatedAt: now}
	if err := s.CreateTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	ev, err := payment.NewNotifyEvent(r, tx.ID, payment.TxApproved, payment.LastLog{TransactionStatusID: 1, Message: "Approved"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxApproved, Message: "Approved", Event: ev, Now: now}); err != nil {
		t.Fatal(err)
	}
	if !hasOutbox(t, s, r.ID, tx.ID) {
		t.Fatalf("no outbox entry for transaction %d", tx.ID)
	}
}

func hasOutbox(t *testing.T, s *dynamo.Store, requestID, txID int64) bool {
	t.Helper()
	for shard := 0; shard < payment.OutboxAllShards; shard++ {
		es, err := s.DueOutbox(context.Background(), shard, time.Now().Add(time.Hour), 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Event.RequestID == requestID && e.Event.TransactionID == txID {
				return true
			}
		}
	}
	return false
}

// Cancelling and approving race on the same request: exactly one wins.
func TestCancelVersusApprove(t *testing.T) {
	s, _ := txStore(t)
	ctx := context.Background()
	wins := map[string]int{}
	for i := 0; i < 20; i++ {
		r := newRequest(t, s, "mer_race")
		now := time.Now()
		if _, err := s.LeasePaymentRequest(ctx, payment.Lease{RequestID: r.ID, MerchantID: "mer_race", TransactionID: 7, Now: now, Until: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var cancelErr, commitErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, cancelErr = s.CancelPaymentRequest(ctx, r.ID, "mer_race", now)
		}()
		go func() {
			defer wg.Done()
			_, commitErr = s.CommitAttempt(ctx, payment.AttemptCommit{RequestID: r.ID, TransactionID: 7, TransactionNumber: "TX7", Status: payment.TxApproved, Message: "Approved", Now: now})
		}()
		wg.Wait()
		if (cancelErr == nil) == (commitErr == nil) {
			t.Fatalf("cancel %v, approve %v: exactly one must win", cancelErr, commitErr)
		}
		got, _ := s.PaymentRequest(ctx, r.ID)
		if cancelErr == nil {
			wins["cancel"]++
			if got.Status != payment.RequestCancelled {
				t.Fatalf("%+v", got)
			}
		} else {
			wins["approve"]++
			if got.Status != payment.RequestPaid {
				t.Fatalf("%+v", got)
			}
		}
	}
	t.Logf("wins: %v", wins)
}

func TestTransactionStates(t *testing.T) {
	s, _ := txStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	tx := &payment.Transaction{ID: ids.New(now), Number: "TXTEST" + strconv.FormatInt(now.UnixNano(), 36), PaymentRequestID: 99, MerchantID: "mer_a",
		Status: payment.TxPending, Method: "upi", Amount: decimal.RequireFromString("10"), Unit: "INR", CreatedAt: now, UpdatedAt: now,
		Limits: payment.NewLimitHold("2030-01", "05", "INR", decimal.RequireFromString("10"))}
	if err := s.CreateTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTransaction(ctx, tx); !errkind.Is(err, errkind.Exists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxApproved, Message: "Approved", Now: now})
	if err != nil || got.Status != payment.TxApproved || got.SettledAt == nil || got.Limits == nil || got.Limits.Amount.String() != "10" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxDeclined, Code: "999", Now: now}); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("an approved transaction moved again: %v", err)
	}
	if _, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: 12345, Status: payment.TxDeclined, Now: now}); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("unknown transaction: %v", err)
	}
	byNum, err := s.TransactionByNumber(ctx, tx.Number)
	if err != nil || byNum.ID != tx.ID {
		t.Fatalf("%+v %v", byNum, err)
	}
	list, err := s.TransactionsOfRequest(ctx, 99)
	if err != nil || len(list) == 0 {
		t.Fatalf("%v %v", list, err)
	}
	// Refund once.
	rf := payment.NewRefund("RF1", tx.Amount, tx.Unit, now)
	if _, err := s.BeginRefund(ctx, tx.ID, "mer_b", rf, now); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("another merchant's refund: %v", err)
	}
	if _, err := s.BeginRefund(ctx, tx.ID, "mer_a", rf, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginRefund(ctx, tx.ID, "mer_a", payment.NewRefund("RF2", tx.Amount, tx.Unit, now), now); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("second refund: %v", err)
	}
	done, err := s.CompleteRefund(ctx, tx.ID, "RF1", payment.RefundRefunded, "ref", "", now)
	if err != nil || done.Refund.Status != payment.RefundRefunded || done.Refund.CompletedAt == nil {
		t.Fatalf("%+v %v", done, err)
	}
}

func TestLimitCountersUnderConcurrency(t *testing.T) {
	s, calls := txStore(t)
	ctx := context.Background()
	w := payment.WindowAt("mer_lim_"+strconv.FormatInt(time.Now().UnixNano(), 36), "EUR", time.Now())
	caps := payment.LimitCaps{DailyCount: 5, DailyAmount: func() *decimal.Decimal { d := decimal.RequireFromString("1000"); return &d }()}
	ten := decimal.RequireFromString("10.10")
	var ok, refused int
	var mu sync.Mutex
	var wg sync.WaitGroup
	calls.Reset()
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.ReserveLimits(ctx, w, ten, caps)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errkind.Is(err, errkind.Conflict):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 5 || refused != 15 || len(calls.Calls()) != 20 {
		t.Fatalf("reserved %d, refused %d, calls %d; want 5, 15, one call each", ok, refused, len(calls.Calls()))
	}
	u, err := s.LimitUsageOf(ctx, w)
	if err != nil || u.DailyCount != 5 || u.MonthlyCount != 5 || u.DailyAmount.String() != "50.5" {
		t.Fatalf("%+v %v", u, err)
	}
	if err := s.ReleaseLimits(ctx, w, ten); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.LimitUsageOf(ctx, w); u.DailyCount != 4 || u.DailyAmount.String() != "40.4" {
		t.Fatalf("after release %+v", u)
	}
	if err := s.ReserveLimits(ctx, w, ten, caps); err != nil {
		t.Fatalf("a released slot is free again: %v", err)
	}
}

func TestCallbackEventDedupe(t *testing.T) {
	s, _ := txStore(t)
	ctx := context.Background()
	id := "evt-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	now := time.Now()
	if err := s.MarkCallbackEvent(ctx, id, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkCallbackEvent(ctx, id, now, time.Hour); !errkind.Is(err, errkind.Exists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := s.MarkCallbackEvent(ctx, id, now.Add(2*time.Hour), time.Hour); err != nil {
		t.Fatalf("an expired record counts as absent: %v", err)
	}
}

// The combined writes of an attempt are all-or-nothing: a failed guard on
// either item leaves both items as they were.
func TestAttemptWritesTogether(t *testing.T) {
	s, calls := txStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	newTx := func(id, requestID int64) *payment.Transaction {
		return &payment.Transaction{ID: id, Number: "TXTEST" + strconv.FormatInt(id, 36), PaymentRequestID: requestID, MerchantID: "mer_a",
			Status: payment.TxWaiting, Method: "alternative", Amount: decimal.RequireFromString("12.50"), Unit: "EUR",
			CreatedAt: now, UpdatedAt: now, Reference: payment.ChargeReference(id), RecoverAfter: now.Add(30 * time.Second)}
	}
	newReq := func() *payment.Request {
		return &payment.Request{ID: ids.New(now), MerchantID: "mer_a", Status: payment.RequestUnpaid,
			Amount: decimal.RequireFromString("12.50"), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	}
	r, tx := newReq(), newTx(ids.New(now), 0)
	tx.PaymentRequestID = r.ID
	calls.Reset()
	if err := s.CreateLeasedRequestWithTransaction(ctx, r, tx, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := calls.Calls(); len(got) != 1 || got[0] != "DynamoDB.TransactWriteItems" {
		t.Fatalf("calls %v: want one TransactWriteItems", got)
	}
	_, lease, err := s.PaymentRequestLease(ctx, r.ID)
	if err != nil || lease.TransactionID != tx.ID {
		t.Fatalf("request not leased by its transaction: %+v %v", lease, err)
	}
	if got, err := s.Transaction(ctx, tx.ID); err != nil || got.Status != payment.TxWaiting || got.Reference != tx.Reference {
		t.Fatalf("write-ahead transaction: %+v %v", got, err)
	}

	// The request id taken: Exists, the second transaction not written.
	tx2 := newTx(ids.New(now), r.ID)
	if err := s.CreateLeasedRequestWithTransaction(ctx, r, tx2, now.Add(30*time.Second)); !errkind.Is(err, errkind.Exists) {
		t.Fatalf("request id taken: %v, want Exists", err)
	}
	if _, err := s.Transaction(ctx, tx2.ID); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("transaction of a refused create was written: %v", err)
	}
	// Only the transaction id taken: ErrTransactionExists, no request.
	r3 := newReq()
	if err := s.CreateLeasedRequestWithTransaction(ctx, r3, newTx(tx.ID, r3.ID), now.Add(30*time.Second)); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("transaction id taken: %v, want Conflict (only the transaction id taken)", err)
	}
	if _, err := s.PaymentRequest(ctx, r3.ID); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("request of a refused create was written: %v", err)
	}

	ev, err := payment.NewNotifyEvent(&payment.Request{ID: r.ID}, tx.ID, payment.TxApproved, payment.LastLog{TransactionStatusID: payment.TxApproved, Message: "Approved"}, now)
	if err != nil {
		t.Fatal(err)
	}
	commit := payment.AttemptCommit{RequestID: r.ID, TransactionID: tx.ID, TransactionNumber: tx.Number, Status: payment.TxApproved, Message: "Approved", Now: now}
	settle := payment.Settlement{TransactionID: tx.ID, Status: payment.TxApproved, Message: "Approved", Event: ev, Now: now}

	// The request's guard holds but the transaction's fails (settled
	// meanwhile): the request commit is not applied either.
	r4, tx4 := newReq(), newTx(ids.New(now), 0)
	tx4.PaymentRequestID = r4.ID
	if err := s.CreateLeasedRequestWithTransaction(ctx, r4, tx4, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx4.ID, Status: payment.TxDeclined, Message: "Declined", Now: now}); err != nil {
		t.Fatal(err)
	}
	c4, s4 := commit, settle
	c4.RequestID, c4.TransactionID, s4.TransactionID = r4.ID, tx4.ID, tx4.ID
	if err := s.CommitAndSettle(ctx, c4, s4); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("settled transaction: %v, want Conflict", err)
	}
	cur, lease, err := s.PaymentRequestLease(ctx, r4.ID)
	if err != nil || cur.Status != payment.RequestUnpaid || cur.TransactionStatus != nil || lease.TransactionID != tx4.ID {
		t.Fatalf("a cancelled transaction changed the request: %+v %+v %v", cur, lease, err)
	}

	calls.Reset()
	if err := s.CommitAndSettle(ctx, commit, settle); err != nil {
		t.Fatal(err)
	}
	if got := calls.Calls(); len(got) != 1 || got[0] != "DynamoDB.TransactWriteItems" {
		t.Fatalf("calls %v: want one TransactWriteItems", got)
	}
	cur, lease, err = s.PaymentRequestLease(ctx, r.ID)
	if err != nil || cur.Status != payment.RequestPaid || cur.TransactionID != tx.ID || lease.TransactionID != 0 {
		t.Fatalf("request after commit: %+v %+v %v", cur, lease, err)
	}
	got, err := s.Transaction(ctx, tx.ID)
	if err != nil || got.Status != payment.TxApproved || got.SettledAt == nil || !got.RecoverAfter.IsZero() {
		t.Fatalf("transaction after settle: %+v %v", got, err)
	}
	// Done once: a second run is refused as a whole.
	if err := s.CommitAndSettle(ctx, commit, settle); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("second commit and settle: %v, want Conflict", err)
	}
}

// TestProviderRefWrittenOnce: the acquirer object id a transaction stores
// when the acquirer first answers is never overwritten by a later write
// (a pending mark, a settle), so a refund always goes to the charge made.
func TestProviderRefWrittenOnce(t *testing.T) {
	s, _ := txStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	tx := &payment.Transaction{ID: ids.New(now), Number: "TXREF" + strconv.FormatInt(now.UnixNano(), 36), PaymentRequestID: 98, MerchantID: "mer_a",
		Status: payment.TxWaiting, Method: "card", Amount: decimal.RequireFromString("100"), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	got, err := s.MarkPending(ctx, payment.Pending{TransactionID: tx.ID, Message: "Pending", ProviderRef: "pi_first",
		PendingUntil: now.Add(time.Minute), RecoverAfter: now.Add(2 * time.Minute), Now: now})
	if err != nil || got.ProviderRef != "pi_first" {
		t.Fatalf("mark pending: %+v %v", got, err)
	}
	got, err = s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxApproved, Message: "Approved",
		ProviderRef: "pi_other", Now: now})
	if err != nil || got.Status != payment.TxApproved || got.ProviderRef != "pi_first" {
		t.Fatalf("settle with another id: %+v %v (want approved, providerRef still pi_first)", got, err)
	}
	if stored, err := s.Transaction(ctx, tx.ID); err != nil || stored.ProviderRef != "pi_first" {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	// A transaction without one takes the first id it is given.
	tx2 := &payment.Transaction{ID: ids.New(now), Number: "TXREF2" + strconv.FormatInt(now.UnixNano(), 36), PaymentRequestID: 98, MerchantID: "mer_a",
		Status: payment.TxWaiting, Method: "card", Amount: decimal.RequireFromString("100"), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	if err := s.CreateTransaction(ctx, tx2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx2.ID, Status: payment.TxDeclined, Code: "999",
		Message: "Declined", ProviderRef: "pi_second", Now: now}); err != nil || got.ProviderRef != "pi_second" {
		t.Fatalf("first id on settle: %+v %v", got, err)
	}
}
