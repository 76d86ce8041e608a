package dynamo_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// settledWithOutbox stores a request and its approved transaction with an
// outbox entry, as a settle leaves them.
func settledWithOutbox(t *testing.T, s *dynamo.Store, merchantID string) (*payment.Request, *payment.Transaction, payment.NotifyEvent) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	r := newRequest(t, s, merchantID)
	tx := &payment.Transaction{ID: ids.New(now), Number: "TXOB" + strconv.FormatInt(now.UnixNano(), 36), PaymentRequestID: r.ID,
		MerchantID: merchantID, Status: payment.TxWaiting, Method: "alternative", Amount: decimal.RequireFromString("12.50"), Unit: "EUR",
		CreatedAt: now, UpdatedAt: now, Reference: payment.ChargeReference(now.UnixNano())}
	if err := s.CreateTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	ev, err := payment.NewNotifyEvent(r, tx.ID, payment.TxApproved, payment.LastLog{TransactionStatusID: payment.TxApproved, Message: "Approved"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: payment.TxApproved, Message: "Approved", Event: ev, Now: now}); err != nil {
		t.Fatal(err)
	}
	return r, tx, ev
}

func outboxHeld(t *testing.T, txID int64) bool {
	t.Helper()
	cfg, _ := testenv.CountingAWSConfig(t)
	out, err := dynamodb.NewFromConfig(cfg).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(testenv.Stack(t).Resources.Tables["TransactionsTable"]), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(txID, 10)}}})
	if err != nil || out.Item == nil {
		t.Fatalf("transaction %d: %v", txID, err)
	}
	_, ok := out.Item["notifyEvent"]
	return ok
}

