package checkout

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/merchant"
)

// The wallet buttons' configuration by stage: Google Pay's TEST environment
// in the sandbox, the `stripe` gateway with the publishable key in
// production, and no wallet tab in production without a key.
func TestWalletConfigByStage(t *testing.T) {
	sandbox := &merchant.Merchant{ID: "m_sb", Name: "Sandbox Shop", Sandbox: true}
	live := &merchant.Merchant{ID: "m_live", Name: "Live Shop"}
	all := []string{"card", "wallet", "upi", "qr"}

	h := &handler{Deps{}}
	w := h.wallets(sandbox)
	if w == nil || w.GooglePay.Environment != "TEST" || !w.ApplePay ||
		!reflect.DeepEqual(w.GooglePay.Tokenization, map[string]string{"gateway": "example", "gatewayMerchantId": "m_sb"}) {
		t.Errorf("sandbox wallets = %+v", w)
	}
	if got := h.served(slices.Clone(all), sandbox, "EUR"); !slices.Equal(got, all) {
		t.Errorf("sandbox methods = %q", got)
	}
	if w := h.wallets(live); w != nil {
		t.Errorf("production without a publishable key: wallets = %+v, want none", w)
	}
	if got := h.served(slices.Clone(all), live, "EUR"); slices.Contains(got, "wallet") {
		t.Errorf("production without a publishable key offers %q, want no wallet tab", got)
	}

	h = &handler{Deps{StripePublishableKey: "pk_test_123"}}
	w = h.wallets(live)
	want := map[string]string{"gateway": "stripe", "stripe:version": stripeAPIVersion, "stripe:publishableKey": "pk_test_123"}
	if w == nil || w.GooglePay.Environment != "PRODUCTION" || w.GooglePay.MerchantName != "Live Shop" || !maps.Equal(w.GooglePay.Tokenization, want) {
		t.Errorf("production wallets = %+v", w)
	}
	if got := h.served(slices.Clone(all), live, "EUR"); !slices.Contains(got, "wallet") {
		t.Errorf("production with a publishable key offers %q, want the wallet tab", got)
	}
}

// The page's CSP admits exactly the wallet providers' origins it needs,
// each in the directive that needs it, and no other foreign origin.
func TestPageCSPAdmitsOnlyTheWalletOrigins(t *testing.T) {
	want := map[string][]string{
		"script-src":  {"https://pay.google.com"},
		"connect-src": {"https://pay.google.com", "https://google.com"},
		"frame-src":   {"https://pay.google.com"},
		"img-src":     {"https://www.gstatic.com"},
	}
	got := map[string][]string{}
	for _, d := range strings.Split(pageCSP+"'self'", ";") {
		f := strings.Fields(d)
		if len(f) == 0 {
			continue
		}
		for _, src := range f[1:] {
			if strings.Contains(src, "://") || strings.Contains(src, "*") {
				got[f[0]] = append(got[f[0]], src)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("foreign origins by directive = %v, want %v", got, want)
	}
}
