package dynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// The outbox lives on the transaction: one entry per transaction reaching a
// final state, written by the same conditional write that makes it final, so
// a second attempt on the same payment request can never overwrite the
// first one's unsent notification. notifyShard + notifyDueAt index it in the
// sparse GSI byNotifyDue of the transactions table (only transactions with a
// due notification appear there), notifyEvent holds the event, and
// notifyShard is one of its channel's shards (payment.OutboxShard).
const OutboxIndex = "byNotifyDue"

// OutboxSet returns the SET clause and values that put ev in the outbox; the
// write that settles a transaction appends them to its own update, so the
// state change and the outbox entry are one conditional write.
func OutboxSet(ev payment.NotifyEvent, now time.Time) (string, map[string]types.AttributeValue, error) {
	av, err := attributevalue.Marshal(ev)
	if err != nil {
		return "", nil, fmt.Errorf("marshal notify event: %w", err)
	}
	h := fnv.New32a()
	h.Write([]byte(ev.EventID))
	return "notifyShard = :obShard, notifyDueAt = :obDue, notifyEvent = :obEvent", map[string]types.AttributeValue{
		":obShard": numberAV(int64(payment.OutboxShard(ev.Channel)) + int64(h.Sum32()%payment.OutboxShards)),
		":obDue":   &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
		":obEvent": av,
	}, nil
}

// PutOutbox stores ev in its transaction's outbox on its own (tests, audit
// repairs and payctl; the normal path is OutboxSet inside the settling write).
func (s *Store) PutOutbox(ctx context.Context, ev payment.NotifyEvent, now time.Time) error {
	set, vals, err := OutboxSet(ev, now)
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Transactions, Key: txKey(ev.TransactionID),
		UpdateExpression: aws.String("SET " + set), ConditionExpression: aws.String("attribute_exists(id)"),
		ExpressionAttributeValues: vals,
	})
	if isConditionFailed(err) {
		return notFound()
	}
	if err != nil {
		return fmt.Errorf("put outbox of transaction %d: %w", ev.TransactionID, err)
	}
	return nil
}

