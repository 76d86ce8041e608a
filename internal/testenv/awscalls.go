package testenv

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/payreq/payreq/internal/awsconfig"
)

// CallCounter records every AWS API operation made through a config.
type CallCounter struct {
	mu    sync.Mutex
	calls []string
	// acquirer marks the calls that book a charge in the sandbox acquirer's
	// ledger: in production they are the acquirer's (an HTTPS call to
	// Stripe), not the service's, so budgets count them apart.
	acquirer []bool
	// disturbed counts the calls that failed for the moment (Disturbed).
	disturbed int
}

// Reset forgets recorded calls.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	c.calls, c.acquirer, c.disturbed = nil, nil, 0
	c.mu.Unlock()
}

// Disturbed returns how many calls since the last Reset failed for the
// moment (isTransient: a timeout, a 5xx, throttling, a transaction
// conflict). The service answers such a failure with calls of its own (a
// retried transaction, a repeated charge's lookup), so a count taken across
// one measures the machine's load, not the design.
func (c *CallCounter) Disturbed() int { c.mu.Lock(); defer c.mu.Unlock(); return c.disturbed }

// isTransient reports whether err is a failure of the moment rather than
// an answer: the call ran out of time, the SDK gave up retrying a 5xx, a
// throttle or a dropped connection, or a transaction was cancelled for
// anything but the conditions it carried (a conflict with another
// transaction, throttling).
func isTransient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if code := aws.ToString(r.Code); code != "" && code != "None" && code != "ConditionalCheckFailed" {
				return true
			}
		}
		return false
	}
	var conflict *types.TransactionConflictException
	return errors.As(err, &conflict) ||
		retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

// Calls returns "Service.Operation" for each call since the last Reset.
func (c *CallCounter) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// Split returns the calls since the last Reset in two lists: the service's
// own, and those that stand for the acquirer (the sandbox ledger).
func (c *CallCounter) Split() (own, acquirer []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, call := range c.calls {
		if c.acquirer[i] {
			acquirer = append(acquirer, call)
		} else {
			own = append(own, call)
		}
	}
	return own, acquirer
}

// sandboxLedgerPrefix is the key prefix of the sandbox acquirer's ledger
// items (internal/dynamo's ledger items).
const sandboxLedgerPrefix = "sbxledger#"

func touchesLedger(in any) bool {
	var key map[string]types.AttributeValue
	switch v := in.(type) {
	case *dynamodb.PutItemInput:
		key = v.Item
	case *dynamodb.UpdateItemInput:
		key = v.Key
	case *dynamodb.GetItemInput:
		key = v.Key
	case *dynamodb.DeleteItemInput:
		key = v.Key
	}
	pk, ok := key["pk"].(*types.AttributeValueMemberS)
	return ok && strings.HasPrefix(pk.Value, sandboxLedgerPrefix)
}

// CountingAWSConfig loads the SDK config (emulator endpoints included) with a
// middleware that counts operations; retries of one operation count once.
func CountingAWSConfig(tb testing.TB) (aws.Config, *CallCounter) {
	tb.Helper()
	Stack(tb)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	c := &CallCounter{}
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("payreqCallCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.mu.Lock()
				c.calls = append(c.calls, awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx))
				c.acquirer = append(c.acquirer, touchesLedger(in.Parameters))
				c.mu.Unlock()
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil && isTransient(err) {
					c.mu.Lock()
					c.disturbed++
					c.mu.Unlock()
				}
				return out, md, err
			}), middleware.After)
	})
	return cfg, c
}
