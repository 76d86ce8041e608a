package dynamo_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// legacyItems writes a transaction, an unpaid request and a paid request as
// they were stored before the tables had TTL (no expiresAt), and returns
// each one's table, id and the expiresAt the service writes today.
func legacyItems(t *testing.T, client *dynamodb.Client, tables dynamo.Tables) []legacy {
	t.Helper()
	created := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	paid := created.Add(36 * time.Hour)
	n := func(i int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(i, 10)}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	ts := func(at time.Time) types.AttributeValue { return s(at.Format(time.RFC3339Nano)) }
	out := []legacy{
		{tables.Transactions, ids.New(time.Now()), created.Add(dynamo.RecordRetention).Unix(), int64(payment.TxApproved)},
		{tables.PaymentRequests, ids.New(time.Now()), created.Add(dynamo.RecordRetention).Unix(), int64(payment.RequestUnpaid)},
		{tables.PaymentRequests, ids.New(time.Now()), paid.Add(dynamo.RecordRetention).Unix(), int64(payment.RequestPaid)},
	}
	for _, l := range out {
		if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &l.table, Item: map[string]types.AttributeValue{
			"id": n(l.id), "merchantId": s("mer_backfill"), "status": n(l.status), "createdAt": ts(created), "updatedAt": ts(paid)}}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

type legacy struct {
	table       string
	id, expires int64
	status      int64
}

func expiresAt(t *testing.T, client *dynamodb.Client, l legacy) int64 {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &l.table, ConsistentRead: new(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(l.id, 10)}}})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	e, _ := strconv.ParseInt(v.Value, 10, 64)
	return e
}

func backfillStore(t *testing.T) (*dynamo.Store, *dynamodb.Client, dynamo.Tables) {
	_, _, client, tables := newStore(t)
	tables.Transactions = testenv.Stack(t).Resources.Tables["TransactionsTable"]
	return dynamo.New(client, tables), client, tables
}

// Records written before the tables had TTL get the expiresAt the service
// writes today (a transaction and an unpaid request from their creation, a
// paid request from its payment); a second run finds nothing left; the
// answer of one of its writes lost, the retry is recognised as its own.
func TestBackfillGivesLegacyRecordsTheirExpiry(t *testing.T) {
	ctx := context.Background()
	store, client, tables := backfillStore(t)
	if _, err := store.BackfillRecordExpiry(ctx, 4, nil); err != nil { // what other tests left
		t.Fatal(err)
	}
	items := legacyItems(t, client, tables)
	fired := loseAnswer(t, "UpdateItem", strconv.FormatInt(items[2].id, 10), false)
	got, err := store.BackfillRecordExpiry(ctx, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	fired()
	if got.Set != 3 || got.Changed != 0 {
		t.Fatalf("backfill: %+v, want 3 set (the lost answer's write among them), none changed", got)
	}
	for _, l := range items {
		if e := expiresAt(t, client, l); e != l.expires {
			t.Errorf("%s %d (status %d): expiresAt %d, want %d", l.table, l.id, l.status, e, l.expires)
		}
	}
	again, err := store.BackfillRecordExpiry(ctx, 4, nil)
	if err != nil || again.Set != 0 {
		t.Fatalf("second run: %+v, %v; want nothing set", again, err)
	}
}

// Thirty backfills at once (operators running it twice, a retried job):
// each record gets its expiresAt from exactly one of them.
func TestThirtyBackfillsAtOnceSetEachRecordOnce(t *testing.T) {
	ctx := context.Background()
	store, client, tables := backfillStore(t)
	if _, err := store.BackfillRecordExpiry(ctx, 4, nil); err != nil {
		t.Fatal(err)
	}
	var items []legacy
	for range 10 {
		items = append(items, legacyItems(t, client, tables)...)
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		set int64
	)
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := store.BackfillRecordExpiry(ctx, 2, nil)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			set += c.Set
			mu.Unlock()
		}()
	}
	wg.Wait()
	if set != int64(len(items)) {
		t.Fatalf("30 backfills at once set %d times for %d records", set, len(items))
	}
	for _, l := range items {
		if e := expiresAt(t, client, l); e != l.expires {
			t.Errorf("%s %d: expiresAt %d, want %d", l.table, l.id, e, l.expires)
		}
	}
}
