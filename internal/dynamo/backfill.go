package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/payment"
)

// BackfillCounts is what a retention backfill did: items read, items given
// their expiresAt, and items left alone because they changed between the
// read and the write (their own write sets expiresAt).
type BackfillCounts struct {
	Scanned int64 `json:"scanned"`
	Set     int64 `json:"set"`
	Changed int64 `json:"changed"`
}

// BackfillRecordExpiry gives every payment request and transaction that has
// no expiresAt (written before the tables had TTL) the one the service
// writes today: a transaction RecordRetention after its creation, a request
// RecordRetention after its creation, or after its payment when paid. Each
// table is scanned in segments at once; each write is conditional on the
// item as read (no expiresAt, the same updatedAt), so a record the service
// changes meanwhile keeps what its own write gives it, a second run finds
// nothing to do, and a write whose answer was lost is recognised by its
// write id. progress, when set, is called after each page, one call at a
// time.
func (s *Store) BackfillRecordExpiry(ctx context.Context, segments int, progress func(BackfillCounts)) (BackfillCounts, error) {
	var (
		mu    sync.Mutex
		total BackfillCounts
		errs  []error
		wg    sync.WaitGroup
	)
	for _, table := range []string{s.t.Transactions, s.t.PaymentRequests} {
		for seg := 0; seg < segments; seg++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.backfillSegment(ctx, table, seg, segments, func(c BackfillCounts) {
					mu.Lock()
					defer mu.Unlock()
					total.Scanned += c.Scanned
					total.Set += c.Set
					total.Changed += c.Changed
					if progress != nil {
						progress(total)
					}
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

func (s *Store) backfillSegment(ctx context.Context, table string, seg, segments int, page func(BackfillCounts)) error {
	in := &dynamodb.ScanInput{
		TableName: &table, Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(int32(segments)),
		FilterExpression:         aws.String("attribute_not_exists(expiresAt)"),
		ProjectionExpression:     aws.String("id, createdAt, updatedAt, #s"),
		ExpressionAttributeNames: map[string]string{"#s": "status"},
	}
	for {
		out, err := s.db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("backfill expiry: scan %s segment %d: %w", table, seg, err)
		}
		c := BackfillCounts{Scanned: int64(out.ScannedCount)}
		for _, item := range out.Items {
			exp, ok := recordExpiry(table == s.t.PaymentRequests, item)
			if !ok {
				continue // no creation time: nothing to count the retention from
			}
			set, err := s.setExpiry(ctx, table, item, exp)
			if err != nil {
				return err
			}
			if set {
				c.Set++
			} else {
				c.Changed++
			}
		}
		page(c)
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// recordExpiry is the expiresAt the service writes for the item (a
// request's or a transaction's id, createdAt, updatedAt, status).
func recordExpiry(request bool, item map[string]types.AttributeValue) (int64, bool) {
	at := func(name string) (time.Time, bool) {
		v, ok := item[name].(*types.AttributeValueMemberS)
		if !ok {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, v.Value)
		return t, err == nil
	}
	created, ok := at("createdAt")
	if !ok {
		return 0, false
	}
	if !request {
		return transactionExpiresAt(created), true
	}
	var paidAt time.Time
	if st, isN := item["status"].(*types.AttributeValueMemberN); isN && st.Value == fmt.Sprint(int(payment.RequestPaid)) {
		paidAt, _ = at("updatedAt")
	}
	return requestExpiresAt(created, paidAt), true
}

// setExpiry writes exp on the item unless it changed since it was read;
// false when it had.
func (s *Store) setExpiry(ctx context.Context, table string, item map[string]types.AttributeValue, exp int64) (bool, error) {
	cond := "attribute_exists(id) AND attribute_not_exists(expiresAt) AND "
	vals := map[string]types.AttributeValue{":e": numberAV(exp)}
	if u, ok := item["updatedAt"]; ok {
		cond += "updatedAt = :u"
		vals[":u"] = u
	} else {
		cond += "attribute_not_exists(updatedAt)"
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: map[string]types.AttributeValue{"id": item["id"]},
		UpdateExpression: aws.String("SET expiresAt = :e"), ConditionExpression: aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	var cf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("backfill expiry: %s item %v: %w", table, item["id"], err)
	}
	return true, nil
}
