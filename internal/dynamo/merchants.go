package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/merchant"
)

// APIKeyIndex is the GSI of the merchants table keyed by apiKeyHash.
const APIKeyIndex = "byApiKeyHash"

type merchantRecord struct {
	MerchantID         string    `dynamodbav:"merchantId"`
	Name               string    `dynamodbav:"name"`
	Sandbox            bool      `dynamodbav:"sandbox"`
	NotifyURL          string    `dynamodbav:"notifyUrl,omitempty"`
	SuccessURL         string    `dynamodbav:"successUrl,omitempty"`
	FailureURL         string    `dynamodbav:"failureUrl,omitempty"`
	AllowedOrigins     []string  `dynamodbav:"allowedOrigins,omitempty"`
	Methods            []int     `dynamodbav:"methods,omitempty"`
	Limits             string    `dynamodbav:"limits,omitempty"` // JSON: decimals stay exact
	RateLimitPerMinute int       `dynamodbav:"rateLimitPerMinute,omitempty"`
	NotificationFormat string    `dynamodbav:"notificationFormat,omitempty"`
	Routing            string    `dynamodbav:"routing,omitempty"` // JSON (internal/routing): decimals stay exact
	APIKeyHash         string    `dynamodbav:"apiKeyHash"`
	APIKeyPrefix       string    `dynamodbav:"apiKeyPrefix"`
	SealedAPIKey       string    `dynamodbav:"sealedApiKey"`
	SealedSecret       string    `dynamodbav:"sealedSecret,omitempty"`
	PrevAPIKeyHash     string    `dynamodbav:"prevApiKeyHash,omitempty"`
	PrevAPIKeyPrefix   string    `dynamodbav:"prevApiKeyPrefix,omitempty"`
	PrevAPIKeyUntilMs  int64     `dynamodbav:"prevApiKeyUntilMs,omitempty"`
	SealedPrevSecret   string    `dynamodbav:"sealedPrevSecret,omitempty"`
	PrevSecretUntilMs  int64     `dynamodbav:"prevSecretUntilMs,omitempty"`
	CreatedAt          time.Time `dynamodbav:"createdAt"`
	UpdatedAt          time.Time `dynamodbav:"updatedAt"`
	Version            int64     `dynamodbav:"version"`
}

func toMerchantRecord(m *merchant.Merchant) (merchantRecord, error) {
	limits, err := json.Marshal(m.Limits)
	if err != nil {
		return merchantRecord{}, err
	}
	var rules []byte
	if !m.Routing.Empty() {
		if rules, err = json.Marshal(m.Routing); err != nil {
			return merchantRecord{}, err
		}
	}
	return merchantRecord{
		Routing:    string(rules),
		MerchantID: m.ID, Name: m.Name, Sandbox: m.Sandbox, NotifyURL: m.NotifyURL, SuccessURL: m.SuccessURL,
		FailureURL: m.FailureURL, AllowedOrigins: m.AllowedOrigins, Methods: m.Methods, Limits: string(limits),
		RateLimitPerMinute: m.RateLimitPerMinute, NotificationFormat: m.NotificationFormat,
		APIKeyHash: m.APIKeyHash, APIKeyPrefix: m.APIKeyPrefix, SealedAPIKey: m.SealedAPIKey, SealedSecret: m.SealedSecret,
		PrevAPIKeyHash: m.PrevAPIKeyHash, PrevAPIKeyPrefix: m.PrevAPIKeyPrefix, PrevAPIKeyUntilMs: unixMs(m.PrevAPIKeyUntil),
		SealedPrevSecret: m.SealedPrevSecret, PrevSecretUntilMs: unixMs(m.PrevSecretUntil),
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(), Version: m.Version,
	}, nil
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (r merchantRecord) merchant() (*merchant.Merchant, error) {
	m := &merchant.Merchant{
		ID: r.MerchantID, Name: r.Name, Sandbox: r.Sandbox, NotifyURL: r.NotifyURL, SuccessURL: r.SuccessURL,
		FailureURL: r.FailureURL, AllowedOrigins: r.AllowedOrigins, Methods: r.Methods,
		RateLimitPerMinute: r.RateLimitPerMinute, NotificationFormat: r.NotificationFormat,
		APIKeyHash: r.APIKeyHash, APIKeyPrefix: r.APIKeyPrefix, SealedAPIKey: r.SealedAPIKey, SealedSecret: r.SealedSecret,
		PrevAPIKeyHash: r.PrevAPIKeyHash, PrevAPIKeyPrefix: r.PrevAPIKeyPrefix, PrevAPIKeyUntil: fromUnixMs(r.PrevAPIKeyUntilMs),
		SealedPrevSecret: r.SealedPrevSecret, PrevSecretUntil: fromUnixMs(r.PrevSecretUntilMs),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Version: r.Version,
	}
	if r.Limits != "" {
		if err := json.Unmarshal([]byte(r.Limits), &m.Limits); err != nil {
			return nil, fmt.Errorf("decode limits of merchant %s: %w", r.MerchantID, err)
		}
	}
	if r.Routing != "" {
		if err := json.Unmarshal([]byte(r.Routing), &m.Routing); err != nil {
			return nil, fmt.Errorf("decode routing of merchant %s: %w", r.MerchantID, err)
		}
	}
	return m, nil
}

// CreateMerchant stores a new merchant; Exists if the id is taken.
func (s *Store) CreateMerchant(ctx context.Context, m *merchant.Merchant) error {
	m.Version = 1
	rec, err := toMerchantRecord(m)
	if err != nil {
		return fmt.Errorf("encode merchant %s: %w", m.ID, err)
	}
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return fmt.Errorf("marshal merchant %s: %w", m.ID, err)
	}
	return s.putIfAbsent(ctx, s.t.Merchants, "merchantId", item, fmt.Sprintf("merchant %s", m.ID))
}

