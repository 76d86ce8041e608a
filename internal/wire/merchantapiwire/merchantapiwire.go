// Package merchantapiwire builds MerchantApiFunction: the merchant API
// (payment requests, links, lookups). It takes the payments core for the
// acquirer's amount limits and transaction lookups.
package merchantapiwire

import (
	"context"
	"net/http"

	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/lambdahttp"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/paylink"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/guardwire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// MerchantAPILambda is MerchantApiFunction's Lambda handler.
func MerchantAPILambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.HTTPLambda, error) {
	return lambdahttp.Lambda(MerchantAPI(ctx, getenv, opts))
}

// MerchantAPI wires MerchantApiFunction's router.
func MerchantAPI(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ http.Handler, err error) {
	defer wire.Annotate(&err, "merchant API")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	tokens, err := checkouttoken.New(b.Cfg.SealKey)
	if err != nil {
		return nil, err
	}
	links, err := paylink.New(b.Cfg.SealKey)
	if err != nil {
		return nil, err
	}
	svc, err := paywire.Service(b, getenv, "merchantapi")
	if err != nil {
		return nil, err
	}
	auth := guardwire.Authenticator(b)
	guard, err := guardwire.Guard(b, getenv, auth)
	if err != nil {
		return nil, err
	}
	return merchantapi.New(merchantapi.Deps{
		Store:         b.Store,
		Tokens:        tokens,
		Links:         links,
		Auth:          auth,
		Guard:         guard,
		CheckAmount:   svc.CheckAmount,
		Transactions:  paymentsapi.TransactionLookup(svc, b.Cfg.PublicBaseURL),
		Log:           b.Logger("merchantapi"),
		PublicBaseURL: b.Cfg.PublicBaseURL,
		AllowHTTPURLs: b.Cfg.Local,
	}), nil
}
