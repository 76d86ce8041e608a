package stripe

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/provider"
)

// Stripe's own currency rules, from its "Supported currencies" page
// (docs.stripe.com/currencies: presentment currencies, zero-decimal
// currencies, three-decimal currencies, special cases) and its support
// note on ISK ("Deprecation of fractional ISK charges and refunds"). They
// are Stripe's, not ISO 4217's: MGA has 2 decimals in ISO 4217 and none in
// Stripe's API; ISK has none in ISO 4217 and 2 in Stripe's API. The table
// is docs/stripe.md; TestEveryAcceptedCurrencyHasAStripeEntry fails when
// the service accepts a currency this table has not decided.
//
// Every amount that reaches Stripe, and every amount Stripe reports back
// (webhooks, lookups, refunds), goes through this table.

const (
	// "The amount value supports up to eight digits" (Stripe, Supported
	// currencies: maximum charge amount); IDR up to twelve.
	maxEightDigits  = 99_999_999
	maxTwelveDigits = 999_999_999_999
)

var (
	// Stripe's two-decimal presentment currencies (the page's default).
	stripeTwoDecimal = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BWP BYN BZD " +
		"CAD CDF CHF CNY COP CRC CVE CZK DKK DOP DZD EGP ETB EUR FJD FKP GBP GEL GIP GMD GTQ GYD HKD HNL HTG " +
		"HUF IDR ILS INR JMD KES KGS KHR KYD KZT LAK LBP LKR LRD LSL MAD MDL MKD MMK MNT MOP MUR MVR MWK MXN " +
		"MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SEK SGD SHP SLE " +
		"SOS SRD SZL THB TJS TOP TRY TTD TWD TZS UAH USD UYU UZS WST XCD YER ZAR ZMW"
	// "Zero-decimal currencies": the amount is in whole units.
	stripeZeroDecimal = "BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF UGX VND VUV XAF XOF XPF"
	// "Three-decimal currencies": minor units of a thousandth, and "the
	// least-significant (last) digit [must] be 0".
	stripeThreeDecimal = "BHD JOD KWD OMR TND"
	// Currencies the service accepts that Stripe does not charge (not on its
	// presentment list, or only under another code): refused with 020 before
	// any call. Crypto units are never charged through Stripe either.
	stripeNotCharged = "BOV BTN CHE CHW CLF COU CUP ERN GHS IQD IRR KPW LYD MRU MXV SDG SSP STN SVC SYP " +
		"TMT USN UYI UYW VED VES XCG ZWG"
)

// stripeCurrencies is how Stripe's API represents amounts in each currency.
var stripeCurrencies = func() map[string]provider.MinorUnit {
	m := map[string]provider.MinorUnit{}
	add := func(codes string, c provider.MinorUnit) {
		for _, code := range strings.Fields(codes) {
			if _, dup := m[code]; dup {
				panic("stripe currency listed twice: " + code)
			}
			m[code] = c
		}
	}
	add(stripeTwoDecimal, provider.MinorUnit{Exponent: 2, Step: 1, Max: maxEightDigits})
	add(stripeZeroDecimal, provider.MinorUnit{Exponent: 0, Step: 1, Max: maxEightDigits})
	add(stripeThreeDecimal, provider.MinorUnit{Exponent: 3, Step: 10, Max: maxEightDigits})
	// Special cases. ISK: "effectively zero-decimal", still two decimals in
	// the API, amounts "evenly divisible by 100" (1 króna is 100). HUF and
	// TWD are zero-decimal for payouts only: charges take two decimals.
	// IDR: twelve digits.
	m["ISK"] = provider.MinorUnit{Exponent: 2, Step: 100, Max: maxEightDigits}
	m["IDR"] = provider.MinorUnit{Exponent: 2, Step: 1, Max: maxTwelveDigits}
	return m
}()

var stripeRefused = func() map[string]bool {
	m := map[string]bool{}
	for _, code := range strings.Fields(stripeNotCharged) {
		m[code] = true
	}
	return m
}()

// stripeDecided reports whether the table has decided code: Stripe charges
// it (with its rules) or the service refuses it for Stripe.
func stripeDecided(code string) bool {
	c, ok := currency.Lookup(code)
	_, charged := stripeCurrencies[code]
	return ok && c.Crypto || stripeRefused[code] || charged
}

// MinorUnits converts an amount to Stripe's integer amount and lower-case
// currency, with Stripe's rules. An amount Stripe cannot represent (more
// decimals than Stripe's unit, a three-decimal amount not ending in 0, a
// fractional ISK, more digits than Stripe takes) or a currency Stripe does
// not charge is a *provider.AmountError (026, 020): never rounded, never sent.
func MinorUnits(amount decimal.Decimal, unit string) (int64, string, error) {
	code := strings.ToUpper(unit)
	sc, ok := stripeCurrencies[code]
	if !ok {
		return 0, "", &provider.AmountError{Field: "unit", Code: codes.CurrencyNotAllowed,
			Detail: fmt.Sprintf("Payments in %s cannot be charged through the acquirer (Stripe does not charge this currency).", code)}
	}
	minor, err := sc.ToMinor(amount, code)
	if err != nil {
		return 0, "", err
	}
	return minor, strings.ToLower(code), nil
}

// FromMinorUnits converts an amount Stripe reports (an event's, a
// lookup's, a refund's) back to a decimal amount and upper-case unit; ok is
// false for a currency the table does not charge.
func FromMinorUnits(minor int64, cur string) (decimal.Decimal, string, bool) {
	code := strings.ToUpper(cur)
	sc, ok := stripeCurrencies[code]
	if !ok {
		return decimal.Decimal{}, "", false
	}
	return sc.FromMinor(minor), code, true
}

// CheckAmount refuses, before anything is written or sent, an amount or a
// currency Stripe cannot take (provider.AmountChecker).
func (p *Provider) CheckAmount(amount decimal.Decimal, unit string) error {
	_, _, err := MinorUnits(amount, unit)
	return err
}

var _ provider.AmountChecker = (*Provider)(nil)
