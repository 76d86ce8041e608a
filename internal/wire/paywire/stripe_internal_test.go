package paywire

import (
	"testing"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/wire"
)

// The hosted page's wallet buttons get the production stage's publishable
// key: from STRIPE_PUBLISHABLE_KEY on a local stack, never in the sandbox,
// and never from the environment on AWS (there it is the secret's
// publishableKey).
func TestStripePublishableKey(t *testing.T) {
	env := map[string]string{envStripeSecretKey: "sk_test_local", envStripePublishable: "pk_test_local"}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"local production", config.Config{Stage: "production", Local: true}, "pk_test_local"},
		{"local sandbox", config.Config{Stage: "sandbox", Local: true}, ""},
		{"production on AWS without a secret ARN", config.Config{Stage: "production"}, ""},
	} {
		b := &wire.Base{Cfg: c.cfg}
		got, err := StripePublishableKey(b, getenv)
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
