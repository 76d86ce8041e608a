package dynamo

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// conflictRetries is how many times a transaction cancelled only by
// conflicts is sent again.
const conflictRetries = 4

// retryConflicts is the store's DynamoDB client: TransactWriteItems that
// DynamoDB cancelled only because another request was working on one of its
// items (every cancellation reason TransactionConflict, or None for the
// items that were fine) is sent again after a short jittered pause, up to
// conflictRetries times. AWS documents such a cancellation as transient
// (TransactWriteItems: TransactionCanceledException, "TransactionConflict")
// and the SDK's retryer does not retry it. A cancellation with a failed
// condition is an answer and is returned at once. DynamoDB Local never
// refuses a transaction for a conflict (docs/testing.md), so locally only
// an injected conflict takes this path; TestTransactionConflictIsRetried
// covers it on a scripted client.
type retryConflicts struct {
	API
	sleep func(time.Duration) // time.Sleep; tests
}

// retryConflictsBatch is retryConflicts over a client that also has
// BatchWriteItem, which CompleteBatchRows looks for.
type retryConflictsBatch struct {
	retryConflicts
	batchWriter
}

// withConflictRetries wraps db, keeping its optional BatchWriteItem.
func withConflictRetries(db API) API {
	r := retryConflicts{API: db}
	if bw, ok := db.(batchWriter); ok {
		return retryConflictsBatch{r, bw}
	}
	return r
}

func (r retryConflicts) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for try := 0; ; try++ {
		out, err := r.API.TransactWriteItems(ctx, in, opts...)
		if err == nil || try == conflictRetries || !onlyConflicts(err) || ctx.Err() != nil {
			return out, err
		}
		// A cancellation is an answer: nothing was applied. The next try
		// is a new request with its own ClientRequestToken (the SDK filled
		// the first one into in, and keeps one token across its own
		// retries of a call, which is what makes a lost answer safe).
		again := *in
		again.ClientRequestToken = nil
		in = &again
		pause := time.Duration(10<<try)*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
		if r.sleep != nil {
			r.sleep(pause)
		} else {
			time.Sleep(pause)
		}
	}
}

// onlyConflicts reports whether err is a transaction cancelled for
// conflicts alone.
func onlyConflicts(err error) bool {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return false
	}
	conflict := false
	for _, r := range tc.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "TransactionConflict":
			conflict = true
		case "None", "":
		default:
			return false
		}
	}
	return conflict
}
