package paywire

import (
	"context"
	"fmt"
	"time"

	"github.com/payreq/payreq/internal/acquireraccount"
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
