package provider_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// The one conversion both connectors use: whole minor units in the
// acquirer's step, never rounded, never above its maximum, and back.
func TestMinorUnitConversion(t *testing.T) {
	threeDecimalStep10 := provider.MinorUnit{Exponent: 3, Step: 10, Max: 99_999_999}
	for _, c := range []struct {
		amount string
		u      provider.MinorUnit
		want   int64 // -1: refused with 026
	}{
		{"12.50", provider.MinorUnit{Exponent: 2, Max: 99_999_999}, 1250},
		{"12.505", provider.MinorUnit{Exponent: 2, Max: 99_999_999}, -1}, // more decimals: never rounded
		{"1.23", threeDecimalStep10, 1230},
		{"1.234", threeDecimalStep10, -1}, // not in the step
		{"500", provider.MinorUnit{Exponent: 2, Step: 100, Max: 99_999_999}, 50000},
		{"500.5", provider.MinorUnit{Exponent: 2, Step: 100, Max: 99_999_999}, -1},
		{"1000000", provider.MinorUnit{Exponent: 2, Max: 99_999_999}, -1}, // above the maximum
		{"0", provider.MinorUnit{Exponent: 2, Max: 99_999_999}, -1},
		{"-1", provider.MinorUnit{Exponent: 2, Max: 99_999_999}, -1},
	} {
		got, err := c.u.ToMinor(decimal.RequireFromString(c.amount), "XXX")
		var ae *provider.AmountError
		switch {
		case c.want < 0 && (!errors.As(err, &ae) || ae.Code != codes.InvalidAmount):
			t.Errorf("%s with %+v: %d, %v; want 026", c.amount, c.u, got, err)
		case c.want >= 0 && (err != nil || got != c.want):
			t.Errorf("%s with %+v: %d, %v; want %d", c.amount, c.u, got, err, c.want)
		case c.want >= 0 && !c.u.FromMinor(got).Equal(decimal.RequireFromString(c.amount)):
			t.Errorf("%d back with %+v: %s, want %s", got, c.u, c.u.FromMinor(got), c.amount)
		}
	}
}
