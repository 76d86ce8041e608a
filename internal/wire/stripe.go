package wire

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

	"github.com/payreq/payreq/internal/callbacks"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/payments"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
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

// stripeSecret is the JSON of the Secrets Manager secret.
type stripeSecret struct {
	SecretKey      string   `json:"secretKey"`
	WebhookSecrets []string `json:"webhookSecrets"`
	// PublishableKey (pk_…, optional) is what the hosted page's Google Pay
	// button tokenizes for; without it production shows no wallet buttons.
	PublishableKey string `json:"publishableKey"`
	apiBase        string
}

var stripeSecrets sync.Map // ARN → stripeSecret, for the life of the instance

// stripeConfig returns the Stripe configuration, or ok=false when the stage
// has none (then production keeps noAcquirer).
func (b *base) stripeConfig(getenv config.Getenv) (stripeSecret, bool, error) {
	local := func(name string) string {
		if !b.cfg.Local {
			return ""
		}
		return getenv(name)
	}
	if key := local(envStripeSecretKey); key != "" {
		s := stripeSecret{SecretKey: key, apiBase: local(envStripeAPIBase), PublishableKey: local(envStripePublishable)}
		for _, w := range strings.Split(local(envStripeWebhookSecrets), ",") {
			if w = strings.TrimSpace(w); w != "" {
				s.WebhookSecrets = append(s.WebhookSecrets, w)
			}
		}
		return s, true, nil
	}
	arn := getenv(envStripeSecretARN)
	if arn == "" {
		return stripeSecret{}, false, nil
	}
	if v, ok := stripeSecrets.Load(arn); ok {
		return v.(stripeSecret), true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := secretsmanager.NewFromConfig(b.aws).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return stripeSecret{}, false, fmt.Errorf("%s: read secret: %w", envStripeSecretARN, err)
	}
	var s stripeSecret
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &s); err != nil || s.SecretKey == "" {
		return stripeSecret{}, false, errors.New(envStripeSecretARN + `: the secret must be JSON {"secretKey": "sk_…", "webhookSecrets": ["whsec_…"], "publishableKey": "pk_…" (optional)}`)
	}
	stripeSecrets.Store(arn, s)
	return s, true, nil
}

// stripeProvider builds the connector of a production stage. svc is filled
// in once the payment service exists: Stripe's return_url is the service's
// signed 3-D Secure page, which needs an absolute PUBLIC_BASE_URL (without
// one, cards that need 3-D Secure are declined 004).
func (b *base) stripeProvider(getenv config.Getenv, s stripeSecret, svc **payments.Service) (*stripeprov.Provider, error) {
	opts := stripeprov.Options{SecretKey: s.SecretKey, APIBase: s.apiBase, KeyPrefix: getenv(envStripeKeyPrefix)}
	if base := b.cfg.PublicBaseURL; strings.HasPrefix(base, "https://") || b.cfg.Local && base != "" {
		opts.ReturnURL = func(txID int64, returnTo string) string { return (*svc).ChallengeURL(base, txID, returnTo) }
	}
	return stripeprov.New(opts)
}

// stripeWebhook is the callbacks function's Stripe hook, nil without
// webhook secrets.
func (b *base) stripeWebhook(getenv config.Getenv) (*callbacks.StripeWebhook, error) {
	if b.cfg.Sandbox() {
		return nil, nil
	}
	s, ok, err := b.stripeConfig(getenv)
	if err != nil || !ok || len(s.WebhookSecrets) == 0 {
		return nil, err
	}
	return &callbacks.StripeWebhook{Secrets: s.WebhookSecrets, Events: b.store}, nil
}

var _ payments.ChallengeReader = (*stripeprov.Provider)(nil)

// stripePublishableKey is the production stage's publishable key for the
// hosted page's wallet buttons, "" in the sandbox or without one.
func (b *base) stripePublishableKey(getenv config.Getenv) (string, error) {
	if b.cfg.Sandbox() {
		return "", nil
	}
	s, ok, err := b.stripeConfig(getenv)
	if err != nil || !ok {
		return "", err
	}
	return s.PublishableKey, nil
}
