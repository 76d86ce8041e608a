package stripe

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/provider"
)

// TestMinorUnitsAreStripes checks the conversion against the examples of
// Stripe's "Supported currencies" page (docs/stripe.md), where Stripe's
// minor units differ from ISO 4217's.
func TestMinorUnitsAreStripes(t *testing.T) {
	for _, tc := range []struct {
		amount, unit string
		want         int64
		cur          string
		code         codes.Code // "" when accepted
	}{
		{"10.50", "EUR", 1050, "eur", ""},
		{"1000", "JPY", 1000, "jpy", ""},
		// MGA: ISO 4217 gives 2 decimals, Stripe none (5,000 MGA is 5000,
		// never 500000), and Stripe cannot take fractions of it.
		{"5000", "MGA", 5000, "mga", ""},
		{"5000.50", "MGA", 0, "", codes.InvalidAmount},
		{"25000", "UGX", 25000, "ugx", ""},
		// ISK: ISO 4217 gives none, Stripe 2, in whole krónur (1,200 ISK is
		// 120000, never 1200).
		{"1200", "ISK", 120000, "isk", ""},
		// HUF and TWD take two decimals for charges.
		{"1500.25", "HUF", 150025, "huf", ""},
		{"99.99", "TWD", 9999, "twd", ""},
		// Three decimals, the last digit 0: 1.235 KWD is refused, not rounded.
		{"1.23", "KWD", 1230, "kwd", ""},
		{"1.230", "KWD", 1230, "kwd", ""},
		{"1.235", "KWD", 0, "", codes.InvalidAmount},
		{"2.001", "BHD", 0, "", codes.InvalidAmount},
		{"10.505", "EUR", 0, "", codes.InvalidAmount},
		// Eight digits at most (IDR twelve).
		{"999999.99", "USD", 99999999, "usd", ""},
		{"1000000", "USD", 0, "", codes.InvalidAmount},
		{"9999999999.99", "IDR", 999999999999, "idr", ""},
		// Currencies Stripe does not charge.
		{"1", "BTC", 0, "", codes.CurrencyNotAllowed},
		{"1", "VES", 0, "", codes.CurrencyNotAllowed},
		{"1", "XXX", 0, "", codes.CurrencyNotAllowed},
	} {
		got, cur, err := MinorUnits(decimal.RequireFromString(tc.amount), tc.unit)
		var ae *provider.AmountError
		switch {
		case tc.code == "" && (err != nil || got != tc.want || cur != tc.cur):
			t.Errorf("%s %s: %d %q %v, want %d %q", tc.amount, tc.unit, got, cur, err, tc.want, tc.cur)
		case tc.code != "" && (!errors.As(err, &ae) || ae.Code != tc.code || got != 0):
			t.Errorf("%s %s: %d %v, want refusal %s", tc.amount, tc.unit, got, err, tc.code)
		case tc.code != "" && !errors.Is(err, provider.ErrInvalidRequest):
			t.Errorf("%s %s: an amount refusal must also be ErrInvalidRequest", tc.amount, tc.unit)
		}
		if tc.code == "" {
			back, unit, ok := FromMinorUnits(got, cur)
			if !ok || !back.Equal(decimal.RequireFromString(tc.amount)) || unit != tc.unit {
				t.Errorf("%s %s: back from %d %s = %s %s %v", tc.amount, tc.unit, got, cur, back, unit, ok)
			}
		}
	}
}

// TestEveryAcceptedCurrencyHasAStripeEntry fails when the service starts
// accepting a currency the Stripe table has not decided (charged with
// Stripe's rules, or refused with 020).
func TestEveryAcceptedCurrencyHasAStripeEntry(t *testing.T) {
	for _, code := range currency.Codes() {
		if !stripeDecided(code) {
			t.Errorf("currency %s is accepted by the service but has no decided Stripe entry (internal/provider/stripe/currency.go)", code)
		}
		if stripeRefused[code] && stripeCurrencies[code] != (provider.MinorUnit{}) {
			t.Errorf("currency %s is both charged and refused", code)
		}
	}
	// The table lists no currency the service does not accept, so a typo
	// cannot hide a missing entry.
	for code := range stripeCurrencies {
		if _, ok := currency.Lookup(code); !ok {
			t.Errorf("Stripe table lists %s, which the service does not accept", code)
		}
	}
	for code := range stripeRefused {
		if _, ok := currency.Lookup(code); !ok {
			t.Errorf("Stripe refusal list names %s, which the service does not accept", code)
		}
	}
}
