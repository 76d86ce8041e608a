package dynamo_test

import (
	"context"
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

// sentTwice is DynamoDB whose answer to each write is lost once: the write
// is applied, and the SDK's retry of the same input meets it. Its answer
// is the retry's.
type sentTwice struct {
	*dynamodb.Client
	mu  sync.Mutex
	off bool
}

func (s *sentTwice) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.mu.Lock()
	twice := !s.off
	s.mu.Unlock()
	if twice {
		if _, err := s.Client.UpdateItem(ctx, in, opts...); err != nil {
			return nil, err
		}
	}
	return s.Client.UpdateItem(ctx, in, opts...)
}

func (s *sentTwice) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := s.Client.PutItem(ctx, in, opts...); err != nil {
		return nil, err
	}
	return s.Client.PutItem(ctx, in, opts...)
}

// TestAfterWritesAreSafeToSendTwice: every write of a transaction after its
// first answer (the refund's revisions, the after record, the recovery
// back-off, taking it off the open list, the merchant's dispute list),
// applied and then sent again as the SDK does when the first answer was
// lost, recognises its own write and succeeds: never "conflict" for
// itself. A different write at the same revision still conflicts.
func TestAfterWritesAreSafeToSendTwice(t *testing.T) {
	st := testenv.Stack(t)
	cfg, _ := testenv.CountingAWSConfig(t)
	tables := dynamo.Tables{Merchants: st.Resources.Tables["MerchantsTable"], PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
		Operations: st.Resources.Tables["OperationsTable"], Transactions: st.Resources.Tables["TransactionsTable"]}
	db := &sentTwice{Client: dynamodb.NewFromConfig(cfg)}
	s := dynamo.New(db, tables)
	plain := dynamo.New(dynamodb.NewFromConfig(cfg), tables)
	ctx := context.Background()
	now := time.Now().UTC()

	// An approved transaction with a refund in processing, open.
	db.off = true
	tx := &payment.Transaction{ID: ids.New(now), Number: "TXTWICE", PaymentRequestID: ids.New(now), MerchantID: "mer_twice",
		Status: payment.TxWaiting, Method: "card", Amount: decimal.RequireFromString("20.00"), Unit: "EUR", CreatedAt: now, UpdatedAt: now,
		Reference: "ptx_twice", RecoverAfter: now.Add(time.Minute)}
	if err := plain.CreateTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxApproved, Message: "Approved",
		ProviderRef: "pi_twice", Now: now}); err != nil {
		t.Fatal(err)
	}
	got, err := plain.BeginRefund(ctx, tx.ID, "mer_twice", payment.NewRefund("RFTWICE", tx.Amount, "EUR", now), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	db.off = false

	r := *got.Refund
	r.AcquirerStatus, r.ProviderRef = "pending", "re_twice"
	got, err = s.WriteRefund(ctx, tx.ID, 0, r, now.Add(time.Hour))
	if err != nil || got.Refund.Rev != 1 || got.Refund.ProviderRef != "re_twice" {
		t.Fatalf("refund write sent twice: %+v %v", got.Refund, err)
	}
	r = *got.Refund
	r.Status = payment.RefundRefunded
	if got, err = s.WriteRefund(ctx, tx.ID, 1, r, time.Time{}); err != nil || got.Refund.Rev != 2 {
		t.Fatalf("second refund write sent twice: %+v %v", got.Refund, err)
	}
	if _, err := plain.WriteRefund(ctx, tx.ID, 1, r, time.Time{}); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("another write at a passed revision: %v, want a conflict", err)
	}

	a := payment.After{Dispute: &payment.Dispute{ID: "dp_twice", Status: "needs_response", Amount: tx.Amount, Unit: "EUR",
		CreatedAt: now, UpdatedAt: now, EventAt: now, LastEvent: payment.EventDisputeCreated, LastEventID: "evt_1"}}
	if got, err = s.WriteAfter(ctx, tx.ID, 0, a, now.Add(2*time.Minute)); err != nil || got.After == nil || got.After.Rev != 1 {
		t.Fatalf("after record sent twice: %+v %v", got.After, err)
	}
	a = *got.After
	a.Dispute.Status = "under_review"
	if got, err = s.WriteAfter(ctx, tx.ID, 1, a, time.Time{}); err != nil || got.After.Rev != 2 || got.After.Dispute.Status != "under_review" {
		t.Fatalf("second after write sent twice: %+v %v", got.After, err)
	}
	if _, err := plain.WriteAfter(ctx, tx.ID, 1, a, time.Time{}); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("another after write at a passed revision: %v, want a conflict", err)
	}

	open := got.RecoverAfter
	next := now.Add(5 * time.Minute)
	if err := s.DeferRecovery(ctx, tx.ID, open, next, 1); err != nil {
		t.Fatalf("back-off sent twice: %v", err)
	}
	if err := plain.DeferRecovery(ctx, tx.ID, open, next.Add(time.Minute), 2); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("a back-off from a look that is no longer current: %v, want a conflict", err)
	}
	back, err := plain.OpenAttempts(ctx, dynamo.BackoffShards+int(uint64(tx.ID)%payment.OpenShards), next.Add(time.Second), 10)
	if err != nil || len(back) != 1 || back[0].ID != tx.ID || back[0].RecoverTries != 1 {
		t.Fatalf("the backed-off attempt in its back-off shard: %+v %v", back, err)
	}
	if err := s.CloseOpen(ctx, tx.ID, next); err != nil {
		t.Fatalf("close sent twice: %v", err)
	}
	if cur, _ := plain.Transaction(ctx, tx.ID); !cur.RecoverAfter.IsZero() {
		t.Fatalf("closed transaction still open until %v", cur.RecoverAfter)
	}

	e := payment.DisputeEntry{TransactionID: tx.ID, PaymentRequestID: tx.PaymentRequestID, DisputeID: "dp_twice", Status: "under_review",
		Amount: tx.Amount, Unit: "EUR", EvidenceDueBy: now.Add(240 * time.Hour).Truncate(time.Second), UpdatedAt: now, Rev: 2}
	if err := s.PutDisputeEntry(ctx, "mer_twice", e); err != nil {
		t.Fatalf("dispute entry sent twice: %v", err)
	}
	old := e
	old.Status, old.Rev = "needs_response", 1
	if err := plain.PutDisputeEntry(ctx, "mer_twice", old); err != nil {
		t.Fatal(err)
	}
	ds, err := plain.Disputes(ctx, "mer_twice", now)
	if err != nil || len(ds) != 1 || ds[0].Status != "under_review" || !ds[0].EvidenceDueBy.Equal(e.EvidenceDueBy) {
		t.Fatalf("disputes listed %+v %v (an older revision must not overwrite)", ds, err)
	}
}
