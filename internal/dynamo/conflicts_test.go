package dynamo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// scriptedTransactions answers TransactWriteItems with errs in turn, then
// success. The emulators never cancel a transaction for a conflict, so this
// seam is the only way to reach the AWS behaviour.
type scriptedTransactions struct {
	API
	errs  []error
	calls int
}

func (s *scriptedTransactions) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func cancelledWith(codes ...string) error {
	tc := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
	for _, c := range codes {
		tc.CancellationReasons = append(tc.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return tc
}

// TestTransactionConflictIsRetried: a transaction cancelled only for
// conflicts is sent again until it goes through; one with a failed
// condition is answered at once, and retries are bounded.
func TestTransactionConflictIsRetried(t *testing.T) {
	nap := func(time.Duration) {}
	in := &dynamodb.TransactWriteItemsInput{}
	ctx := context.Background()

	fake := &scriptedTransactions{errs: []error{cancelledWith("None", "TransactionConflict"), cancelledWith("TransactionConflict", "None")}}
	if _, err := (retryConflicts{API: fake, sleep: nap}).TransactWriteItems(ctx, in); err != nil || fake.calls != 3 {
		t.Fatalf("conflicts then success: %v after %d calls, want success after 3", err, fake.calls)
	}

	condition := cancelledWith("ConditionalCheckFailed", "TransactionConflict")
	fake = &scriptedTransactions{errs: []error{condition}}
	if _, err := (retryConflicts{API: fake, sleep: nap}).TransactWriteItems(ctx, in); !errors.Is(err, condition) || fake.calls != 1 {
		t.Fatalf("failed condition: %v after %d calls, want it at once", err, fake.calls)
	}
	if failed, ok := cancelled(condition); !ok || !failed[0] || failed[1] {
		t.Fatalf("cancelled(%v) = %v %v", condition, failed, ok)
	}

	always := make([]error, 10)
	for i := range always {
		always[i] = cancelledWith("TransactionConflict")
	}
	fake = &scriptedTransactions{errs: always}
	if _, err := (retryConflicts{API: fake, sleep: nap}).TransactWriteItems(ctx, in); err == nil || fake.calls != conflictRetries+1 {
		t.Fatalf("endless conflicts: %v after %d calls, want an error after %d", err, fake.calls, conflictRetries+1)
	}
}
