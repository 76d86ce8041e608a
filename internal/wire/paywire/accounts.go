package paywire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/dynamo"
	adyenprov "github.com/payreq/payreq/internal/provider/adyen"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
)

// AccountAPIs says where a merchant's own accounts are reached: empty is
// the acquirers' own addresses; the local stack and the tests point them
// at Stripe's mock server and at Prism serving Adyen's description.
type AccountAPIs struct {
	StripeAPIBase string
	AdyenBaseURL  string
	Timeout       time.Duration // per call of a check; default 10 s
	// LocalOnly refuses to check a kind whose address is empty instead of
	// calling the acquirer's real API: a local stack never calls out.
	LocalOnly bool
}

// Environment of the dashboard's checks (template.yaml; local stack only).
const (
	envAccountStripeAPIBase = "ACCOUNT_STRIPE_API_BASE"
	envAccountAdyenAPIBase  = "ACCOUNT_ADYEN_API_BASE"
)

// AccountAPIsFromEnv says where a function checks merchants' own accounts.
// On AWS (local false): the acquirers' own addresses. In a local stack:
// ACCOUNT_STRIPE_API_BASE and ACCOUNT_ADYEN_API_BASE, else the addresses of
// the stack's own connectors (STRIPE_API_BASE: stripe-mock; ADYEN_API_BASE:
// Prism), else none, and such a check is refused (LocalOnly).
func AccountAPIsFromEnv(getenv func(string) string, local bool) AccountAPIs {
	if !local {
		return AccountAPIs{}
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	return AccountAPIs{StripeAPIBase: first(envAccountStripeAPIBase, "STRIPE_API_BASE"),
		AdyenBaseURL: first(envAccountAdyenAPIBase, "ADYEN_API_BASE"), LocalOnly: true}
}

// AccountService is the service of merchants' own accounts over the
// stack's store and sealer, checking them through apis (payctl and the
// dashboard build it alike).
func AccountService(st *dynamo.Store, sealer acquireraccount.Sealer, apis AccountAPIs) *acquireraccount.Service {
	return &acquireraccount.Service{Store: st, Sealer: sealer, Checker: apis, Mode: merchantMode{st}}
}

// merchantMode reads whether a merchant is a sandbox one.
type merchantMode struct{ store *dynamo.Store }

func (m merchantMode) Sandbox(ctx context.Context, merchantID string) (bool, error) {
	mer, err := m.store.Merchant(ctx, merchantID)
	if err != nil {
		return false, err
	}
	return mer.Sandbox, nil
}

// adyenLiveURL is Adyen's live Checkout endpoint of a company's live URL
// prefix ("Live endpoints" of Adyen's development resources).
func adyenLiveURL(prefix string) string {
	return "https://" + prefix + "-checkout-live.adyenpayments.com/checkout/v71"
}

// verifier is a connector that can make the harmless check call.
type verifier interface{ Verify(context.Context) error }

// accountVerifier builds the connector of an account's kind from its
// fields, in plain text.
func (a AccountAPIs) accountVerifier(kind acquireraccount.Kind, v map[string]string) (verifier, error) {
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	switch {
	case a.LocalOnly && kind == acquireraccount.Stripe && a.StripeAPIBase == "":
		return nil, errors.New("this local stack has no Stripe test double to check the account against (paydev sets LocalAccountStripeApiBase to a stripe-mock; docs/acquirers.md)")
	case a.LocalOnly && kind == acquireraccount.Adyen && a.AdyenBaseURL == "":
		return nil, errors.New("this local stack has no Adyen test double to check the account against (set LocalAccountAdyenApiBase to Prism serving Adyen's description; docs/acquirers.md)")
	}
	switch kind {
	case acquireraccount.Stripe:
		return stripeprov.New(stripeprov.Options{SecretKey: v[acquireraccount.StripeSecretKey], APIBase: a.StripeAPIBase, Timeout: timeout})
	case acquireraccount.Adyen:
		base := a.AdyenBaseURL
		if base == "" {
			base = adyenprov.TestBaseURL
			if v[acquireraccount.AdyenEnvironment] == "live" {
				base = adyenLiveURL(v[acquireraccount.AdyenLivePrefix])
			}
		}
		return adyenprov.New(adyenprov.Options{APIKey: v[acquireraccount.AdyenAPIKey], MerchantAccount: v[acquireraccount.AdyenMerchantAccount],
			BaseURL: base, Timeout: timeout, Retries: -1})
	}
	return nil, fmt.Errorf("no connector of kind %q", kind)
}

// Check implements acquireraccount.Checker: the acquirer's harmless call with
// the account's credentials (Stripe: read the balance; Adyen: list the
// payment methods). It moves no money.
func (a AccountAPIs) Check(ctx context.Context, kind acquireraccount.Kind, values map[string]string) error {
	p, err := a.accountVerifier(kind, values)
	if err != nil {
		return err
	}
	return p.Verify(ctx)
}

var _ acquireraccount.Checker = AccountAPIs{}