// UpdateMerchant replaces a merchant if nobody changed it since it was read
// (optimistic locking on version); Conflict otherwise.
func (s *Store) UpdateMerchant(ctx context.Context, m *merchant.Merchant) error {
	prev := m.Version
	m.Version = prev + 1
	rec, err := toMerchantRecord(m)
	if err != nil {
		return fmt.Errorf("encode merchant %s: %w", m.ID, err)
	}
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return fmt.Errorf("marshal merchant %s: %w", m.ID, err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &s.t.Merchants,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_exists(merchantId) AND version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": numberAV(prev)},
	})
	if isConditionFailed(err) {
		m.Version = prev
		return conflict(err)
	}
	if err != nil {
		m.Version = prev
		return fmt.Errorf("update merchant %s: %w", m.ID, err)
	}
	return nil
}

// Merchant loads a merchant by id.
func (s *Store) Merchant(ctx context.Context, id string) (*merchant.Merchant, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.t.Merchants,
		Key:            map[string]types.AttributeValue{"merchantId": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get merchant %s: %w", id, err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	var rec merchantRecord
	if err := attributevalue.UnmarshalMap(out.Item, &rec); err != nil {
		return nil, fmt.Errorf("unmarshal merchant %s: %w", id, err)
	}
	return rec.merchant()
}

// MerchantByAPIKeyHash finds the merchant owning a key hash: its current
// key (one Query on the GSI), else a key rotated out with an overlap (a
// consistent read of the key's pointer item, then of the merchant, whose
// record decides: the caller checks PrevAPIKeyHash and PrevAPIKeyUntil).
func (s *Store) MerchantByAPIKeyHash(ctx context.Context, hash string) (*merchant.Merchant, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.t.Merchants,
		IndexName:                 aws.String(APIKeyIndex),
		KeyConditionExpression:    aws.String("apiKeyHash = :h"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberS{Value: hash}},
		Limit:                     aws.Int32(2),
	})
	if err != nil {
		return nil, fmt.Errorf("query merchant by key hash: %w", err)
	}
	if len(out.Items) == 1 {
		return unmarshalMerchant(out.Items[0])
	}
	if len(out.Items) > 1 {
		return nil, notFound() // two merchants can never share a 256-bit key; treat it as unknown
	}
	p, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: dashKey(prevKeyPrefix+hash, "key"),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get previous key: %w", err)
	}
	id, _ := p.Item["merchantId"].(*types.AttributeValueMemberS)
	if id == nil {
		return nil, notFound()
	}
	m, err := s.Merchant(ctx, id.Value)
	if err != nil {
		return nil, err
	}
	if m.PrevAPIKeyHash != hash {
		return nil, notFound() // rotated again, or ended: the pointer is stale
	}
	return m, nil
}

// prevKeyPrefix keys the operations table's pointer from a rotated-out
// key's hash to its merchant.
const prevKeyPrefix = "apikeyprev#"

// PutPreviousAPIKey stores the pointer from a key being rotated out (its
// hash) to its merchant, kept a day past the overlap's end (TTL). Written
// before the merchant's rotation; on its own it grants nothing: the
// merchant record's PrevAPIKeyHash and PrevAPIKeyUntil decide. An
// unconditional put: sent twice, it writes the same item.
func (s *Store) PutPreviousAPIKey(ctx context.Context, merchantID, hash string, until time.Time) error {
	item := dashKey(prevKeyPrefix+hash, "key")
	item["merchantId"], item["untilMs"] = strAV(merchantID), numberAV(until.UnixMilli())
	item["expiresAt"] = numberAV(until.Add(24 * time.Hour).Unix())
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item}); err != nil {
		return fmt.Errorf("put previous key: %w", err)
	}
	return nil
}

func unmarshalMerchant(item map[string]types.AttributeValue) (*merchant.Merchant, error) {
	var rec merchantRecord
	if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
		return nil, fmt.Errorf("unmarshal merchant: %w", err)
	}
	return rec.merchant()
}
