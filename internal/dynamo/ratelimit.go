package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/errkind"
)

// Rate-limit counters live in the operations table, one item per client and
// fixed window: pk "rl#<client>", sk "<window number>" (for one-minute
// windows, the Unix minute). A new window is a new item, so an old counter
// never needs resetting and an expired one is never read again; expiresAt
// lets DynamoDB TTL sweep them.
func rateLimitKey(client string, window int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "rl#" + client},
		"sk": &types.AttributeValueMemberS{Value: strconv.FormatInt(window, 10)},
	}
}

// TakeRateLimit counts one request of client in window when fewer than limit
// were counted so far, with one atomic conditional UpdateItem (never
// read-then-write, so concurrent callers on any number of instances can
// never admit more than limit). It returns the count including this request,
// or a RateLimited error (nothing counted) when the budget is spent.
// expiresAt (the TTL attribute) should lie after the window's end.
func (s *Store) TakeRateLimit(ctx context.Context, client string, window int64, limit int, expiresAt time.Time) (int, error) {
	if limit <= 0 {
		return 0, limitReached(nil)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.t.Operations,
		Key:                 rateLimitKey(client, window),
		UpdateExpression:    aws.String("SET #exp = :exp ADD #n :one"),
		ConditionExpression: aws.String("attribute_not_exists(#n) OR #n < :limit"),
		ExpressionAttributeNames: map[string]string{
			"#n":   "count",
			"#exp": "expiresAt",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one":   numberAV(1),
			":limit": numberAV(int64(limit)),
			":exp":   numberAV(expiresAt.Unix()),
		},
		ReturnValues: types.ReturnValueUpdatedNew,
	})
	if isConditionFailed(err) {
		return 0, limitReached(err)
	}
	if err != nil {
		return 0, fmt.Errorf("count request of %s in window %d: %w", client, window, err)
	}
	n, ok := out.Attributes["count"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("count request of %s in window %d: no count returned", client, window)
	}
	count, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, fmt.Errorf("count request of %s in window %d: count %q: %w", client, window, n.Value, err)
	}
	return count, nil
}

// limitReached is the answer when the window's budget is spent: the request
// was not counted. The caller knows when the window ends.
func limitReached(cause error) error {
	return errkind.Wrap(errkind.RateLimited, cause, "rate limit reached")
}
