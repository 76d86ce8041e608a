// Package currency knows which currency codes the service accepts and how many
// decimal places an amount in each may carry.
package currency

import (
	"sort"
	"strings"

	"github.com/shopspring/decimal"
)

// Currency is an accepted unit of payment.
type Currency struct {
	Code     string
	Decimals int32 // minor-unit exponent: 2 for EUR, 0 for JPY, 8 for BTC
	Crypto   bool
}

// Lookup returns the currency for an upper-case code.
func Lookup(code string) (Currency, bool) {
	c, ok := all[code]
	return c, ok
}

// Codes lists every accepted code, sorted.
func Codes() []string {
	out := make([]string, 0, len(all))
	for code := range all {
		out = append(out, code)
	}
	sort.Strings(out)
	return out
}

// Decimals is Lookup shaped as the batch processor's lookup function.
func Decimals(code string) (int32, bool) {
	c, ok := all[code]
	return c.Decimals, ok
}

// ValidAmount reports whether a is positive and carries no more decimal places
// than the currency allows (trailing zeros are not counted: 10.50 EUR is fine).
func (c Currency) ValidAmount(a decimal.Decimal) bool {
	if !a.IsPositive() {
		return false
	}
	return -a.Exponent() <= c.Decimals || a.Equal(a.Truncate(c.Decimals))
}

// Format renders a with exactly the currency's decimal places ("10.50").
func (c Currency) Format(a decimal.Decimal) string { return a.StringFixed(c.Decimals) }

// Crypto units accepted besides ISO 4217, with their decimals (listed in
// docs/openapi.yaml).
var crypto = map[string]int32{
	"BTC": 8, "ETH": 18, "USDT": 6, "USDC": 6, "LTC": 8,
	"BCH": 8, "XRP": 6, "DOGE": 8, "TRX": 6, "SOL": 9, "DAI": 18,
}

// Active ISO 4217 codes by exponent; anything not listed under 0, 3 or 4 has 2.
var iso4217 = map[int32]string{
	0: "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF",
	3: "BHD IQD JOD KWD LYD OMR TND",
	4: "CLF UYW",
	2: "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD " +
		"CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP " +
		"GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL MAD MDL " +
		"MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN " +
		"QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD " +
		"TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR ZMW ZWG",
}

var all = func() map[string]Currency {
	m := make(map[string]Currency, 200)
	for dec, codes := range iso4217 {
		for _, code := range strings.Fields(codes) {
			m[code] = Currency{Code: code, Decimals: dec}
		}
	}
	for code, dec := range crypto {
		m[code] = Currency{Code: code, Decimals: dec, Crypto: true}
	}
	return m
}()