// NotificationSubjects reads, in consistent BatchGetItems (one for up to 33
// events), what each event's notification is built from — its transaction,
// payment request and merchant (an event without a merchant id leaves it
// nil) — keyed by transaction id. Nothing here checks that the three
// belong together: the notifier does.
func (s *Store) NotificationSubjects(ctx context.Context, evs []payment.NotifyEvent) (map[int64]merchant.NotificationSubject, error) {
	txs := map[int64]*payment.Transaction{}
	reqs := map[int64]*payment.Request{}
	ms := map[string]*merchant.Merchant{}
	var keys []batchKey
	seenReq, seenM := map[int64]bool{}, map[string]bool{}
	for _, ev := range evs {
		keys = append(keys, batchKey{s.t.Transactions, txKey(ev.TransactionID)})
		if !seenReq[ev.RequestID] {
			seenReq[ev.RequestID] = true
			keys = append(keys, batchKey{s.t.PaymentRequests, map[string]types.AttributeValue{"id": numberAV(ev.RequestID)}})
		}
		if ev.MerchantID != "" && !seenM[ev.MerchantID] {
			seenM[ev.MerchantID] = true
			keys = append(keys, batchKey{s.t.Merchants, map[string]types.AttributeValue{"merchantId": strAV(ev.MerchantID)}})
		}
	}
	err := s.batchGet(ctx, keys, func(table string, item map[string]types.AttributeValue) error {
		switch table {
		case s.t.Transactions:
			tx, err := unmarshalTransaction(item)
			if err != nil {
				return err
			}
			txs[tx.ID] = tx
		case s.t.PaymentRequests:
			r, err := unmarshalRequest(item)
			if err != nil {
				return err
			}
			reqs[r.ID] = r
		case s.t.Merchants:
			m, err := unmarshalMerchant(item)
			if err != nil {
				return err
			}
			ms[m.ID] = m
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read notification subjects: %w", err)
	}
	out := make(map[int64]merchant.NotificationSubject, len(evs))
	for _, ev := range evs {
		out[ev.TransactionID] = merchant.NotificationSubject{Transaction: txs[ev.TransactionID], Request: reqs[ev.RequestID], Merchant: ms[ev.MerchantID]}
	}
	return out, nil
}

type batchKey struct {
	table string
	key   map[string]types.AttributeValue
}

// batchGet reads keys with consistent BatchGetItems of at most 100 keys,
// retrying unprocessed keys (throttling) with backoff, and hands each item
// found to got.
func (s *Store) batchGet(ctx context.Context, keys []batchKey, got func(table string, item map[string]types.AttributeValue) error) error {
	for len(keys) > 0 {
		n := min(len(keys), 100)
		req := map[string]types.KeysAndAttributes{}
		for _, k := range keys[:n] {
			ka := req[k.table]
			ka.Keys, ka.ConsistentRead = append(ka.Keys, k.key), aws.Bool(true)
			req[k.table] = ka
		}
		keys = keys[n:]
		for try := 0; len(req) > 0; try++ {
			if try > 0 {
				if try == 6 {
					return errors.New("keys still unprocessed after 5 retries")
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(try*try) * 20 * time.Millisecond):
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return err
			}
			for table, items := range out.Responses {
				for _, item := range items {
					if err := got(table, item); err != nil {
						return err
					}
				}
			}
			req = out.UnprocessedKeys
		}
	}
	return nil
}

// RecordDeliveries makes the writes of a batch of delivery attempts in one
// TransactWriteItems (one call where each attempt took one or two). Should
// it be refused — an entry gone already (a redelivered message), a
// throttled call — each write is retried on its own: an attempt whose
// entry is gone is recorded anyway, another event's entry never cleared.
// It returns one error per write.
func (s *Store) RecordDeliveries(ctx context.Context, ws []payment.DeliveryWrite) []error {
	errs := make([]error, len(ws))
	var items []types.TransactWriteItem
	for i, w := range ws {
		item, err := deliveryItem(w.Attempt)
		if err != nil {
			errs[i] = err
			continue
		}
		// Each attempt's key is new (its time, event and number): the
		// condition only states it, and spares the local emulator a
		// snapshot.
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.t.Operations, Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)")}})
		if w.ClearOutboxOf != 0 {
			items = append(items, types.TransactWriteItem{Update: transactUpdate(clearOutboxInput(s.t.Transactions, w.ClearOutboxOf, w.Attempt.EventID))})
		}
	}
	if len(items) > 0 && len(items) <= 100 {
		if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err == nil {
			return errs
		}
	}
	for i, w := range ws {
		if errs[i] != nil {
			continue
		}
		errs[i] = s.recordDelivery(ctx, w)
	}
	return errs
}

// recordDelivery is one payment.DeliveryWrite on its own: the record and the
// outbox clear together, or the record alone when the entry is gone.
func (s *Store) recordDelivery(ctx context.Context, w payment.DeliveryWrite) error {
	if w.ClearOutboxOf == 0 {
		return s.RecordDelivery(ctx, w.Attempt)
	}
	item, err := deliveryItem(w.Attempt)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.t.Operations, Item: item}},
		{Update: transactUpdate(clearOutboxInput(s.t.Transactions, w.ClearOutboxOf, w.Attempt.EventID))},
	}})
	if failed, ok := cancelled(err); ok && len(failed) > 1 && failed[1] {
		return s.RecordDelivery(ctx, w.Attempt)
	}
	if err != nil {
		return fmt.Errorf("record delivery attempt of request %d and clear its outbox: %w", w.Attempt.RequestID, err)
	}
	return nil
}

func clearOutboxInput(table string, txID int64, eventID string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: &table, Key: txKey(txID),
		UpdateExpression:          aws.String("REMOVE notifyShard, notifyDueAt, notifyEvent"),
		ConditionExpression:       aws.String("notifyEvent.eventId = :e"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberS{Value: eventID}},
	}
}

// ClearOutbox removes a transaction's outbox entry once the notifier has
// the event.
func (s *Store) ClearOutbox(ctx context.Context, txID int64, eventID string) error {
	_, err := s.db.UpdateItem(ctx, clearOutboxInput(s.t.Transactions, txID, eventID))
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("clear outbox of transaction %d: %w", txID, err)
	}
	return nil
}

