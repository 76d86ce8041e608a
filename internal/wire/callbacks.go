package wire

import (
	"context"
	"fmt"
	"net/http"

	"github.com/payreq/payreq/internal/callbacks"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/sig"
)

// Callbacks wires CallbacksFunction.
func Callbacks(ctx context.Context, getenv config.Getenv, opts Options) (http.Handler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire callbacks: %w", err)
	}
	svc, err := b.paymentService(getenv, "callbacks")
	if err != nil {
		return nil, fmt.Errorf("wire callbacks: %w", err)
	}
	key, err := sig.DeriveKey(b.cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("wire callbacks: SEAL_KEY: %w", err)
	}
	stripeHook, err := b.stripeWebhook(getenv)
	if err != nil {
		return nil, fmt.Errorf("wire callbacks: %w", err)
	}
	return callbacks.New(callbacks.Deps{
		Service: svc,
		Key:     key,
		Log:     b.cfg.NewLogger().With("function", "callbacks"),
		Stripe:  stripeHook,
	}), nil
}
