package paywire

import (
	"context"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/acquireraccount"
)

// On AWS the checks go to the acquirers' own addresses; a local stack
// takes the dashboard's own variables, else its connectors', and with
// neither refuses the check without calling anything.
func TestAccountAPIsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	all := map[string]string{"ACCOUNT_STRIPE_API_BASE": "http://127.0.0.1:1", "STRIPE_API_BASE": "http://127.0.0.1:2", "ADYEN_API_BASE": "http://127.0.0.1:3"}
	if got := AccountAPIsFromEnv(env(all), false); got != (AccountAPIs{}) {
		t.Errorf("on AWS: %+v, want the acquirers' own addresses", got)
	}
	if got := AccountAPIsFromEnv(env(all), true); got.StripeAPIBase != "http://127.0.0.1:1" || got.AdyenBaseURL != "http://127.0.0.1:3" || !got.LocalOnly {
		t.Errorf("local: %+v", got)
	}
	none := AccountAPIsFromEnv(env(nil), true)
	for _, kind := range []acquireraccount.Kind{acquireraccount.Stripe, acquireraccount.Adyen} {
		err := none.Check(context.Background(), kind, map[string]string{"secretKey": "sk_test_x", "apiKey": "k", "merchantAccount": "M"})
		if err == nil || !strings.Contains(err.Error(), "no "+map[acquireraccount.Kind]string{"stripe": "Stripe", "adyen": "Adyen"}[kind]+" test double") {
			t.Errorf("%s without a test double: %v", kind, err)
		}
	}
}
