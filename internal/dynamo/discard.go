package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/payment"
)

// DiscardAttempt undoes the write-ahead of attempt txID on request
// requestID when the acquirer provably did not process its charge (it was
// rate limited every time it was sent): the waiting transaction is deleted
// and the request's attempt lease released, in one TransactWriteItems, so
// the request is payable again at once and no attempt is left for the
// reconciler to look up. Guarded by "the transaction is still waiting with
// no provider reference" and "txID holds the lease": Conflict otherwise
// (nothing written; the reconciler resolves the attempt as any other).
func (s *Store) DiscardAttempt(ctx context.Context, requestID, txID int64) error {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: &s.t.Transactions, Key: txKey(txID),
			ConditionExpression:       aws.String("#status = :waiting AND attribute_not_exists(providerRef)"),
			ExpressionAttributeNames:  map[string]string{"#status": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":waiting": numberAV(int64(payment.TxWaiting))}}},
		{Update: &types.Update{TableName: &s.t.PaymentRequests, Key: map[string]types.AttributeValue{"id": numberAV(requestID)},
			UpdateExpression:          aws.String("REMOVE attemptTx, leaseUntil"),
			ConditionExpression:       aws.String("attemptTx = :tx"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":tx": numberAV(txID)}}},
	}})
	if _, ok := cancelled(err); ok {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("discard attempt %d of payment request %d: %w", txID, requestID, err)
	}
	return nil
}
