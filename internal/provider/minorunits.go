package provider

import (
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

// MinorUnit is how one acquirer writes amounts of one currency: its own
// rules, never ISO 4217's (each connector keeps its table, taken from the
// acquirer's published list: provider/stripe/currency.go,
// provider/adyen/currency.go). The conversion both ways is this one.
type MinorUnit struct {
	Exponent int32 // decimal places of the acquirer's minor unit
	Step     int64 // an amount in minor units must be a multiple of Step; 0 or 1: any
	Max      int64 // the largest amount the acquirer takes, in minor units
}

// ToMinor converts a positive amount of currency code to u's minor units.
// An amount u cannot represent (not positive, more decimals than u's unit
// or not a multiple of its step, above Max) is a *AmountError with 026:
// never rounded, so never sent with another value.
func (u MinorUnit) ToMinor(amount decimal.Decimal, code string) (int64, error) {
	if !amount.IsPositive() {
		return 0, &AmountError{Field: "amount", Code: codes.InvalidAmount, Detail: "The amount must be greater than zero."}
	}
	minor := amount.Shift(u.Exponent)
	if !minor.Equal(minor.Truncate(0)) || u.Step > 1 && !minor.Mod(decimal.NewFromInt(u.Step)).IsZero() {
		return 0, &AmountError{Field: "amount", Code: codes.InvalidAmount,
			Detail: fmt.Sprintf("%s %s has more decimal places than the acquirer takes for %s (%d).", amount, code, code, u.Exponent-stepDigits(u.Step))}
	}
	if minor.GreaterThan(decimal.NewFromInt(u.Max)) {
		return 0, &AmountError{Field: "amount", Code: codes.InvalidAmount,
			Detail: fmt.Sprintf("%s %s is above the largest amount the acquirer takes (%s %s).", amount, code, u.FromMinor(u.Max), code)}
	}
	return minor.IntPart(), nil
}

// FromMinor converts an amount the acquirer reports in u's minor units.
func (u MinorUnit) FromMinor(minor int64) decimal.Decimal { return decimal.New(minor, -u.Exponent) }

// stepDigits is log10(step) for the steps acquirers use (1, 10, 100).
func stepDigits(step int64) int32 {
	d := int32(0)
	for ; step >= 10; step /= 10 {
		d++
	}
	return d
}
