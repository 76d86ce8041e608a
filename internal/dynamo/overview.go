package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

// The dashboard's overview reads aggregates, never the merchant's payments:
//
//	operations pk "dashagg#<merchantId>"  sk "h#2026-11-26T16#EUR"  an hour of one currency (kept 3 days)
//	operations pk "dashagg#<merchantId>"  sk "d#2026-11-26#EUR"     a UTC day of one currency (kept 400 days)
//
// Each holds counters that only grow by ADD: ap/de (approved/declined
// attempts), vol (approved amount, a DynamoDB Number: exact decimal),
// rf/rfv (refunds and their amount), dc_<code> (declines by spec code),
// mc_<method>/mv_<method> (approved count and amount by method),
// ca_<connector>/cd_<connector>/cv_<connector> (approved and declined
// attempts and approved amount by the connector that charged them).
//
// A settled transaction is added once: one TransactWriteItems marks the
// transaction (aggregatedAt, condition attribute_not_exists) and ADDs to its
// hour and its day; a second run for the same transaction (an SQS
// redelivery, the reconciler re-sending an entry, a dashboard redelivery)
// fails the mark's condition and changes nothing. The buckets are not in the
// payment's own settle transaction, so concurrent payments of one merchant
// never conflict on the answer path: only these writes, made by the
// notifier after the answer, meet on a bucket (conflicts are retried).
const (
	overviewPrefix = "dashagg#"
	hourTTL        = 3 * 24 * time.Hour
	dayTTL         = 400 * 24 * time.Hour
	// aggregateTries bounds the sends of one aggregate write cancelled by
	// conflicts (each send is retried conflictRetries times below it).
	aggregateTries = 8
)

var attrSafe = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

func overviewKeys(merchantID, unit string, at time.Time) (hour, day map[string]types.AttributeValue, hourExp, dayExp int64) {
	at = at.UTC()
	pk := strAV(overviewPrefix + merchantID)
	hour = map[string]types.AttributeValue{"pk": pk, "sk": strAV("h#" + at.Format("2006-01-02T15") + "#" + unit)}
	day = map[string]types.AttributeValue{"pk": pk, "sk": strAV("d#" + at.Format("2006-01-02") + "#" + unit)}
	return hour, day, at.Truncate(time.Hour).Add(hourTTL).Unix(), at.Truncate(24 * time.Hour).Add(dayTTL).Unix()
}

// aggregate adds to the hour and day buckets of at, once per marker on
// the transaction txID; false when the marker was there already.
func (s *Store) aggregate(ctx context.Context, txID int64, marker, merchantID, unit string, at, now time.Time, adds map[string]decimal.Decimal) (bool, error) {
	hour, day, hourExp, dayExp := overviewKeys(merchantID, unit, at)
	names := map[string]string{"#exp": "expiresAt"}
	vals := map[string]types.AttributeValue{}
	var parts []string
	i := 0
	for attr, v := range adds {
		n, p := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		names[n], vals[p] = attr, &types.AttributeValueMemberN{Value: v.String()}
		parts = append(parts, n+" "+p)
		i++
	}
	bucket := func(key map[string]types.AttributeValue, exp int64) types.TransactWriteItem {
		v := map[string]types.AttributeValue{":exp": numberAV(exp)}
		for k, x := range vals {
			v[k] = x
		}
		return types.TransactWriteItem{Update: &types.Update{TableName: &s.t.Operations, Key: key,
			UpdateExpression:          aws.String("SET #exp = if_not_exists(#exp, :exp) ADD " + strings.Join(parts, ", ")),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: v}}
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: &s.t.Transactions, Key: txKey(txID),
			UpdateExpression:          aws.String("SET #m = :now"),
			ConditionExpression:       aws.String("attribute_exists(id) AND attribute_not_exists(#m)"),
			ExpressionAttributeNames:  map[string]string{"#m": marker},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": strAV(now.UTC().Format(time.RFC3339Nano))}}},
		bucket(hour, hourExp),
		bucket(day, dayExp),
	}}
	for try := 1; ; try++ {
		in.ClientRequestToken = nil // each try its own request (the marker keeps it once)
		_, err := s.db.TransactWriteItems(ctx, in)
		if err == nil {
			return true, nil
		}
		if failed, ok := cancelled(err); ok && failed[0] {
			return false, nil // added before (or the transaction is gone)
		}
		if !onlyConflicts(err) || try == aggregateTries || ctx.Err() != nil {
			return false, fmt.Errorf("aggregate transaction %d into the overview: %w", txID, err)
		}
		// Many payments of one merchant settling at once meet on the same
		// buckets: spread the next sends out.
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Duration(20+rand.IntN(40*try)) * time.Millisecond):
		}
	}
}

