package adyen

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// Adyen's own minor units, from its "Currency codes and minor units" page
// (docs.adyen.com/development-resources/currency-codes). They are Adyen's,
// not ISO 4217's: the page marks CLP (2 decimals, ISO 0), CVE (0, ISO 2),
// IDR (0, ISO 2) and ISK (2, ISO 0) as differing from the standard and says
// its own table is leading. The 0- and 3-decimal lists are exactly those of
// Adyen's PHP library (src/Adyen/Util/Currency.php), which takes every other
// currency as 2 decimals; TestCurrencyTableIsAdyens holds both. The table,
// and what of it is not confirmed row by row, is docs/acquirers.md.
//
// Only currencies taken from that page are charged; every other currency
// the service accepts is refused with 020 before any call, so an amount is
// never sent with a guessed exponent. Every amount that reaches Adyen, and
// every amount Adyen reports back (webhooks), goes through this table.

// maxMinor is the largest Amount.value this connector sends: the schema's
// int64, bounded well below it so no decimal shift can overflow.
const maxMinor = 999_999_999_999

var (
	adyenTwoDecimal = "AED ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BMD BND BOB BRL BSD BWP BYN BZD " +
		"CAD CHF CLP CNH CNY COP CRC CUP CZK DKK DOP DZD EGP ETB EUR FJD GBP GEL GHS GIP GMD GTQ " +
		"HKD HNL HTG HUF ILS INR ISK JMD KES KGS KHR KYD KZT LAK LBP LKR MAD MDL MKD MNT MOP MUR " +
		"MVR MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SCR " +
		"SEK SGD SZL THB TRY TTD TWD TZS UAH USD UYU UZS XCD YER ZAR ZMW"
	adyenZeroDecimal  = "CVE DJF GNF IDR JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF"
	adyenThreeDecimal = "BHD IQD JOD KWD LYD OMR TND"
)

var adyenExponent = func() map[string]int32 {
	m := map[string]int32{}
	add := func(list string, exp int32) {
		for _, c := range strings.Fields(list) {
			if _, dup := m[c]; dup {
				panic("adyen currency listed twice: " + c)
			}
			m[c] = exp
		}
	}
	add(adyenTwoDecimal, 2)
	add(adyenZeroDecimal, 0)
	add(adyenThreeDecimal, 3)
	return m
}()

// MinorUnits converts an amount to Adyen's Amount (value in Adyen's minor
// units, upper-case currency). An amount Adyen cannot represent (more
// decimals than Adyen's unit, above maxMinor, not positive) or a currency
// outside the table is a *provider.AmountError (026, 020): never rounded,
// never sent.
func MinorUnits(a decimal.Decimal, unit string) (int64, string, error) {
	code := strings.ToUpper(unit)
	exp, ok := adyenExponent[code]
	if !ok {
		return 0, "", &provider.AmountError{Field: "unit", Code: codes.CurrencyNotAllowed,
			Detail: fmt.Sprintf("Payments in %s cannot be charged through the acquirer (not on Adyen's currency list this connector charges).", code)}
	}
	minor, err := provider.MinorUnit{Exponent: exp, Step: 1, Max: maxMinor}.ToMinor(a, code)
	if err != nil {
		return 0, "", err
	}
	return minor, code, nil
}

// FromMinorUnits converts an amount Adyen reports back; ok is false for a
// currency outside the table (it then matches no transaction).
func FromMinorUnits(value int64, cur string) (decimal.Decimal, string, bool) {
	code := strings.ToUpper(cur)
	exp, ok := adyenExponent[code]
	if !ok {
		return decimal.Decimal{}, "", false
	}
	return provider.MinorUnit{Exponent: exp}.FromMinor(value), code, true
}

// CheckAmount refuses, before anything is written or sent, an amount or a
// currency Adyen cannot take (provider.AmountChecker).
func (p *Provider) CheckAmount(a decimal.Decimal, unit string) error {
	_, _, err := MinorUnits(a, unit)
	return err
}

var _ provider.AmountChecker = (*Provider)(nil)
