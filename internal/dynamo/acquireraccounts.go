package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/dashuser"
)

// A merchant's own acquirer accounts live in the Operations table, one item
// each: pk connectorPrefix+merchantId, sk the account's name. Its secrets
// are stored sealed (acquireraccount.Owner); nothing here ever sees them open.
const connectorPrefix = "connector#"

type connectorItem struct {
	PK        string            `dynamodbav:"pk"`
	SK        string            `dynamodbav:"sk"`
	Kind      string            `dynamodbav:"kind"`
	Status    string            `dynamodbav:"status"`
	Settings  map[string]string `dynamodbav:"settings,omitempty"`
	Sealed    map[string]string `dynamodbav:"sealed,omitempty"`
	Masks     map[string]string `dynamodbav:"masks,omitempty"`
	Live      bool              `dynamodbav:"live"`
	CheckedAt time.Time         `dynamodbav:"checkedAt"`
	CreatedAt time.Time         `dynamodbav:"createdAt"`
	UpdatedAt time.Time         `dynamodbav:"updatedAt"`
	Version   int64             `dynamodbav:"version"`
}

func connectorKey(merchantID, name string) map[string]types.AttributeValue {
	return dashKey(connectorPrefix+merchantID, name)
}

func (s *Store) connectorWrite(a *acquireraccount.Account, audit dashuser.AuditEntry, cond string, vals map[string]types.AttributeValue) (*dynamodb.TransactWriteItemsInput, error) {
	item, err := attributevalue.MarshalMap(connectorItem{PK: connectorPrefix + a.MerchantID, SK: a.Name, Kind: string(a.Kind),
		Status: string(a.Status), Settings: a.Settings, Sealed: a.Sealed, Masks: a.Masks, Live: a.Live,
		CheckedAt: a.CheckedAt.UTC(), CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(), Version: a.Version})
	if err != nil {
		return nil, fmt.Errorf("marshal connector: %w", err)
	}
	entry := s.auditItem(audit)
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.t.Operations, Item: item, ConditionExpression: aws.String(cond), ExpressionAttributeValues: vals}},
		{Put: &types.Put{TableName: &s.t.Operations, Item: entry, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}}, nil
}

// CreateConnector writes a new account and its audit entry in one
// transaction; Exists when the merchant has an account of that name. A
// retry whose first answer was lost replays the same ClientRequestToken
// and succeeds without writing twice.
func (s *Store) CreateConnector(ctx context.Context, a *acquireraccount.Account, audit dashuser.AuditEntry) error {
	in, err := s.connectorWrite(a, audit, "attribute_not_exists(pk)", nil)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, in)
	if failed, ok := cancelled(err); ok && failed[0] {
		return exists(err)
	}
	if err != nil {
		return fmt.Errorf("create connector %s: %w", a.Name, err)
	}
	return nil
}

// UpdateConnector replaces the account stored at version a.Version-1 and
// writes the audit entry, in one transaction: Conflict when the stored
// version differs (another change won), NotFound when there is none.
func (s *Store) UpdateConnector(ctx context.Context, a *acquireraccount.Account, audit dashuser.AuditEntry) error {
	in, err := s.connectorWrite(a, audit, "attribute_exists(pk) AND version = :prev",
		map[string]types.AttributeValue{":prev": numberAV(a.Version - 1)})
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, in)
	if failed, ok := cancelled(err); ok && failed[0] {
		if _, gerr := s.Connector(ctx, a.MerchantID, a.Name); gerr != nil {
			return gerr
		}
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("update connector %s: %w", a.Name, err)
	}
	return nil
}

// Connector reads one account (strongly consistent); NotFound when absent.
func (s *Store) Connector(ctx context.Context, merchantID, name string) (*acquireraccount.Account, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: connectorKey(merchantID, name),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get connector %s: %w", name, err)
	}
	if len(out.Item) == 0 {
		return nil, notFound()
	}
	return unmarshalConnector(out.Item, merchantID)
}

// Connectors lists a merchant's accounts by name (strongly consistent).
func (s *Store) Connectors(ctx context.Context, merchantID string) ([]*acquireraccount.Account, error) {
	var list []*acquireraccount.Account
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{TableName: &s.t.Operations,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(connectorPrefix + merchantID)},
		ConsistentRead:            aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query connectors: %w", err)
		}
		for _, it := range page.Items {
			a, err := unmarshalConnector(it, merchantID)
			if err != nil {
				return nil, err
			}
			list = append(list, a)
		}
	}
	return list, nil
}

func unmarshalConnector(item map[string]types.AttributeValue, merchantID string) (*acquireraccount.Account, error) {
	var r connectorItem
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return nil, fmt.Errorf("unmarshal connector: %w", err)
	}
	return &acquireraccount.Account{MerchantID: merchantID, Name: r.SK, Kind: acquireraccount.Kind(r.Kind), Status: acquireraccount.Status(r.Status),
		Settings: r.Settings, Sealed: r.Sealed, Masks: r.Masks, Live: r.Live, CheckedAt: r.CheckedAt, CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt, Version: r.Version}, nil
}

// auditItem is e as an item of the merchant's audit trail.
func (s *Store) auditItem(e dashuser.AuditEntry) map[string]types.AttributeValue {
	at := e.At.UTC()
	item := dashKey(dashAuditPrefix+e.MerchantID, at.Format("2006-01-02T15:04:05.000000000Z")+"#"+dashuser.NewToken()[:8])
	item["at"], item["actor"], item["action"], item["detail"] = strAV(at.Format(time.RFC3339Nano)), strAV(e.Actor), strAV(e.Action), strAV(e.Detail)
	item["expiresAt"] = numberAV(at.Add(auditRetention).Unix())
	return item
}
