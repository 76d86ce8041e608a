package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Idempotency record states.
const (
	IdempotencyInProgress = "in_progress"
	IdempotencyCompleted  = "completed"
)

// IdempotencyRecord is one merchant's use of one Idempotency-Key. It holds a
// fingerprint of the request, never the request itself (bodies may carry
// card data), and once completed the response to replay.
type IdempotencyRecord struct {
	MerchantID  string
	Key         string
	Fingerprint string // keyed HMAC of method, path and the canonical body without card data
	// Nonce is drawn when the key is first claimed and kept when a retry
	// takes over a claim a crash left behind: the ids of what the request
	// creates are derived from it, which binds the key to its resources
	// before any money moves.
	Nonce string
	State string // IdempotencyInProgress or IdempotencyCompleted
	// Token identifies the claim: only its holder may complete or release it,
	// so a holder whose lease ran out cannot overwrite its successor.
	Token      string
	LeaseUntil time.Time // in progress: others may take the key over after it
	ExpiresAt  time.Time // the record counts as absent from then on
	CreatedAt  time.Time

	// The stored response (completed records).
	Status  int
	Headers map[string]string
	Body    []byte
}

// Expired reports whether the record no longer exists logically (DynamoDB
// TTL deletes lazily, up to days late; DynamoDB Local never).
func (r *IdempotencyRecord) Expired(now time.Time) bool { return !now.Before(r.ExpiresAt) }

// LeaseExpired reports whether an in-progress claim may be taken over.
func (r *IdempotencyRecord) LeaseExpired(now time.Time) bool {
	return r.State == IdempotencyInProgress && !now.Before(r.LeaseUntil)
}

type idempotencyItem struct {
	PK          string            `dynamodbav:"pk"`
	SK          string            `dynamodbav:"sk"`
	State       string            `dynamodbav:"state"`
	Fingerprint string            `dynamodbav:"fingerprint"`
	Token       string            `dynamodbav:"token"`
	Nonce       string            `dynamodbav:"nonce,omitempty"`
	LeaseUntil  int64             `dynamodbav:"leaseUntil,omitempty"` // Unix milliseconds
	ExpiresAt   int64             `dynamodbav:"expiresAt"`            // Unix seconds (the table's TTL attribute)
	CreatedAt   time.Time         `dynamodbav:"createdAt"`
	CompletedAt *time.Time        `dynamodbav:"completedAt,omitempty"`
	Status      int               `dynamodbav:"status,omitempty"`
	Headers     map[string]string `dynamodbav:"headers,omitempty"`
	Body        []byte            `dynamodbav:"body,omitempty"`
}

const idempotencyPrefix = "idem#"

// Idempotency records live in the operations table: pk "idem#<merchantId>",
// sk the key as sent, so two merchants' keys can never collide.
func idempotencyKey(merchantID, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: idempotencyPrefix + merchantID},
		"sk": &types.AttributeValueMemberS{Value: key},
	}
}

func (it idempotencyItem) record() *IdempotencyRecord {
	r := &IdempotencyRecord{
		MerchantID: it.PK[min(len(idempotencyPrefix), len(it.PK)):], Key: it.SK,
		Fingerprint: it.Fingerprint, State: it.State, Token: it.Token, Nonce: it.Nonce,
		ExpiresAt: time.Unix(it.ExpiresAt, 0), CreatedAt: it.CreatedAt,
		Status: it.Status, Headers: it.Headers, Body: it.Body,
	}
	if it.LeaseUntil != 0 {
		r.LeaseUntil = time.UnixMilli(it.LeaseUntil)
	}
	return r
}

func unmarshalIdempotency(item map[string]types.AttributeValue) (*IdempotencyRecord, error) {
	var it idempotencyItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("unmarshal idempotency record: %w", err)
	}
	return it.record(), nil
}