// The notifier's read: the transactions, requests and merchants of a
// batch's events in one call; what is missing comes back nil.
func TestNotificationSubjectsIsOneRead(t *testing.T) {
	s, calls := txStore(t)
	ctx := context.Background()
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL = "https://shop.example/hook" })
	r1, tx1, ev1 := settledWithOutbox(t, s, m.ID)
	r2, tx2, ev2 := settledWithOutbox(t, s, m.ID)
	noMerchant := ev2
	noMerchant.MerchantID = ""
	unknown := payment.NotifyEvent{EventID: "evt_x", TransactionID: tx2.ID + 1, RequestID: r2.ID + 1, MerchantID: "mer_unknown"}

	calls.Reset()
	got, err := s.NotificationSubjects(ctx, []payment.NotifyEvent{ev1, ev2, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if c := calls.Calls(); len(c) != 1 || c[0] != "DynamoDB.BatchGetItem" {
		t.Fatalf("calls %v, want one BatchGetItem", c)
	}
	for _, want := range []struct {
		tx *payment.Transaction
		r  *payment.Request
	}{{tx1, r1}, {tx2, r2}} {
		sub := got[want.tx.ID]
		if sub.Transaction == nil || sub.Transaction.ID != want.tx.ID || sub.Transaction.Status != payment.TxApproved ||
			sub.Request == nil || sub.Request.ID != want.r.ID || sub.Merchant == nil || sub.Merchant.NotifyURL != "https://shop.example/hook" {
			t.Fatalf("transaction %d: %+v", want.tx.ID, sub)
		}
	}
	if sub := got[unknown.TransactionID]; sub.Transaction != nil || sub.Request != nil || sub.Merchant != nil {
		t.Fatalf("unknown items: %+v", sub)
	}
	// No merchant id: the merchant is not read.
	got, err = s.NotificationSubjects(ctx, []payment.NotifyEvent{noMerchant})
	if err != nil || got[tx2.ID].Merchant != nil || got[tx2.ID].Transaction == nil {
		t.Fatalf("without a merchant id: %+v %v", got[tx2.ID], err)
	}
}

// A batch's attempts are recorded, and first attempts' outbox entries
// cleared, in one write. When one entry is gone already (a redelivered
// message) every attempt is still recorded, each entry of the batch still
// cleared, and another event's entry never is.
func TestRecordDeliveries(t *testing.T) {
	s, calls := txStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	r1, tx1, ev1 := settledWithOutbox(t, s, "mer_ob")
	r2, tx2, ev2 := settledWithOutbox(t, s, "mer_ob")
	attempt := func(r *payment.Request, ev payment.NotifyEvent, n int, at time.Time) payment.DeliveryAttempt {
		return payment.DeliveryAttempt{RequestID: r.ID, EventID: ev.EventID, Attempt: n, At: at, URL: "https://shop.example/hook",
			StatusCode: 200, Outcome: "delivered"}
	}

	calls.Reset()
	errs := s.RecordDeliveries(ctx, []payment.DeliveryWrite{
		{Attempt: attempt(r1, ev1, 1, now), ClearOutboxOf: tx1.ID},
		{Attempt: attempt(r2, ev2, 2, now)}, // a retry: its entry stays
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if c := calls.Calls(); len(c) != 1 || c[0] != "DynamoDB.TransactWriteItems" {
		t.Fatalf("calls %v, want one TransactWriteItems", c)
	}
	if outboxHeld(t, tx1.ID) || !outboxHeld(t, tx2.ID) {
		t.Fatal("wrong outbox entries cleared")
	}

	// tx1's entry is gone (a redelivered message), another event names tx2:
	// the batch falls back to one write each.
	other := attempt(r2, ev2, 1, now.Add(time.Millisecond))
	other.EventID = "evt_other"
	errs = s.RecordDeliveries(ctx, []payment.DeliveryWrite{
		{Attempt: attempt(r1, ev1, 1, now.Add(2*time.Millisecond)), ClearOutboxOf: tx1.ID},
		{Attempt: other, ClearOutboxOf: tx2.ID},
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if !outboxHeld(t, tx2.ID) {
		t.Fatal("another event's delivery cleared the outbox entry")
	}
	for _, c := range []struct {
		r    *payment.Request
		want int
	}{{r1, 2}, {r2, 2}} {
		got, err := s.Deliveries(ctx, c.r.ID, now)
		if err != nil || len(got) != c.want {
			t.Fatalf("request %d: %d deliveries %+v, %v", c.r.ID, len(got), got, err)
		}
	}
}

// The emulator evaluates each request with its own expression values, also
// when the expression text repeats (the local DynamoDB wrapper caches
// parsed expressions), and still refuses a value the expression leaves
// unused.
func TestRepeatedExpressionsUseTheirOwnValues(t *testing.T) {
	s, _ := txStore(t)
	ctx := context.Background()
	cfg, _ := testenv.CountingAWSConfig(t)
	db := dynamodb.NewFromConfig(cfg)
	table := testenv.Stack(t).Resources.Tables["TransactionsTable"]
	_, tx1, ev1 := settledWithOutbox(t, s, "mer_expr")
	_, tx2, ev2 := settledWithOutbox(t, s, "mer_expr")
	key := func(id int64) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(id, 10)}}
	}
	clearIf := func(id int64, eventID string, extra map[string]types.AttributeValue) error {
		vals := map[string]types.AttributeValue{":e": &types.AttributeValueMemberS{Value: eventID}}
		for k, v := range extra {
			vals[k] = v
		}
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key(id),
			UpdateExpression: aws.String("REMOVE notifyShard, notifyDueAt, notifyEvent"), ConditionExpression: aws.String("notifyEvent.eventId = :e"),
			ExpressionAttributeValues: vals})
		return err
	}
	var cf *types.ConditionalCheckFailedException
	for i := 0; i < 3; i++ { // the text is parsed, then reused
		if err := clearIf(tx2.ID, ev1.EventID, nil); !errors.As(err, &cf) {
			t.Fatalf("run %d: tx2 cleared with tx1's event id: %v", i, err)
		}
	}
	if err := clearIf(tx1.ID, ev1.EventID, nil); err != nil {
		t.Fatal(err)
	}
	if outboxHeld(t, tx1.ID) || !outboxHeld(t, tx2.ID) {
		t.Fatal("the wrong outbox entry was cleared")
	}
	if err := clearIf(tx2.ID, ev2.EventID, map[string]types.AttributeValue{":unused": &types.AttributeValueMemberS{Value: "x"}}); err == nil ||
		errors.As(err, &cf) {
		t.Fatalf("an unused expression value was accepted: %v", err)
	}
	if err := clearIf(tx2.ID, ev2.EventID, nil); err != nil {
		t.Fatal(err)
	}
	if outboxHeld(t, tx2.ID) {
		t.Fatal("tx2's entry not cleared with its own event id")
	}
}
