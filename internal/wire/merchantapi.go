package wire

import (
	"context"
	"fmt"
	"net/http"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/paylink"
	"github.com/payreq/payreq/internal/paymentsapi"
)

// MerchantAPI wires MerchantApiFunction.
func MerchantAPI(ctx context.Context, getenv config.Getenv, opts Options) (http.Handler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire merchant API: %w", err)
	}
	tokens, err := checkouttoken.New(b.cfg.SealKey)
	if err != nil {
		return nil, fmt.Errorf("wire merchant API: %w", err)
	}
	links, err := paylink.New(b.cfg.SealKey)
	if err != nil {
		return nil, fmt.Errorf("wire merchant API: %w", err)
	}
	svc, err := b.paymentService(getenv, "merchantapi")
	if err != nil {
		return nil, fmt.Errorf("wire merchant API: %w", err)
	}
	auth := apikey.New(b.store, isNotFound)
	guard, err := b.merchantGuard(getenv, auth)
	if err != nil {
		return nil, fmt.Errorf("wire merchant API: %w", err)
	}
	return merchantapi.New(merchantapi.Deps{
		Store:         b.store,
		Tokens:        tokens,
		Links:         links,
		Auth:          auth,
		Guard:         guard,
		CheckAmount:   svc.CheckAmount,
		Transactions:  paymentsapi.TransactionLookup(svc, b.cfg.PublicBaseURL),
		Log:           b.cfg.NewLogger().With("function", "merchantapi"),
		PublicBaseURL: b.cfg.PublicBaseURL,
		AllowHTTPURLs: b.cfg.Local,
	}), nil
}
