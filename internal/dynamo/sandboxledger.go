package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

// The sandbox acquirer's ledger lives in the operations table: pk
// "sbxledger#<reference>", sk "entry". Entries are kept 90 days.
const (
	ledgerPrefix    = "sbxledger#"
	ledgerRetention = 90 * 24 * time.Hour
)

var _ ledger.Store = (*Store)(nil)

type ledgerItem struct {
	PK            string               `dynamodbav:"pk"`
	SK            string               `dynamodbav:"sk"`
	Kind          string               `dynamodbav:"kind"`
	TransactionID int64                `dynamodbav:"transactionId,omitempty"`
	Method        string               `dynamodbav:"method,omitempty"`
	Amount        string               `dynamodbav:"amount,omitempty"`
	Unit          string               `dynamodbav:"unit,omitempty"`
	Status        int                  `dynamodbav:"status"`
	Code          string               `dynamodbav:"code,omitempty"`
	Message       string               `dynamodbav:"message,omitempty"`
	ProviderRef   string               `dynamodbav:"providerRef,omitempty"`
	Abandoned     bool                 `dynamodbav:"abandoned,omitempty"`
	NextAction    *provider.NextAction `dynamodbav:"nextAction,omitempty"`
	AsyncStatus   int                  `dynamodbav:"asyncStatus,omitempty"`
	AsyncCode     string               `dynamodbav:"asyncCode,omitempty"`
	DueAt         int64                `dynamodbav:"dueAt,omitempty"` // unix ms
	AlwaysFails   bool                 `dynamodbav:"alwaysFails,omitempty"`
	Voided        bool                 `dynamodbav:"voided,omitempty"`
	ChargeRef     string               `dynamodbav:"chargeRef,omitempty"`
	CreatedAt     time.Time            `dynamodbav:"createdAt"`
	UpdatedAt     time.Time            `dynamodbav:"updatedAt"`
	ExpiresAt     int64                `dynamodbav:"expiresAt"`
}

func ledgerKey(ref string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": strAV(ledgerPrefix + ref), "sk": strAV("entry")}
}

func toLedgerItem(e ledger.Entry) ledgerItem {
	it := ledgerItem{
		PK: ledgerPrefix + e.Reference, SK: "entry", Kind: e.Kind, TransactionID: e.TransactionID, Method: string(e.Method),
		Amount: e.Amount, Unit: e.Unit, Status: int(e.Status), Code: string(e.Code), Message: e.Message,
		ProviderRef: e.ProviderRef, Abandoned: e.Abandoned, NextAction: e.NextAction, AsyncStatus: int(e.AsyncStatus),
		AsyncCode: string(e.AsyncCode), AlwaysFails: e.AlwaysFails, Voided: e.Voided, ChargeRef: e.ChargeRef,
		CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC(), ExpiresAt: e.CreatedAt.Add(ledgerRetention).Unix(),
	}
	if !e.DueAt.IsZero() {
		it.DueAt = e.DueAt.UnixMilli()
	}
	return it
}

func (it ledgerItem) entry() ledger.Entry {
	e := ledger.Entry{
		Reference: it.PK[len(ledgerPrefix):], Kind: it.Kind, TransactionID: it.TransactionID, Method: provider.Method(it.Method),
		Amount: it.Amount, Unit: it.Unit, Status: provider.Status(it.Status), Code: codes.Code(it.Code), Message: it.Message,
		ProviderRef: it.ProviderRef, Abandoned: it.Abandoned, NextAction: it.NextAction, AsyncStatus: provider.Status(it.AsyncStatus),
		AsyncCode: codes.Code(it.AsyncCode), AlwaysFails: it.AlwaysFails, Voided: it.Voided, ChargeRef: it.ChargeRef,
		CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
	}
	if it.DueAt != 0 {
		e.DueAt = time.UnixMilli(it.DueAt).UTC()
	}
	return e
}

func unmarshalLedger(item map[string]types.AttributeValue) (ledger.Entry, error) {
	var it ledgerItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return ledger.Entry{}, fmt.Errorf("unmarshal ledger entry: %w", err)
	}
	return it.entry(), nil
}

// PutLedgerEntry books e unless its reference is booked already; it returns
// the booked entry and whether it is e.
func (s *Store) PutLedgerEntry(ctx context.Context, e ledger.Entry) (ledger.Entry, bool, error) {
	item, err := attributevalue.MarshalMap(toLedgerItem(e))
	if err != nil {
		return ledger.Entry{}, false, fmt.Errorf("marshal ledger entry: %w", err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.t.Operations, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if isConditionFailed(err) {
		cur, gerr := s.LedgerEntry(ctx, e.Reference)
		return cur, false, gerr
	}
	if err != nil {
		return ledger.Entry{}, false, fmt.Errorf("put ledger entry: %w", err)
	}
	return e, true, nil
}

// LedgerEntry reads a booked entry (strongly consistent).
func (s *Store) LedgerEntry(ctx context.Context, ref string) (ledger.Entry, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Operations, Key: ledgerKey(ref), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("get ledger entry: %w", err)
	}
	if out.Item == nil {
		return ledger.Entry{}, notFound()
	}
	return unmarshalLedger(out.Item)
}

// SettleLedgerEntry moves a pending entry to its final status, once; a final
// entry is returned as booked.
func (s *Store) SettleLedgerEntry(ctx context.Context, ref string, st provider.Status, c codes.Code, msg string, now time.Time) (ledger.Entry, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Operations, Key: ledgerKey(ref),
		UpdateExpression:         aws.String("SET #status = :st, code = :code, message = :msg, updatedAt = :now REMOVE nextAction"),
		ConditionExpression:      aws.String("#status = :pending AND attribute_not_exists(abandoned)"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":st": numberAV(int64(st)), ":code": strAV(string(c)), ":msg": strAV(msg), ":now": timeAV(now),
			":pending": numberAV(int64(provider.Pending)),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return s.LedgerEntry(ctx, ref)
	}
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("settle ledger entry: %w", err)
	}
	return unmarshalLedger(out.Attributes)
}

// VoidLedgerEntry marks a booked charge voided.
func (s *Store) VoidLedgerEntry(ctx context.Context, ref string, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Operations, Key: ledgerKey(ref),
		UpdateExpression:          aws.String("SET voided = :t, updatedAt = :now"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":now": timeAV(now)},
	})
	if isConditionFailed(err) {
		return notFound()
	}
	if err != nil {
		return fmt.Errorf("void ledger entry: %w", err)
	}
	return nil
}

// LedgerEntries lists every booked entry (tests and checks; a full,
// consistent scan of the operations table's ledger items).
func (s *Store) LedgerEntries(ctx context.Context) ([]ledger.Entry, error) {
	var out []ledger.Entry
	err := s.consistentScan(ctx, s.t.Operations, "begins_with(pk, :p)", map[string]types.AttributeValue{":p": strAV(ledgerPrefix)},
		func(item map[string]types.AttributeValue) error {
			e, err := unmarshalLedger(item)
			if err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	return out, err
}
