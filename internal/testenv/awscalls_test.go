package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// A budget counted across a failure of the moment is counted again, so the
// line between such a failure and an answer decides what a budget test sees.
func TestIsTransient(t *testing.T) {
	cancelled := func(codes ...string) error {
		tc := &types.TransactionCanceledException{}
		for _, c := range codes {
			tc.CancellationReasons = append(tc.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
		}
		return fmt.Errorf("operation error DynamoDB: TransactWriteItems, %w", tc)
	}
	status := func(code int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("answer")}}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"condition failed", &types.ConditionalCheckFailedException{}, false},
		{"transaction cancelled by its conditions", cancelled("None", "ConditionalCheckFailed"), false},
		{"transaction cancelled by a conflict", cancelled("None", "TransactionConflict"), true},
		{"transaction conflict", &types.TransactionConflictException{}, true},
		{"call timed out", fmt.Errorf("operation error DynamoDB: PutItem, %w", context.DeadlineExceeded), true},
		{"500 after the SDK's retries", status(500), true},
		{"throttled", &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, true},
		{"object not found", &smithy.GenericAPIError{Code: "NotFound", Fault: smithy.FaultClient}, false},
		{"400 validation", &smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient}, false},
	} {
		if got := isTransient(c.err); got != c.want {
			t.Errorf("%s: isTransient %v, want %v", c.name, got, c.want)
		}
	}
}