// AggregateSettled adds a final transaction (approved or declined) to its
// merchant's overview, once; it reports whether this call added it. The
// transaction's settle time picks the buckets.
func (s *Store) AggregateSettled(ctx context.Context, tx *payment.Transaction, now time.Time) (bool, error) {
	if tx.Status != payment.TxApproved && tx.Status != payment.TxDeclined {
		return false, nil
	}
	at := tx.UpdatedAt
	if tx.SettledAt != nil {
		at = *tx.SettledAt
	}
	if at.IsZero() {
		at = now
	}
	one := decimal.NewFromInt(1)
	adds := map[string]decimal.Decimal{}
	if tx.Status == payment.TxApproved {
		adds["ap"], adds["vol"] = one, tx.Amount
		if m := tx.Method; attrSafe.MatchString(m) {
			adds["mc_"+m], adds["mv_"+m] = one, tx.Amount
		}
	} else {
		adds["de"] = one
		code := string(tx.Code)
		if !attrSafe.MatchString(code) {
			code = "none"
		}
		adds["dc_"+code] = one
	}
	if c := tx.Connector; attrSafe.MatchString(c) {
		if tx.Status == payment.TxApproved {
			adds["ca_"+c], adds["cv_"+c] = one, tx.Amount
		} else {
			adds["cd_"+c] = one
		}
	}
	return s.aggregate(ctx, tx.ID, "aggregatedAt", tx.MerchantID, tx.Unit, at, now, adds)
}

// AggregateRefund adds a transaction's completed refund to the overview of
// the refund's completion time, once.
func (s *Store) AggregateRefund(ctx context.Context, tx *payment.Transaction, now time.Time) (bool, error) {
	r := tx.Refund
	if r == nil || r.Status != payment.RefundRefunded {
		return false, nil
	}
	at := now
	if r.CompletedAt != nil {
		at = *r.CompletedAt
	}
	unit := r.Unit
	if unit == "" {
		unit = tx.Unit
	}
	return s.aggregate(ctx, tx.ID, "refundAggregatedAt", tx.MerchantID, unit, at, now,
		map[string]decimal.Decimal{"rf": decimal.NewFromInt(1), "rfv": r.Amount})
}

// Overview reads a merchant's buckets from..to (inclusive, UTC): hours or
// days, every currency, oldest first. One Query (a page holds 1 MB: 30
// days of a few currencies are a few kilobytes).
func (s *Store) Overview(ctx context.Context, merchantID string, from, to time.Time, hourly bool) ([]payment.OverviewBucket, error) {
	prefix, layout := "d#", "2006-01-02"
	if hourly {
		prefix, layout = "h#", "2006-01-02T15"
	}
	in := &dynamodb.QueryInput{
		TableName:              &s.t.Operations,
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":   strAV(overviewPrefix + merchantID),
			":from": strAV(prefix + from.UTC().Format(layout)),
			":to":   strAV(prefix + to.UTC().Format(layout) + "#~"),
		},
	}
	var out []payment.OverviewBucket
	p := dynamodb.NewQueryPaginator(s.queryAPI(), in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query overview: %w", err)
		}
		for _, item := range page.Items {
			b, err := bucketOf(item, layout, hourly)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	return out, nil
}

func bucketOf(item map[string]types.AttributeValue, layout string, hourly bool) (payment.OverviewBucket, error) {
	sk, _ := item["sk"].(*types.AttributeValueMemberS)
	if sk == nil {
		return payment.OverviewBucket{}, errors.New("overview item without sk")
	}
	f := strings.Split(sk.Value, "#")
	if len(f) != 3 {
		return payment.OverviewBucket{}, fmt.Errorf("overview item %q", sk.Value)
	}
	start, err := time.Parse(layout, f[1])
	if err != nil {
		return payment.OverviewBucket{}, fmt.Errorf("overview item %q: %w", sk.Value, err)
	}
	b := payment.OverviewBucket{Start: start, Hourly: hourly, Unit: f[2], Declines: map[string]int64{}, Methods: map[string]payment.OverviewMethod{},
		Connectors: map[string]payment.OverviewConnector{}}
	for k, v := range item {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok || k == "expiresAt" {
			continue
		}
		d, err := decimal.NewFromString(n.Value)
		if err != nil {
			return payment.OverviewBucket{}, fmt.Errorf("overview item %q %s: %w", sk.Value, k, err)
		}
		switch {
		case k == "ap":
			b.Approved = d.IntPart()
		case k == "de":
			b.Declined = d.IntPart()
		case k == "vol":
			b.Volume = d
		case k == "rf":
			b.Refunds = d.IntPart()
		case k == "rfv":
			b.RefundVolume = d
		case strings.HasPrefix(k, "dc_"):
			b.Declines[k[3:]] = d.IntPart()
		case strings.HasPrefix(k, "mc_"):
			m := b.Methods[k[3:]]
			m.Count = d.IntPart()
			b.Methods[k[3:]] = m
		case strings.HasPrefix(k, "mv_"):
			m := b.Methods[k[3:]]
			m.Volume = d
			b.Methods[k[3:]] = m
		case strings.HasPrefix(k, "ca_"), strings.HasPrefix(k, "cd_"), strings.HasPrefix(k, "cv_"):
			c := b.Connectors[k[3:]]
			switch k[:3] {
			case "ca_":
				c.Approved = d.IntPart()
			case "cd_":
				c.Declined = d.IntPart()
			default:
				c.Volume = d
			}
			b.Connectors[k[3:]] = c
		}
	}
	return b, nil
}

