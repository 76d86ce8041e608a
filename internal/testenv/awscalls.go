package testenv

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/payreq/payreq/internal/awsconfig"
)

// CallCounter records every AWS API operation made through a config.
type CallCounter struct {
	mu    sync.Mutex
	calls []string
}

// Reset forgets recorded calls.
func (c *CallCounter) Reset() { c.mu.Lock(); c.calls = nil; c.mu.Unlock() }

// Calls returns "Service.Operation" for each call since the last Reset.
func (c *CallCounter) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
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
				c.mu.Unlock()
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	return cfg, c
}
