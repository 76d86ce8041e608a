package devstack

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/payreq/payreq/internal/batchwire"
	"github.com/payreq/payreq/internal/callbacks"
	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/wire"
)

// The local stack's registry: template logical id → the function's Lambda
// entry point. It lives here, not in package wire, because only the local
// stack needs every function: each Lambda binary references its own entry
// point only, so the linker leaves the other handlers out of it.

// Function is one Lambda function of the template as the local stack runs it.
type Function struct {
	// Entry is the entry point functions/<name>/main.go starts (a test
	// checks that main.go calls exactly this function).
	Entry any
	// Build runs Entry and wraps its result with lambda.NewHandler: the
	// local stack invokes it with JSON event bytes, as the runtime does.
	Build func(ctx context.Context, getenv config.Getenv, cfg *aws.Config) (lambda.Handler, error)
	// Routes are the routes the handler serves (HTTP API functions only); a
	// test checks that template and handlers agree both ways.
	Routes func() []string
}

// Functions are every function of the template, by logical id.
var Functions = map[string]Function{
	"MerchantApiFunction": {Entry: wire.MerchantAPILambda, Build: fromWire(wire.MerchantAPILambda), Routes: merchantapi.Routes},
	"PaymentsFunction":    {Entry: wire.PaymentsLambda, Build: fromWire(wire.PaymentsLambda), Routes: paymentsapi.Routes},
	"CallbacksFunction":   {Entry: wire.CallbacksLambda, Build: fromWire(wire.CallbacksLambda), Routes: callbacks.Routes},
	"CheckoutFunction":    {Entry: wire.CheckoutLambda, Build: fromWire(wire.CheckoutLambda), Routes: checkout.Routes},
	"NotifierFunction":    {Entry: wire.NotifierLambda, Build: fromWire(wire.NotifierLambda)},
	"SandboxFunction":     {Entry: wire.SandboxLambda, Build: fromWire(wire.SandboxLambda)},
	"ReconcilerFunction":  {Entry: wire.ReconcilerLambda, Build: fromWire(wire.ReconcilerLambda)},
	"BatchFunction":       {Entry: batchwire.BatchLambda, Build: fromBatchwire(batchwire.BatchLambda)},
	"SftpAuthFunction":    {Entry: batchwire.SFTPAuthLambda, Build: fromBatchwire(batchwire.SFTPAuthLambda)},
	"DashboardFunction":   {Entry: wire.DashboardLambda, Build: fromWire(wire.DashboardLambda), Routes: dashboard.Routes},
}

func fromWire[H any](entry func(context.Context, config.Getenv, wire.Options) (H, error)) func(context.Context, config.Getenv, *aws.Config) (lambda.Handler, error) {
	return func(ctx context.Context, getenv config.Getenv, cfg *aws.Config) (lambda.Handler, error) {
		h, err := entry(ctx, getenv, wire.Options{AWSConfig: cfg})
		if err != nil {
			return nil, err
		}
		return lambda.NewHandler(h), nil
	}
}

func fromBatchwire[H any](entry func(context.Context, config.Getenv, batchwire.Options) (H, error)) func(context.Context, config.Getenv, *aws.Config) (lambda.Handler, error) {
	return func(ctx context.Context, getenv config.Getenv, cfg *aws.Config) (lambda.Handler, error) {
		h, err := entry(ctx, getenv, batchwire.Options{AWSConfig: cfg})
		if err != nil {
			return nil, err
		}
		return lambda.NewHandler(h), nil
	}
}