// Notification problems: one item per event whose delivery is failing or
// was parked in the DLQ, written by the notifier only on those paths
// (idempotent puts and deletes by event id, so a redelivered message cannot
// count twice) and deleted when a later attempt of the event succeeds.
//
//	operations pk "dashnotify#<merchantId>"  sk "<eventId>"  state failing|dlq, requestId, at; kept 30 days
const notifyProblemPrefix = "dashnotify#"

// PutNotificationProblem records that ev's delivery failed (state failing
// or dlq).
func (s *Store) PutNotificationProblem(ctx context.Context, merchantID string, p payment.NotificationProblem) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: map[string]types.AttributeValue{
		"pk": strAV(notifyProblemPrefix + merchantID), "sk": strAV(p.EventID), "state": strAV(p.State),
		"requestId": numberAV(p.RequestID), "at": strAV(p.At.UTC().Format(time.RFC3339Nano)),
		"expiresAt": numberAV(p.At.Add(30 * 24 * time.Hour).Unix()),
	}})
	if err != nil {
		return fmt.Errorf("put notification problem %s: %w", p.EventID, err)
	}
	return nil
}

// ClearNotificationProblem removes an event's problem (delivered at last).
func (s *Store) ClearNotificationProblem(ctx context.Context, merchantID, eventID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations,
		Key: map[string]types.AttributeValue{"pk": strAV(notifyProblemPrefix + merchantID), "sk": strAV(eventID)}})
	if err != nil {
		return fmt.Errorf("clear notification problem %s: %w", eventID, err)
	}
	return nil
}

// NotificationProblems lists a merchant's undelivered notifications.
func (s *Store) NotificationProblems(ctx context.Context, merchantID string) ([]payment.NotificationProblem, error) {
	var out []payment.NotificationProblem
	p := dynamodb.NewQueryPaginator(s.queryAPI(), &dynamodb.QueryInput{TableName: &s.t.Operations,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(notifyProblemPrefix + merchantID)}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query notification problems: %w", err)
		}
		for _, item := range page.Items {
			var np payment.NotificationProblem
			if err := attributevalue.UnmarshalMap(item, &np); err != nil {
				return nil, fmt.Errorf("notification problem: %w", err)
			}
			out = append(out, np)
		}
	}
	return out, nil
}

// SeedOverview adds b's counters to its bucket as they are, with no
// transaction to mark: benchmarks and tests fill a period with the
// aggregates of many payments at once (the real path, AggregateSettled,
// adds one transaction at a time).
func (s *Store) SeedOverview(ctx context.Context, merchantID string, b payment.OverviewBucket) error {
	hour, day, hourExp, dayExp := overviewKeys(merchantID, b.Unit, b.Start)
	key, exp := day, dayExp
	if b.Hourly {
		key, exp = hour, hourExp
	}
	adds := map[string]decimal.Decimal{"ap": decimal.NewFromInt(b.Approved), "de": decimal.NewFromInt(b.Declined), "vol": b.Volume,
		"rf": decimal.NewFromInt(b.Refunds), "rfv": b.RefundVolume}
	for c, n := range b.Declines {
		adds["dc_"+c] = decimal.NewFromInt(n)
	}
	for m, p := range b.Methods {
		adds["mc_"+m], adds["mv_"+m] = decimal.NewFromInt(p.Count), p.Volume
	}
	names := map[string]string{"#exp": "expiresAt"}
	vals := map[string]types.AttributeValue{":exp": numberAV(exp)}
	var parts []string
	i := 0
	for attr, v := range adds {
		n, p := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		names[n], vals[p] = attr, &types.AttributeValueMemberN{Value: v.String()}
		parts = append(parts, n+" "+p)
		i++
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.t.Operations, Key: key,
		UpdateExpression:         aws.String("SET #exp = if_not_exists(#exp, :exp) ADD " + strings.Join(parts, ", ")),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals})
	if err != nil {
		return fmt.Errorf("seed overview: %w", err)
	}
	return nil
}
