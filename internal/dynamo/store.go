// Package dynamo stores merchants, payment requests and operational records in
// DynamoDB. Every write that can race is conditional.
package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/errkind"
)

// Tables names the physical tables.
type Tables struct {
	Merchants       string
	PaymentRequests string
	Operations      string
	// Transactions holds payment attempts (TransactionsTable).
	Transactions string
}

// API is the subset of the DynamoDB client the store uses.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Store is the DynamoDB persistence of the service.
type Store struct {
	db API
	t  Tables
	// describe is the client's DescribeTable when it has one (the audit's
	// progress estimate).
	describe tableDescriber
}

// New returns a store over db. Every single-item write recognises its own
// echo when DynamoDB applied it and lost the answer (recogniseEcho), and
// transactions that DynamoDB cancels for conflicts alone are sent again
// (retryConflicts).
func New(db API, t Tables) *Store {
	s := &Store{db: withConflictRetries(withEchoes(db)), t: t}
	s.describe, _ = db.(tableDescriber)
	return s
}

// The store answers in kinds (internal/errkind), so that no caller names an
// error of this package: NotFound for an item that is not there, Conflict
// for a conditional write whose guard failed (another state, a lost race,
// another owner's lease), Exists for a create whose key is taken (nothing
// written), RateLimited for a spent budget. Each wraps DynamoDB's own
// answer when there is one (errors.As still finds a
// ConditionalCheckFailedException).

// notFound is the answer for an item that is not there.
func notFound() error { return errkind.New(errkind.NotFound, "not found", "") }

// conflict is the answer of a write whose guard failed; cause is DynamoDB's
// answer, or nil.
func conflict(cause error) error {
	return errkind.Wrap(errkind.Conflict, cause, "conditional write failed")
}

// exists is the answer of a create whose key is taken.
func exists(cause error) error { return errkind.Wrap(errkind.Exists, cause, "already exists") }

func isConditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

// putIfAbsent creates item unless an item with the same key exists
// (keyAttr is the table's partition key): Exists then, never an overwrite.
func (s *Store) putIfAbsent(ctx context.Context, table, keyAttr string, item map[string]types.AttributeValue, what string) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &table,
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(" + keyAttr + ")"),
	})
	if isConditionFailed(err) {
		return exists(err)
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", what, err)
	}
	return nil
}
