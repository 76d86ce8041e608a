// Package paymentswire builds PaymentsFunction: the host-to-host payment
// operations and lookups.
package paymentswire

import (
	"context"
	"net/http"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/lambdahttp"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/guardwire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// PaymentsLambda is PaymentsFunction's Lambda handler.
func PaymentsLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.HTTPLambda, error) {
	return lambdahttp.Lambda(Payments(ctx, getenv, opts))
}

// Payments wires PaymentsFunction's router.
func Payments(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ http.Handler, err error) {
	defer wire.Annotate(&err, "payments")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	svc, err := paywire.Service(b, getenv, "payments")
	if err != nil {
		return nil, err
	}
	guard, err := guardwire.Guard(b, getenv, guardwire.Authenticator(b))
	if err != nil {
		return nil, err
	}
	return paymentsapi.NewHandler(paymentsapi.HandlerDeps{
		Service:       svc,
		Guard:         guard,
		Log:           b.Logger("payments"),
		PublicBaseURL: b.Cfg.PublicBaseURL,
		AllowHTTPURLs: b.Cfg.Local,
	}), nil
}
