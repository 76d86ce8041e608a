package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
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
}

// Reset forgets recorded calls.
func (c *CallCounter) Reset() { c.mu.Lock(); c.calls, c.acquirer = nil, nil; c.mu.Unlock() }

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
// items (internal/dynamo sandboxledger.go).
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
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	return cfg, c
}
