package wire

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/callbacks/sig"
	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/sandboxworker"
)

// Checkout wires CheckoutFunction: the hosted page, its token-authenticated
// API, PayCheckout and payment links.
func Checkout(ctx context.Context, getenv config.Getenv, opts Options) (http.Handler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire checkout: %w", err)
	}
	svc, err := b.paymentService(getenv, "checkout")
	if err != nil {
		return nil, fmt.Errorf("wire checkout: %w", err)
	}
	tokens, err := checkouttoken.New(b.cfg.SealKey)
	if err != nil {
		return nil, fmt.Errorf("wire checkout: %w", err)
	}
	callbackKey, err := sig.DeriveKey(b.cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("wire checkout: %w", err)
	}
	return checkout.New(checkout.Deps{
		Store: b.store, Payments: svc, Limiter: b.store, Tokens: tokens,
		Challenges: acsPoster{key: callbackKey, client: &http.Client{Timeout: 10 * time.Second}},
		Log:        b.cfg.NewLogger().With("function", "checkout"), PublicBaseURL: b.cfg.PublicBaseURL, Sandbox: b.cfg.Sandbox(),
	}), nil
}

// acsPoster answers a sandbox 3-D Secure challenge the way an ACS does:
// a signed result on the service's /callbacks/3ds endpoint.
type acsPoster struct {
	key    []byte
	client *http.Client
}

func (a acsPoster) CompleteChallenge(ctx context.Context, baseURL string, requestID, txID int64, approve bool) error {
	result := "fail"
	if approve {
		result = "approve"
	}
	now := time.Now()
	return sandboxworker.Post(ctx, a.client, baseURL, sandboxworker.ThreeDSPath, a.key, sandboxworker.Callback{
		EventID: sandboxworker.EventIDFor("3ds", txID), TransactionID: txID, PaymentRequestID: requestID,
		Result: result, Timestamp: now.UTC().Format(time.RFC3339),
	}, now)
}
