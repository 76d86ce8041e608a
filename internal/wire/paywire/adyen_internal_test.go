package paywire

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider/adyen"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/wire"
)

// A production stage holds every connector it is configured for, and new
// attempts no routing rule names go to its default: Stripe when only Stripe
// is configured (or both are and none is named), Adyen when only Adyen is
// or PAYMENT_CONNECTOR=adyen; a named connector that is not
// configured, an unknown name, a live environment without its prefix and an
// HMAC key that is not hex stop the function at start-up instead of charging
// elsewhere. The local-only variables are ignored outside the local stack.
func TestProductionConnectorSelection(t *testing.T) {
	stripeEnv := map[string]string{envStripeSecretKey: "sk_test_local"}
	adyenEnv := map[string]string{envAdyenAPIKey: "AQE_local", envAdyenHMACKeys: "44782DEF", envAdyenMerchantAccount: "PayreqECOM"}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	local := config.Config{Stage: "production", Local: true, PublicBaseURL: "http://127.0.0.1:8080"}
	for _, c := range []struct {
		name string
		cfg  config.Config
		env  map[string]string
		want string // the default: "stripe", "adyen", "none", or "error: <part of it>"
		both bool   // both connectors are in the set
	}{
		{"nothing configured", local, nil, "none", false},
		{"Stripe only", local, stripeEnv, "stripe", false},
		{"Adyen only", local, adyenEnv, "adyen", false},
		{"both, none named", local, merge(stripeEnv, adyenEnv), "stripe", true},
		{"both, adyen named", local, merge(stripeEnv, adyenEnv, map[string]string{envPaymentConnector: "adyen"}), "adyen", true},
		{"adyen named, not configured", local, merge(stripeEnv, map[string]string{envPaymentConnector: "adyen"}), "error: Adyen is not configured", false},
		{"stripe named, not configured", local, merge(adyenEnv, map[string]string{envPaymentConnector: "stripe"}), "error: Stripe is not configured", false},
		{"unknown connector", local, map[string]string{envPaymentConnector: "paypal"}, "error: must be stripe or adyen", false},
		{"no merchant account", local, map[string]string{envAdyenAPIKey: "AQE_local"}, "error: ADYEN_MERCHANT_ACCOUNT", false},
		{"HMAC key not hex", local, merge(adyenEnv, map[string]string{envAdyenHMACKeys: "not-hex"}), "error: not hex", false},
		{"live without prefix", local, merge(adyenEnv, map[string]string{envAdyenAPIBase: "", envAdyenEnvironment: "live"}), "error: ADYEN_LIVE_PREFIX", false},
		{"unknown environment", local, merge(adyenEnv, map[string]string{envAdyenEnvironment: "staging"}), "error: test or live", false},
		{"local variables on AWS", config.Config{Stage: "production", PublicBaseURL: "https://pay.example"}, merge(stripeEnv, adyenEnv), "none", false},
		{"Adyen without a public base URL", config.Config{Stage: "production", Local: true}, adyenEnv, "error: PUBLIC_BASE_URL", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(k string) string { return c.env[k] }
			var svc *paycore.Service
			set, err := connectors(&wire.Base{Cfg: c.cfg}, getenv, [5]time.Duration{}, &svc)
			p, _ := set.Get(set.Default())
			if err == nil && set.Has(connector.Stripe) && set.Has(connector.Adyen) != c.both {
				t.Fatalf("both connectors in the set: %v, want %v", !c.both, c.both)
			}
			got := "none"
			switch p.(type) {
			case *stripeprov.Provider:
				got = "stripe"
			case *adyen.Provider:
				got = "adyen"
			}
			if err != nil {
				got = "error: " + err.Error()
			}
			if want, ok := strings.CutPrefix(c.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %s, want an error saying %q", got, want)
				}
				return
			}
			if got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// The live environment's base URL is built from the account's prefix, as
// Adyen's live endpoints are; the test platform is the default.
func TestAdyenBaseURL(t *testing.T) {
	b := &wire.Base{Cfg: config.Config{Stage: "production", Local: true}}
	env := map[string]string{envAdyenAPIKey: "AQE_local", envAdyenMerchantAccount: "PayreqECOM"}
	for envName, want := range map[string]string{"": adyen.TestBaseURL, "test": adyen.TestBaseURL,
		"live": "https://1797a841fbb37ca7-AdyenDemo-checkout-live.adyenpayments.com/checkout/v71"} {
		env[envAdyenEnvironment], env[envAdyenLivePrefix] = envName, "1797a841fbb37ca7-AdyenDemo"
		s, ok, err := AdyenConfig(b, func(k string) string { return env[k] })
		if err != nil || !ok || s.BaseURL != want {
			t.Errorf("environment %q: %q, %v, %v; want %q", envName, s.BaseURL, ok, err, want)
		}
		if strings.Contains(fmt.Sprint(s), "AQE_local") || strings.Contains(fmt.Sprintf("%+v %#v", s, s.Secret), "AQE_local") {
			t.Errorf("the settings print the API key: %+v", s)
		}
	}
}
