package devstack

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/payreq/payreq/internal/callbacks"
	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/auditwire"
	"github.com/payreq/payreq/internal/wire/batchwire"
	"github.com/payreq/payreq/internal/wire/callbackswire"
	"github.com/payreq/payreq/internal/wire/checkoutwire"
	"github.com/payreq/payreq/internal/wire/dashboardwire"
	"github.com/payreq/payreq/internal/wire/merchantapiwire"
	"github.com/payreq/payreq/internal/wire/notifierwire"
	"github.com/payreq/payreq/internal/wire/paymentswire"
	"github.com/payreq/payreq/internal/wire/reconcilerwire"
	"github.com/payreq/payreq/internal/wire/sandboxwire"
	"github.com/payreq/payreq/internal/wire/sftpauthwire"
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
	"MerchantApiFunction": {Entry: merchantapiwire.MerchantAPILambda, Build: fromWire(merchantapiwire.MerchantAPILambda), Routes: merchantapi.Routes},
	"PaymentsFunction":    {Entry: paymentswire.PaymentsLambda, Build: fromWire(paymentswire.PaymentsLambda), Routes: paymentsapi.Routes},
	"CallbacksFunction":   {Entry: callbackswire.CallbacksLambda, Build: fromWire(callbackswire.CallbacksLambda), Routes: callbacks.Routes},
	"CheckoutFunction":    {Entry: checkoutwire.CheckoutLambda, Build: fromWire(checkoutwire.CheckoutLambda), Routes: checkout.Routes},
	"NotifierFunction":    {Entry: notifierwire.NotifierLambda, Build: fromWire(notifierwire.NotifierLambda)},
	"SandboxFunction":     {Entry: sandboxwire.SandboxLambda, Build: fromWire(sandboxwire.SandboxLambda)},
	"ReconcilerFunction":  {Entry: reconcilerwire.ReconcilerLambda, Build: fromWire(reconcilerwire.ReconcilerLambda)},
	"BatchFunction":       {Entry: batchwire.BatchLambda, Build: fromWire(batchwire.BatchLambda)},
	"SftpAuthFunction":    {Entry: sftpauthwire.SFTPAuthLambda, Build: fromWire(sftpauthwire.SFTPAuthLambda)},
	"DashboardFunction":   {Entry: dashboardwire.DashboardLambda, Build: fromWire(dashboardwire.DashboardLambda), Routes: dashboard.Routes},
	"AuditFunction":       {Entry: auditwire.AuditLambda, Build: fromWire(auditwire.AuditLambda)},
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
