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

// TestFailOverOnDynamoDBLocal: moving a waiting transaction from one
// connector to the next is conditional on it waiting on the first. Sent
// twice (its first answer lost), the retry meets its own write and the
// store recognises it (its echo): success. Thirty moves at once to thirty
// different connectors: exactly one applies, the others conflict and see
// it. A transaction no longer waiting never moves.
func TestFailOverOnDynamoDBLocal(t *testing.T) {
	st := testenv.Stack(t)
	cfg, _ := testenv.CountingAWSConfig(t)
	tables := dynamo.Tables{Merchants: st.Resources.Tables["MerchantsTable"], PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
		Operations: st.Resources.Tables["OperationsTable"], Transactions: st.Resources.Tables["TransactionsTable"]}
	plain := dynamo.New(dynamodb.NewFromConfig(cfg), tables)
	twice := dynamo.New(&sentTwice{Client: dynamodb.NewFromConfig(cfg)}, tables)
	ctx := context.Background()
	now := time.Now().UTC()
	waiting := func(connector string) *payment.Transaction {
		tx := &payment.Transaction{ID: ids.New(now), Number: "TXFAILOVER", PaymentRequestID: ids.New(now), MerchantID: "mer_failover",
			Status: payment.TxWaiting, Method: "card", Amount: decimal.RequireFromString("20.00"), Unit: "EUR", CreatedAt: now, UpdatedAt: now,
			Connector: connector, RecoverAfter: now.Add(time.Minute)}
		tx.Reference = payment.ChargeReference(tx.ID)
		if err := plain.CreateTransaction(ctx, tx); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	move := payment.Failover{From: "stripe", To: "adyen", FailedOver: []string{"stripe"}, Now: now}

	tx := waiting("stripe")
	move.TransactionID = tx.ID
	got, err := twice.FailOver(ctx, move)
	if err != nil || got.Connector != "adyen" || got.Status != payment.TxWaiting || len(got.FailedOver) != 1 {
		t.Fatalf("failover sent twice: %+v %v; want the retry to meet its own write", got, err)
	}
	if read, _ := plain.Transaction(ctx, tx.ID); read.Connector != "adyen" || read.FailedOver[0] != "stripe" {
		t.Fatalf("stored: %q %v", read.Connector, read.FailedOver)
	}

	tx = waiting("stripe")
	move.TransactionID = tx.ID
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied, met := 0, 0
	winner := ""
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := move
			m.To = "backup" + strconv.Itoa(i)
			got, err := plain.FailOver(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				applied++
				winner = m.To
			case errkind.Is(err, errkind.Conflict) && got.Connector != "stripe":
				met++
			default:
				t.Errorf("failover: %v", err)
			}
		}()
	}
	wg.Wait()
	if read, _ := plain.Transaction(ctx, tx.ID); applied != 1 || met != 29 || read.Connector != winner {
		t.Fatalf("30 at once: %d applied, %d met it, stored %q (winner %q); want 1 and 29", applied, met, read.Connector, winner)
	}

	tx = waiting("stripe")
	if _, err := plain.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxDeclined, Message: "Declined", Now: now}); err != nil {
		t.Fatal(err)
	}
	move.TransactionID = tx.ID
	if got, err := plain.FailOver(ctx, move); !errkind.Is(err, errkind.Conflict) || got.Connector != "stripe" {
		t.Fatalf("failover of a final transaction: %+v %v, want a conflict and no move", got, err)
	}
	legacy := waiting("")
	move.TransactionID, move.From = legacy.ID, ""
	if got, err := plain.FailOver(ctx, move); err != nil || got.Connector != "adyen" {
		t.Fatalf("failover of a record without a connector: %+v %v", got, err)
	}
}
