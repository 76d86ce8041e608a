package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

// Per-merchant payment limit counters live in the operations table, one item
// per merchant and UTC month:
//
//	pk = "limits#<merchantId>", sk = "YYYY-MM"
//	mc          monthly count            ma_<UNIT>       monthly total in UNIT
//	dc<DD>      count of day DD          da<DD>_<UNIT>   total of day DD in UNIT
//
// so the daily and the monthly window are reserved together by ONE
// conditional UpdateItem (ADD with conditions that keep every counter within
// its limit): never read-then-write, and no partial reservation to undo.
// Totals are kept per currency because limits compare amounts in the
// payment's own currency.

const limitsPrefix = "limits#"

func windowKey(w payment.LimitWindow) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": strAV(limitsPrefix + w.MerchantID), "sk": strAV(w.Month)}
}

func windowNames(w payment.LimitWindow) map[string]string {
	return map[string]string{"#mc": "mc", "#ma": "ma_" + w.Unit, "#dc": "dc" + w.Day, "#da": "da" + w.Day + "_" + w.Unit}
}

// monthEnd is when the item may expire: the end of the month after, so a
// late release still finds it.
func windowExpiresAt(w payment.LimitWindow) int64 {
	t, err := time.Parse("2006-01", w.Month)
	if err != nil {
		return time.Now().Add(62 * 24 * time.Hour).Unix()
	}
	return t.AddDate(0, 2, 0).Unix()
}

// ReserveLimits adds one attempt of amount to the window's counters if every
// limited counter stays within caps; Conflict (nothing added) otherwise.
// Callers check amount against the amount caps first: an amount above a cap
// on its own can never fit.
func (s *Store) ReserveLimits(ctx context.Context, w payment.LimitWindow, amount decimal.Decimal, caps payment.LimitCaps) error {
	cond := ""
	and := func(c string) {
		if cond != "" {
			cond += " AND "
		}
		cond += c
	}
	vals := map[string]types.AttributeValue{
		":one": numberAV(1), ":amt": &types.AttributeValueMemberN{Value: amount.String()}, ":exp": numberAV(windowExpiresAt(w)),
	}
	if caps.DailyCount > 0 {
		and("(attribute_not_exists(#dc) OR #dc < :dcmax)")
		vals[":dcmax"] = numberAV(caps.DailyCount)
	}
	if caps.MonthlyCount > 0 {
		and("(attribute_not_exists(#mc) OR #mc < :mcmax)")
		vals[":mcmax"] = numberAV(caps.MonthlyCount)
	}
	if caps.DailyAmount != nil {
		and("(attribute_not_exists(#da) OR #da <= :darem)")
		vals[":darem"] = &types.AttributeValueMemberN{Value: caps.DailyAmount.Sub(amount).String()}
	}
	if caps.MonthlyAmount != nil {
		and("(attribute_not_exists(#ma) OR #ma <= :marem)")
		vals[":marem"] = &types.AttributeValueMemberN{Value: caps.MonthlyAmount.Sub(amount).String()}
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 &s.t.Operations,
		Key:                       windowKey(w),
		UpdateExpression:          aws.String("SET expiresAt = :exp ADD #mc :one, #dc :one, #ma :amt, #da :amt"),
		ExpressionAttributeNames:  windowNames(w),
		ExpressionAttributeValues: vals,
	}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	_, err := s.db.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("reserve payment limits of merchant %s: %w", w.MerchantID, err)
	}
	return nil
}

// ReleaseLimits takes one attempt of amount back out of the window's
// counters (the attempt ended declined).
func (s *Store) ReleaseLimits(ctx context.Context, w payment.LimitWindow, amount decimal.Decimal) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.t.Operations,
		Key:                      windowKey(w),
		UpdateExpression:         aws.String("ADD #mc :minus, #dc :minus, #ma :amt, #da :amt"),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames: windowNames(w),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":minus": numberAV(-1), ":amt": &types.AttributeValueMemberN{Value: amount.Neg().String()},
		},
	})
	if isConditionFailed(err) {
		return nil // nothing was ever reserved in this window
	}
	if err != nil {
		return fmt.Errorf("release payment limits of merchant %s: %w", w.MerchantID, err)
	}
	return nil
}

// LimitUsageOf reads the window's counters (to report which limit a refused
// reservation hit).
func (s *Store) LimitUsageOf(ctx context.Context, w payment.LimitWindow) (payment.LimitUsage, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: windowKey(w), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return payment.LimitUsage{}, fmt.Errorf("read payment limits of merchant %s: %w", w.MerchantID, err)
	}
	var u payment.LimitUsage
	get := func(name string) decimal.Decimal {
		if n, ok := out.Item[name].(*types.AttributeValueMemberN); ok {
			if d, err := decimal.NewFromString(n.Value); err == nil {
				return d
			}
		}
		return decimal.Zero
	}
	names := windowNames(w)
	u.MonthlyCount = get(names["#mc"]).IntPart()
	u.DailyCount = get(names["#dc"]).IntPart()
	u.MonthlyAmount = get(names["#ma"])
	u.DailyAmount = get(names["#da"])
	return u, nil
}
