// Package callbackswire builds CallbacksFunction: provider and 3-D Secure
// callbacks, and the Stripe and Adyen webhooks of a production stage.
package callbackswire

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/payreq/payreq/internal/callbacks"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/lambdahttp"
	"github.com/payreq/payreq/internal/provider/adyen"
	"github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// CallbacksLambda is CallbacksFunction's Lambda handler.
func CallbacksLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.HTTPLambda, error) {
	return lambdahttp.Lambda(Callbacks(ctx, getenv, opts))
}

// Callbacks wires CallbacksFunction's router.
func Callbacks(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ http.Handler, err error) {
	defer wire.Annotate(&err, "callbacks")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	svc, err := paywire.Service(b, getenv, "callbacks")
	if err != nil {
		return nil, err
	}
	key, err := sig.DeriveKey(b.Cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	stripeHook, err := stripeWebhook(b, getenv)
	if err != nil {
		return nil, err
	}
	if own, ok := svc.Accounts.(*paywire.OwnAccounts); ok {
		// Merchants' own Stripe accounts, each on its own address.
		if stripeHook == nil {
			stripeHook = &callbacks.StripeWebhook{Events: b.Store}
		}
		stripeHook.Accounts = accountHooks{own}
	}
	deps := callbacks.Deps{
		Service: svc,
		Key:     key,
		Log:     b.Logger("callbacks"),
		Stripe:  stripeHook,
	}
	if hook, ok, err := paywire.AdyenWebhook(b, getenv); err != nil {
		return nil, err
	} else if ok {
		deps.Adyen = &callbacks.AdyenWebhook{Reader: hook, Events: b.Store,
			IsSignatureError: func(err error) bool { return errors.Is(err, adyen.ErrSignature) }}
	}
	return callbacks.New(deps), nil
}

// stripeWebhook is the Stripe hook, nil in the sandbox or without webhook
// secrets.
func stripeWebhook(b *wire.Base, getenv config.Getenv) (*callbacks.StripeWebhook, error) {
	if b.Cfg.Sandbox() {
		return nil, nil
	}
	s, ok, err := paywire.StripeConfig(b, getenv)
	if err != nil || !ok || len(s.WebhookSecrets) == 0 {
		return nil, err
	}
	return &callbacks.StripeWebhook{Reader: stripe.Webhook{Secrets: s.WebhookSecrets}, Events: b.Store}, nil
}

// accountHooks reads a merchant's own Stripe account's events with that
// account's signing secret, opened in memory (paywire.OwnAccounts).
type accountHooks struct{ own *paywire.OwnAccounts }

func (a accountHooks) StripeAccountReader(ctx context.Context, merchantID, name string) (callbacks.EventReader, error) {
	secret, err := a.own.StripeWebhookSecret(ctx, merchantID, name)
	if err != nil {
		return nil, err
	}
	return stripe.Webhook{Secrets: []string{secret}}, nil
}
