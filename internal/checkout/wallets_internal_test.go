package checkout

import (
	"context"
	"maps"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider/stripe"
)

// The wallet buttons' configuration by stage: Google Pay's TEST environment
// and no Apple Pay in the sandbox; in production, Apple Pay through Stripe.js
// with the publishable key and Google Pay's `stripe` gateway only with
// Google's merchant id; no wallet tab in production without a key.
func TestWalletConfigByStage(t *testing.T) {
	sandbox := &merchant.Merchant{ID: "m_sb", Name: "Sandbox Shop", Sandbox: true}
	live := &merchant.Merchant{ID: "m_live", Name: "Live Shop"}
	all := []string{"card", "wallet", "upi", "qr"}

	h := &handler{Deps{}}
	w := h.wallets(sandbox)
	if w == nil || w.GooglePay == nil || w.GooglePay.Environment != "TEST" || w.ApplePay != nil ||
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

	// A key but no Google merchant id: Apple Pay only (Google requires the id in PRODUCTION).
	h = &handler{Deps{StripePublishableKey: "pk_test_123", StripeMinorUnits: stripe.MinorUnits}}
	w = h.wallets(live)
	if w == nil || w.GooglePay != nil || w.ApplePay == nil ||
		*w.ApplePay != (ApplePay{PublishableKey: "pk_test_123", Country: "US", Label: "Live Shop"}) {
		t.Errorf("production wallets without a Google merchant id = %+v", w)
	}
	if got := h.served(slices.Clone(all), live, "EUR"); !slices.Contains(got, "wallet") {
		t.Errorf("production with a publishable key offers %q, want the wallet tab", got)
	}

	h = &handler{Deps{StripePublishableKey: "pk_test_123", StripeMinorUnits: stripe.MinorUnits, StripeAccountCountry: "DE", GooglePayMerchantID: "BCR2DN4T0000"}}
	w = h.wallets(live)
	want := map[string]string{"gateway": "stripe", "stripe:version": stripeAPIVersion, "stripe:publishableKey": "pk_test_123"}
	if w == nil || w.GooglePay == nil || w.GooglePay.Environment != "PRODUCTION" || w.GooglePay.MerchantName != "Live Shop" ||
		w.GooglePay.MerchantID != "BCR2DN4T0000" || !maps.Equal(w.GooglePay.Tokenization, want) || w.ApplePay == nil || w.ApplePay.Country != "DE" {
		t.Errorf("production wallets = %+v", w)
	}
}

