package dynamo

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

// The stored forms of the payment records, exactly as the store writes
// them, for bulk loads with BatchWriteItem (the audit's volume test seeds
// a million payments with them; a migration would too). The store's own
// writes stay conditional: these are for tables nothing else writes to.

// TransactionItem is t's item in the transactions table.
func TransactionItem(t *payment.Transaction) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(toTransactionRecord(t))
	if err != nil {
		return nil, fmt.Errorf("marshal transaction %d: %w", t.ID, err)
	}
	return item, nil
}

// RequestItem is r's item in the payment requests table, as the service
// writes it (a paid request's UpdatedAt is its payment).
func RequestItem(r *payment.Request) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(toRequestRecord(r))
	if err != nil {
		return nil, fmt.Errorf("marshal payment request %d: %w", r.ID, err)
	}
	return item, nil
}

// LedgerItem is e's item in the operations table.
func LedgerItem(e ledger.Entry) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(toLedgerItem(e))
	if err != nil {
		return nil, fmt.Errorf("marshal ledger entry: %w", err)
	}
	return item, nil
}

// DeliveryItem is a's item in the operations table.
func DeliveryItem(a payment.DeliveryAttempt) (map[string]types.AttributeValue, error) {
	return deliveryItem(a)
}