// ClaimIdempotencyKey stores rec (state in progress, with its token, nonce,
// lease and expiry) with one conditional PutItem that succeeds only when the
// key is free at now: no record, or an expired one. An in-progress record
// whose lease ran out (a crashed or released first attempt) is taken over
// with TakeOverIdempotencyKey instead, which keeps its nonce.
//
// When the key is held it returns ErrConflict and, when DynamoDB sends it
// with the failure (ReturnValuesOnConditionCheckFailure: ALL_OLD, as AWS
// and DynamoDB Local do), the record holding it; otherwise nil, and the
// caller reads it with IdempotencyRecord.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec *IdempotencyRecord, now time.Time) (*IdempotencyRecord, error) {
	rec.State = IdempotencyInProgress
	item, err := attributevalue.MarshalMap(idempotencyItem{
		PK: idempotencyPrefix + rec.MerchantID, SK: rec.Key, State: rec.State,
		Fingerprint: rec.Fingerprint, Token: rec.Token, Nonce: rec.Nonce,
		LeaseUntil: rec.LeaseUntil.UnixMilli(), ExpiresAt: rec.ExpiresAt.Unix(), CreatedAt: rec.CreatedAt.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("marshal idempotency record: %w", err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &s.t.Operations,
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(pk) OR #exp <= :nowS"),
		ExpressionAttributeNames: map[string]string{"#exp": "expiresAt"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":nowS": numberAV(now.Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		if len(cf.Item) == 0 {
			return nil, ErrConflict
		}
		held, uerr := unmarshalIdempotency(cf.Item)
		if uerr != nil {
			return nil, ErrConflict // read it instead
		}
		return held, ErrConflict
	}
	if err != nil {
		return nil, fmt.Errorf("claim idempotency key: %w", err)
	}
	return nil, nil
}

// TakeOverIdempotencyKey gives the in-progress claim of held (whose lease
// ran out) to rec: new token and lease, the same nonce and fingerprint. One
// conditional UpdateItem on held's token, so of two retries racing for it
// one wins; ErrConflict for the other.
func (s *Store) TakeOverIdempotencyKey(ctx context.Context, rec, held *IdempotencyRecord, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.t.Operations,
		Key:                      idempotencyKey(rec.MerchantID, rec.Key),
		UpdateExpression:         aws.String("SET #token = :token, #lease = :lease"),
		ConditionExpression:      aws.String("#token = :held AND #st = :inProgress AND #lease <= :nowMs AND fingerprint = :fp"),
		ExpressionAttributeNames: map[string]string{"#token": "token", "#lease": "leaseUntil", "#st": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":token": &types.AttributeValueMemberS{Value: rec.Token}, ":lease": numberAV(rec.LeaseUntil.UnixMilli()),
			":held": &types.AttributeValueMemberS{Value: held.Token}, ":nowMs": numberAV(now.UnixMilli()),
			":inProgress": &types.AttributeValueMemberS{Value: IdempotencyInProgress},
			":fp":         &types.AttributeValueMemberS{Value: rec.Fingerprint},
		},
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("take over idempotency key: %w", err)
	}
	rec.Nonce, rec.State = held.Nonce, IdempotencyInProgress
	return nil
}

// IdempotencyRecord reads the record of a key (strongly consistent: it
// decides between replay and conflict); ErrNotFound when there is none.
// Expired records are returned as they are: check Expired.
func (s *Store) IdempotencyRecord(ctx context.Context, merchantID, key string) (*IdempotencyRecord, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.t.Operations,
		Key:            idempotencyKey(merchantID, key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get idempotency record: %w", err)
	}
	if out.Item == nil {
		return nil, ErrNotFound
	}
	return unmarshalIdempotency(out.Item)
}

// CompleteIdempotencyKey stores the response of a claimed key (one
// UpdateItem) and marks it completed; ErrConflict when rec.Token no longer
// holds the claim (its lease ran out and another request took it over).
func (s *Store) CompleteIdempotencyKey(ctx context.Context, rec *IdempotencyRecord, now time.Time) error {
	set := "SET #st = :done, #status = :status, completedAt = :now"
	values := map[string]types.AttributeValue{
		":done":       &types.AttributeValueMemberS{Value: IdempotencyCompleted},
		":inProgress": &types.AttributeValueMemberS{Value: IdempotencyInProgress},
		":status":     numberAV(int64(rec.Status)),
		":now":        &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
		":token":      &types.AttributeValueMemberS{Value: rec.Token},
	}
	names := map[string]string{"#st": "state", "#status": "status", "#token": "token", "#lease": "leaseUntil"}
	// Empty binaries and maps are left out: absent means empty.
	if len(rec.Body) > 0 {
		set += ", #body = :body"
		names["#body"] = "body"
		values[":body"] = &types.AttributeValueMemberB{Value: rec.Body}
	}
	if len(rec.Headers) > 0 {
		hv, err := attributevalue.Marshal(rec.Headers)
		if err != nil {
			return fmt.Errorf("marshal idempotency headers: %w", err)
		}
		set += ", #hdr = :hdr"
		names["#hdr"] = "headers"
		values[":hdr"] = hv
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.t.Operations,
		Key:                       idempotencyKey(rec.MerchantID, rec.Key),
		UpdateExpression:          aws.String(set + " REMOVE #lease"),
		ConditionExpression:       aws.String("#token = :token AND #st = :inProgress"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	rec.State = IdempotencyCompleted
	return nil
}

// ReleaseIdempotencyKey ends an in-progress claim held by token without a
// stored response, so a retry with the key executes again at once: the lease
// is cleared, the record and its nonce stay, so the retry resumes what this
// request started instead of starting anew. ErrConflict when token no longer
// holds it.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, merchantID, key, token string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.t.Operations,
		Key:                       idempotencyKey(merchantID, key),
		UpdateExpression:          aws.String("SET #lease = :zero"),
		ConditionExpression:       aws.String("#token = :token AND #st = :inProgress"),
		ExpressionAttributeNames:  map[string]string{"#token": "token", "#st": "state", "#lease": "leaseUntil"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":token": &types.AttributeValueMemberS{Value: token}, ":inProgress": &types.AttributeValueMemberS{Value: IdempotencyInProgress}, ":zero": numberAV(0)},
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