// Apple Pay's total is the request's amount in Stripe's minor units (not
// ISO's: 5,000 MGA is 5000, 1.230 KWD is 1230), labelled with the request's
// recipient; an amount Stripe cannot take gets no Apple Pay button.
func TestApplePayTotalInStripesMinorUnits(t *testing.T) {
	live := &merchant.Merchant{ID: "m_live", Name: "Live Shop"}
	h := &handler{Deps{StripePublishableKey: "pk_test_123", StripeMinorUnits: stripe.MinorUnits, GooglePayMerchantID: "BCR2DN4T0000"}}
	for _, c := range []struct {
		amount, unit string
		minor        int64
		currency     string
	}{{"12.50", "EUR", 1250, "eur"}, {"5000", "MGA", 5000, "mga"}, {"1.23", "KWD", 1230, "kwd"}, {"1200", "ISK", 120000, "isk"}} {
		req := &payment.Request{Amount: decimal.RequireFromString(c.amount), Unit: c.unit, RecipientName: "Acme Books"}
		w := h.requestWallets(live, req)
		if w == nil || w.ApplePay == nil || w.ApplePay.Amount != c.minor || w.ApplePay.Currency != c.currency || w.ApplePay.Label != "Acme Books" {
			t.Errorf("%s %s: Apple Pay %+v, want %d %s", c.amount, c.unit, w.ApplePay, c.minor, c.currency)
		}
	}
	w := h.requestWallets(live, &payment.Request{Amount: decimal.RequireFromString("1.235"), Unit: "KWD"})
	if w == nil || w.ApplePay != nil || w.GooglePay == nil {
		t.Errorf("1.235 KWD: wallets %+v, want Google Pay only", w)
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
	for _, d := range strings.Split(PagePolicy(false, "'self'"), ";") {
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

// A page that offers Apple Pay through Stripe.js admits Stripe.js's origins
// as Stripe's security guide lists them, in their directives, and no more.
func TestPagePolicyWithStripeJS(t *testing.T) {
	want := map[string][]string{
		"script-src":  {"https://pay.google.com", "https://js.stripe.com", "https://*.js.stripe.com"},
		"connect-src": {"https://pay.google.com", "https://google.com", "https://api.stripe.com"},
		"frame-src":   {"https://pay.google.com", "https://js.stripe.com", "https://*.js.stripe.com", "https://hooks.stripe.com"},
		"img-src":     {"https://www.gstatic.com"},
	}
	got := map[string][]string{}
	for _, d := range strings.Split(PagePolicy(true, "'self'"), ";") {
		f := strings.Fields(d)
		for _, src := range f[min(1, len(f)):] {
			if strings.Contains(src, "://") || strings.Contains(src, "*") {
				got[f[0]] = append(got[f[0]], src)
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("foreign origins by directive = %v, want %v", got, want)
	}
	if !strings.HasSuffix(PagePolicy(true, "'self' https://shop.example"), "frame-ancestors 'self' https://shop.example") {
		t.Errorf("policy %q does not end in its frame-ancestors", PagePolicy(true, "'self' https://shop.example"))
	}
}

type pageStore struct {
	req *payment.Request
	m   *merchant.Merchant
}

func (s pageStore) PaymentRequest(context.Context, int64) (*payment.Request, error) {
	return s.req, nil
}
func (s pageStore) Merchant(context.Context, string) (*merchant.Merchant, error) { return s.m, nil }

// The hosted page's policy admits Stripe.js only where the page offers Apple
// Pay through it: a production merchant's page with a publishable key, not
// the sandbox's, not production's without a key, not the 3-D Secure page.
func TestHostedPagePolicyAdmitsStripeJSOnlyWithApplePay(t *testing.T) {
	tokens, err := checkouttoken.New("0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(key string, m *merchant.Merchant, file string) string {
		t.Helper()
		h := &handler{Deps{Tokens: tokens, StripePublishableKey: key, StripeMinorUnits: stripe.MinorUnits,
			Store: pageStore{req: &payment.Request{ID: 42, MerchantID: m.ID, Amount: decimal.RequireFromString("10"), Unit: "EUR"}, m: m}}}
		tok, _ := tokens.Mint(42, m.ID)
		rec := httptest.NewRecorder()
		if err := h.page(file)(rec, httptest.NewRequest("GET", "/checkout?requestId=42&token="+url.QueryEscape(tok), nil)); err != nil {
			t.Fatal(err)
		}
		return rec.Header().Get("Content-Security-Policy")
	}
	live := &merchant.Merchant{ID: "m_live", Name: "Live Shop", AllowedOrigins: []string{"https://shop.example"}}
	sandbox := &merchant.Merchant{ID: "m_sb", Name: "Sandbox Shop", Sandbox: true}
	for _, c := range []struct {
		name, key string
		m         *merchant.Merchant
		file      string
		stripe    bool
	}{
		{"production with a publishable key", "pk_test_123", live, "checkout/index.html", true},
		{"production without a key", "", live, "checkout/index.html", false},
		{"sandbox", "pk_test_123", sandbox, "checkout/index.html", false},
		{"3-D Secure page", "pk_test_123", live, "checkout/acs.html", false},
	} {
		got := serve(c.key, c.m, c.file)
		if strings.Contains(got, "js.stripe.com") != c.stripe {
			t.Errorf("%s: policy %q, want Stripe.js admitted: %v", c.name, got, c.stripe)
		}
		if c.m == live && !strings.HasSuffix(got, "frame-ancestors 'self' https://shop.example") {
			t.Errorf("%s: policy %q, want the merchant's frame-ancestors", c.name, got)
		}
	}
}
