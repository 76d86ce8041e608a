package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/lockout"
)

// Login attempt counters (internal/lockout), in the operations table:
//
//	pk "loginattempts#<key>"  sk "attempts"   expiresAt = TTL
//
// The key is a hash of what names the login (the dashboard's merchant and
// address, keyed; the SFTP user name), never the name itself. A counter is
// written for every name tried, known or not, and kept a day past its last
// failure or lock.
const loginAttemptsPrefix = "loginattempts#"

type loginAttemptsItem struct {
	PK          string   `dynamodbav:"pk"`
	SK          string   `dynamodbav:"sk"`
	Failures    int      `dynamodbav:"failures"`
	LockedUntil int64    `dynamodbav:"lockedUntilMs,omitempty"`
	Seq         int64    `dynamodbav:"seq"`
	LockSeq     int64    `dynamodbav:"lockSeq,omitempty"`
	Writes      []string `dynamodbav:"writes"`
	Version     int64    `dynamodbav:"version"`
	ExpiresAt   int64    `dynamodbav:"expiresAt"`
}

func loginAttemptsKey(key string) map[string]types.AttributeValue {
	return dashKey(loginAttemptsPrefix+key, "attempts")
}

func (it *loginAttemptsItem) counter(key string) lockout.Counter {
	c := lockout.Counter{Key: key, Failures: it.Failures, Seq: it.Seq, LockSeq: it.LockSeq, Writes: it.Writes, Version: it.Version}
	if it.LockedUntil > 0 {
		c.LockedUntil = time.UnixMilli(it.LockedUntil).UTC()
	}
	return c
}

// LoginAttempts reads a counter (consistent read); Version 0 when none.
func (s *Store) LoginAttempts(ctx context.Context, key string) (lockout.Counter, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: loginAttemptsKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return lockout.Counter{}, fmt.Errorf("get login attempts: %w", err)
	}
	if out.Item == nil {
		return lockout.Counter{Key: key}, nil
	}
	var it loginAttemptsItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return lockout.Counter{}, fmt.Errorf("unmarshal login attempts: %w", err)
	}
	return it.counter(key), nil
}

// PutLoginAttempts writes c (guard: attribute_not_exists(pk) for Version
// 0, else version = c.Version); Conflict when the guard fails, unless
// the stored counter already holds c.Write among its kept writes: then
// this write was applied by an earlier send whose answer was lost (the
// SDK's retry), and it succeeds. The stored counter comes with the failure
// (ReturnValuesOnConditionCheckFailure), or from a read where the emulator
// does not send it.
func (s *Store) PutLoginAttempts(ctx context.Context, c *lockout.Counter, expires time.Time) error {
	it := loginAttemptsItem{PK: loginAttemptsPrefix + c.Key, SK: "attempts", Failures: c.Failures, Seq: c.Seq, LockSeq: c.LockSeq,
		Writes: lockout.Remember(c.Writes, c.Write), Version: c.Version + 1, ExpiresAt: expires.Unix()}
	if !c.LockedUntil.IsZero() {
		it.LockedUntil = c.LockedUntil.UnixMilli()
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("marshal login attempts: %w", err)
	}
	in := &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	if c.Version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("version = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": numberAV(c.Version)}
	}
	_, err = s.db.PutItem(ctx, in)
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		held := cf.Item
		if len(held) == 0 {
			out, gerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: loginAttemptsKey(c.Key), ConsistentRead: aws.Bool(true)})
			if gerr != nil {
				return fmt.Errorf("get login attempts after a conflict: %w", gerr)
			}
			held = out.Item
		}
		var stored loginAttemptsItem
		if len(held) > 0 && attributevalue.UnmarshalMap(held, &stored) == nil && slices.Contains(stored.Writes, c.Write) {
			c.Version, c.Writes = stored.Version, stored.Writes
			return nil
		}
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("put login attempts: %w", err)
	}
	c.Version, c.Writes = it.Version, it.Writes
	return nil
}
