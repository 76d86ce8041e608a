package wire

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/lambdahttp"
)

// The Lambda entry points: each returns the exact value its
// functions/<name>/main.go passes to lambda.Start, adapter included. The
// local stack and the tests invoke these same values through
// lambda.NewHandler(h).Invoke with JSON event bytes, as the runtime does, so
// no caller wraps a handler in its own way.

// HTTPLambda is the handler of an HTTP API function (payload format 2.0).
type HTTPLambda = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// ScheduledLambda is the handler of an EventBridge schedule.
type ScheduledLambda = func(context.Context, events.EventBridgeEvent) error

// MerchantAPILambda is MerchantApiFunction's Lambda handler.
func MerchantAPILambda(ctx context.Context, getenv config.Getenv, opts Options) (HTTPLambda, error) {
	return httpLambda(MerchantAPI(ctx, getenv, opts))
}

// PaymentsLambda is PaymentsFunction's Lambda handler.
func PaymentsLambda(ctx context.Context, getenv config.Getenv, opts Options) (HTTPLambda, error) {
	return httpLambda(Payments(ctx, getenv, opts))
}

// CallbacksLambda is CallbacksFunction's Lambda handler.
func CallbacksLambda(ctx context.Context, getenv config.Getenv, opts Options) (HTTPLambda, error) {
	return httpLambda(Callbacks(ctx, getenv, opts))
}

// CheckoutLambda is CheckoutFunction's Lambda handler.
func CheckoutLambda(ctx context.Context, getenv config.Getenv, opts Options) (HTTPLambda, error) {
	return httpLambda(Checkout(ctx, getenv, opts))
}

// NotifierLambda is NotifierFunction's Lambda handler (SQS, partial batch responses).
func NotifierLambda(ctx context.Context, getenv config.Getenv, opts Options) (SQSHandler, error) {
	return Notifier(ctx, getenv, opts)
}

// SandboxLambda is SandboxFunction's Lambda handler (SQS, partial batch responses).
func SandboxLambda(ctx context.Context, getenv config.Getenv, opts Options) (SQSHandler, error) {
	return Sandbox(ctx, getenv, opts)
}

// ReconcilerLambda is ReconcilerFunction's Lambda handler (EventBridge schedule).
func ReconcilerLambda(ctx context.Context, getenv config.Getenv, opts Options) (ScheduledLambda, error) {
	run, err := Reconciler(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ events.EventBridgeEvent) error { return run(ctx) }, nil
}

// httpLambda wraps a function's router in lambdahttp, the api-proxy adapter
// that keeps header values intact (the plain adapter splits them at commas,
// which breaks signature headers and Idempotency-Keys containing a comma).
func httpLambda(h http.Handler, err error) (HTTPLambda, error) {
	if err != nil {
		return nil, err
	}
	return lambdahttp.NewV2(h).ProxyWithContext, nil
}