// MarkOutboxUnsent records that the send of a transaction's outbox entry
// failed: its due time becomes the Unix epoch, older than any in-flight
// ceiling, so the reconciler re-sends it at its next run even while the
// queue is busy (it cannot be in flight). Only the failure path pays this
// write; a missing or different entry is left alone.
func (s *Store) MarkOutboxUnsent(ctx context.Context, txID int64, eventID string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Transactions, Key: txKey(txID),
		UpdateExpression:    aws.String("SET notifyDueAt = :epoch"),
		ConditionExpression: aws.String("notifyEvent.eventId = :e AND attribute_exists(notifyDueAt)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":epoch": &types.AttributeValueMemberS{Value: time.Unix(0, 0).UTC().Format(time.RFC3339Nano)},
			":e":     &types.AttributeValueMemberS{Value: eventID},
		},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark outbox of transaction %d unsent: %w", txID, err)
	}
	return nil
}

// DueOutbox lists entries of one shard due before cutoff.
func (s *Store) DueOutbox(ctx context.Context, shard int, cutoff time.Time, limit int32) ([]payment.OutboxEntry, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.t.Transactions, IndexName: aws.String(OutboxIndex),
		KeyConditionExpression: aws.String("notifyShard = :s AND notifyDueAt < :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": numberAV(int64(shard)), ":c": &types.AttributeValueMemberS{Value: cutoff.UTC().Format(time.RFC3339Nano)},
		},
		Limit: aws.Int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("query outbox shard %d: %w", shard, err)
	}
	var entries []payment.OutboxEntry
	for _, item := range out.Items {
		var rec struct {
			DueAt string              `dynamodbav:"notifyDueAt"`
			Event payment.NotifyEvent `dynamodbav:"notifyEvent"`
		}
		if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
			return nil, fmt.Errorf("unmarshal outbox entry: %w", err)
		}
		entries = append(entries, payment.OutboxEntry{Event: rec.Event, DueAt: rec.DueAt})
	}
	return entries, nil
}

// LeaseOutbox moves an entry's due time to now so that concurrent
// reconcilers enqueue it once; false when someone else changed it first.
func (s *Store) LeaseOutbox(ctx context.Context, e payment.OutboxEntry, now time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Transactions, Key: txKey(e.Event.TransactionID),
		UpdateExpression:    aws.String("SET notifyDueAt = :now"),
		ConditionExpression: aws.String("notifyDueAt = :old"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
			":old": &types.AttributeValueMemberS{Value: e.DueAt},
		},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lease outbox of transaction %d: %w", e.Event.TransactionID, err)
	}
	return true, nil
}

// DeliveryRetention is how long attempt records are kept.
const DeliveryRetention = 30 * 24 * time.Hour

// RecordDelivery stores an attempt (kept 30 days).
func (s *Store) RecordDelivery(ctx context.Context, a payment.DeliveryAttempt) error {
	item, err := deliveryItem(a)
	if err != nil {
		return err
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item}); err != nil {
		return fmt.Errorf("record delivery attempt of request %d: %w", a.RequestID, err)
	}
	return nil
}

func deliveryItem(a payment.DeliveryAttempt) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(a)
	if err != nil {
		return nil, fmt.Errorf("marshal delivery attempt: %w", err)
	}
	item["pk"] = &types.AttributeValueMemberS{Value: "dlv#" + strconv.FormatInt(a.RequestID, 10)}
	item["sk"] = &types.AttributeValueMemberS{Value: a.At.UTC().Format(time.RFC3339Nano) + "#" + a.EventID + "#" + strconv.Itoa(a.Attempt)}
	item["expiresAt"] = numberAV(a.At.Add(DeliveryRetention).Unix())
	return item, nil
}

// Deliveries lists a request's attempts, oldest first.
func (s *Store) Deliveries(ctx context.Context, requestID int64, now time.Time) ([]payment.DeliveryAttempt, error) {
	var out []payment.DeliveryAttempt
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.t.Operations, KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "dlv#" + strconv.FormatInt(requestID, 10)}},
			ExclusiveStartKey:         start, ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("list deliveries of request %d: %w", requestID, err)
		}
		for _, item := range res.Items {
			if exp, ok := item["expiresAt"].(*types.AttributeValueMemberN); ok {
				if n, _ := strconv.ParseInt(exp.Value, 10, 64); n < now.Unix() {
					continue // expired: TTL deletion is lazy (and absent locally)
				}
			}
			var a payment.DeliveryAttempt
			if err := attributevalue.UnmarshalMap(item, &a); err != nil {
				return nil, fmt.Errorf("unmarshal delivery attempt: %w", err)
			}
			out = append(out, a)
		}
		if start = res.LastEvaluatedKey; start == nil {
			return out, nil
		}
	}
}
