package paywire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/paycore"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/wire"
)

// Stripe connector configuration (docs/stripe.md). In AWS the key and the
// webhook secrets live in one Secrets Manager secret named by
// STRIPE_SECRET_ARN, read once per cold start, never in the function's
// environment. The local stack may pass them in the environment instead.
const (
	envStripeSecretARN      = "STRIPE_SECRET_ARN"
	envStripeSecretKey      = "STRIPE_SECRET_KEY"      // local only
	envStripeWebhookSecrets = "STRIPE_WEBHOOK_SECRETS" // local only, comma-separated
	envStripePublishable    = "STRIPE_PUBLISHABLE_KEY" // local only
	envStripeAPIBase        = "STRIPE_API_BASE"        // local only (stripe-mock)
	envStripeKeyPrefix      = "STRIPE_KEY_PREFIX"
)

// StripeSecret is the JSON of the Secrets Manager secret.
type StripeSecret struct {
	SecretKey      string   `json:"secretKey"`
	WebhookSecrets []string `json:"webhookSecrets"`
	// PublishableKey (pk_…, optional) is what the hosted page's Google Pay
	// button tokenizes for; without it production shows no wallet buttons.
	PublishableKey string `json:"publishableKey"`
	apiBase        string
}

var stripeSecrets sync.Map // ARN → StripeSecret, for the life of the instance

// StripeConfig returns the Stripe configuration, or ok=false when the stage
// has none (then production keeps noAcquirer).
func StripeConfig(b *wire.Base, getenv config.Getenv) (StripeSecret, bool, error) {
	local := func(name string) string {
		if !b.Cfg.Local {
			return ""
		}
		return getenv(name)
	}
	if key := local(envStripeSecretKey); key != "" {
		s := StripeSecret{SecretKey: key, apiBase: local(envStripeAPIBase), PublishableKey: local(envStripePublishable)}
		for _, w := range strings.Split(local(envStripeWebhookSecrets), ",") {
			if w = strings.TrimSpace(w); w != "" {
				s.WebhookSecrets = append(s.WebhookSecrets, w)
			}
		}
		return s, true, nil
	}
	arn := getenv(envStripeSecretARN)
	if arn == "" {
		return StripeSecret{}, false, nil
	}
	if v, ok := stripeSecrets.Load(arn); ok {
		return v.(StripeSecret), true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := secretsmanager.NewFromConfig(b.AWS).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return StripeSecret{}, false, fmt.Errorf("%s: read secret: %w", envStripeSecretARN, err)
	}
	var s StripeSecret
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &s); err != nil || s.SecretKey == "" {
		return StripeSecret{}, false, errors.New(envStripeSecretARN + `: the secret must be JSON {"secretKey": "sk_…", "webhookSecrets": ["whsec_…"], "publishableKey": "pk_…" (optional)}`)
	}
	stripeSecrets.Store(arn, s)
	return s, true, nil
}

// stripeProvider builds the connector of a production stage. svc is filled
// in once the payment service exists: Stripe's return_url is the service's
// signed 3-D Secure page, which needs an absolute PUBLIC_BASE_URL (without
// one, cards that need 3-D Secure are declined 004).
func stripeProvider(b *wire.Base, getenv config.Getenv, s StripeSecret, svc **paycore.Service) (*stripeprov.Provider, error) {
	opts := stripeprov.Options{SecretKey: s.SecretKey, APIBase: s.apiBase, KeyPrefix: getenv(envStripeKeyPrefix)}
	if base := b.Cfg.PublicBaseURL; strings.HasPrefix(base, "https://") || b.Cfg.Local && base != "" {
		opts.ReturnURL = func(txID int64, returnTo string) string { return (*svc).ChallengeURL(base, txID, returnTo) }
	}
	return stripeprov.New(opts)
}

var _ paycore.ChallengeReader = (*stripeprov.Provider)(nil)

// StripePublishableKey is the production stage's publishable key for the
// hosted page's wallet buttons, "" in the sandbox or without one.
func StripePublishableKey(b *wire.Base, getenv config.Getenv) (string, error) {
	if b.Cfg.Sandbox() {
		return "", nil
	}
	s, ok, err := StripeConfig(b, getenv)
	if err != nil || !ok {
		return "", err
	}
	return s.PublishableKey, nil
}
