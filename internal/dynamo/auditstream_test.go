package dynamo_test

import (
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

// Every write stamps writeId (echo.go), so a retried write, or a write
// that changes nothing else, reaches the audit's stream as a change of
// writeId alone: it asks for no check, while a change of what an invariant
// reads still does. Pure: images as the stream carries them.
func TestStreamChangeIgnoresWriteID(t *testing.T) {
	tables := dynamo.Tables{Transactions: "tx", PaymentRequests: "req", Operations: "ops"}
	a := dynamo.New(nil, tables).Audit()
	at := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	stamp := func(item map[string]types.AttributeValue, id string) map[string]types.AttributeValue {
		out := maps.Clone(item)
		out[dynamo.WriteIDAttr] = &types.AttributeValueMemberS{Value: id}
		return out
	}
	tx, err := dynamo.TransactionItem(&payment.Transaction{ID: 7, Number: "T7", PaymentRequestID: 7, Status: payment.TxApproved, Method: "card",
		Amount: decimal.RequireFromString("1.00"), Unit: "EUR", Reference: payment.ChargeReference(7), CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	req, err := dynamo.RequestItem(&payment.Request{ID: 7, Status: payment.RequestPaid, TransactionID: 7, Amount: decimal.RequireFromString("1.00"),
		Unit: "EUR", CreatedAt: at, UpdatedAt: at, Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	led, err := dynamo.LedgerItem(ledger.Entry{Reference: payment.ChargeReference(7), Kind: ledger.KindCharge, TransactionID: 7,
		Amount: "1.00", Unit: "EUR", Status: 1, CreatedAt: at, UpdatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table string
		item  map[string]types.AttributeValue
	}{{"tx", tx}, {"req", req}, {"ops", led}} {
		sc, err := a.StreamChange(c.table, stamp(c.item, "w1"), stamp(c.item, "w2"), at)
		if err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		if d := sc.Change.Dues(time.Minute); len(d) != 0 {
			t.Errorf("%s: a writeId-only change asks for checks %+v", c.table, d)
		}
	}
	// The same write with a status change still asks for its request's check.
	declined := maps.Clone(tx)
	declined["status"] = &types.AttributeValueMemberN{Value: "2"}
	sc, err := a.StreamChange("tx", stamp(tx, "w1"), stamp(declined, "w2"), at)
	if err != nil {
		t.Fatal(err)
	}
	if d := sc.Change.Dues(time.Minute); len(d) != 1 || d[0].Subject.RequestID != 7 {
		t.Fatalf("a status change asks for %+v", d)
	}
}
