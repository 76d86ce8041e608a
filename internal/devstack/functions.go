package devstack

import (
	"context"
	"net/http"

	"github.com/payreq/payreq/internal/batchwire"
	"github.com/payreq/payreq/internal/callbacks"
	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/payments"
	"github.com/payreq/payreq/internal/wire"
)

// The local stack's registry: template logical id → wiring. It lives here,
// not in package wire, because only the local stack needs every function:
// each Lambda binary references its own wiring function only, so the linker
// leaves the other handlers out of it.

// HTTPFunction is an HTTP-triggered function: its routes and its wiring.
type HTTPFunction struct {
	Routes func() []string
	Build  func(ctx context.Context, getenv config.Getenv, opts wire.Options) (http.Handler, error)
}

// SQSFunction is an SQS-triggered function.
type SQSFunction struct {
	Build func(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.SQSHandler, error)
}

// ScheduledFunction is a function triggered by an EventBridge schedule.
type ScheduledFunction struct {
	Build func(ctx context.Context, getenv config.Getenv, opts wire.Options) (func(context.Context) error, error)
}

// HTTPFunctions are mounted on their template routes; a test checks that
// template and handlers agree both ways.
var HTTPFunctions = map[string]HTTPFunction{
	"MerchantApiFunction": {Routes: merchantapi.Routes, Build: wire.MerchantAPI},
	"PaymentsFunction":    {Routes: payments.Routes, Build: wire.Payments},
	"CallbacksFunction":   {Routes: callbacks.Routes, Build: wire.Callbacks},
	"CheckoutFunction":    {Routes: checkout.Routes, Build: wire.Checkout},
}

// SQSFunctions are fed by pollers on their template queues.
var SQSFunctions = map[string]SQSFunction{
	"NotifierFunction": {Build: wire.Notifier},
	"SandboxFunction":  {Build: wire.Sandbox},
	// BatchFunction's second trigger, the continuation queue.
	"BatchFunction": {Build: func(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.SQSHandler, error) {
		p, err := batchwire.Batch(ctx, getenv, batchwire.Options{AWSConfig: opts.AWSConfig})
		if err != nil {
			return nil, err
		}
		return p.HandleSQS, nil
	}},
}

// ScheduledFunctions run at their template rate.
var ScheduledFunctions = map[string]ScheduledFunction{
	"ReconcilerFunction": {Build: wire.Reconciler},
}
