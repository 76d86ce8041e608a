package paycore

import (
	"context"
	"slices"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// StaticLimitCode checks the limits that need no counter, in this order:
// allowed currencies (020), allowed payer countries (047, skipped when the
// attempt carries no payer country), minimum (019) and maximum (018)
// amount. Amounts compare in the payment's own currency; zero means no limit.
// It returns "" when the attempt may proceed.
func StaticLimitCode(l merchant.Limits, amount decimal.Decimal, unit, country string) codes.Code {
	switch {
	case len(l.Currencies) > 0 && !slices.Contains(l.Currencies, unit):
		return codes.CurrencyNotAllowed
	case len(l.Countries) > 0 && country != "" && !slices.Contains(l.Countries, country):
		return codes.CountryNotAllowed
	case l.MinAmount != nil && l.MinAmount.IsPositive() && amount.LessThan(*l.MinAmount):
		return codes.AmountBelowMinimum
	case l.MaxAmount != nil && l.MaxAmount.IsPositive() && amount.GreaterThan(*l.MaxAmount):
		return codes.AmountAboveMaximum
	}
	return ""
}

// Caps are the counter limits of l (zero or nil: unlimited).
func Caps(l merchant.Limits) payment.LimitCaps {
	c := payment.LimitCaps{DailyCount: l.DailyCount, MonthlyCount: l.MonthlyCount}
	if l.DailyAmount != nil && l.DailyAmount.IsPositive() {
		c.DailyAmount = l.DailyAmount
	}
	if l.MonthlyAmount != nil && l.MonthlyAmount.IsPositive() {
		c.MonthlyAmount = l.MonthlyAmount
	}
	return c
}

// ExceededCode is the first limit that one more attempt of amount would
// break given usage: daily count 021, monthly count 022, daily total 023,
// monthly total 024; "" when none would.
func ExceededCode(u payment.LimitUsage, caps payment.LimitCaps, amount decimal.Decimal) codes.Code {
	switch {
	case caps.DailyCount > 0 && u.DailyCount+1 > caps.DailyCount:
		return codes.DailyCountExceeded
	case caps.MonthlyCount > 0 && u.MonthlyCount+1 > caps.MonthlyCount:
		return codes.MonthlyCountExceeded
	case caps.DailyAmount != nil && u.DailyAmount.Add(amount).GreaterThan(*caps.DailyAmount):
		return codes.DailyAmountExceeded
	case caps.MonthlyAmount != nil && u.MonthlyAmount.Add(amount).GreaterThan(*caps.MonthlyAmount):
		return codes.MonthlyAmountExceeded
	}
	return ""
}

// reserve adds the attempt to the merchant's counters with one conditional
// UpdateItem, or returns the code of the limit it would break.
func (s *Service) reserve(ctx context.Context, w payment.LimitWindow, amount decimal.Decimal, caps payment.LimitCaps) (codes.Code, error) {
	// An amount above a total on its own can never fit.
	if code := ExceededCode(payment.LimitUsage{}, payment.LimitCaps{DailyAmount: caps.DailyAmount, MonthlyAmount: caps.MonthlyAmount}, amount); code != "" {
		return code, nil
	}
	for try := 0; try < 3; try++ {
		err := s.limits.ReserveLimits(ctx, w, amount, caps)
		if err == nil {
			return "", nil
		}
		if !errkind.Is(err, errkind.Conflict) {
			return "", err
		}
		u, err := s.limits.LimitUsageOf(ctx, w)
		if err != nil {
			return "", err
		}
		if code := ExceededCode(u, caps, amount); code != "" {
			return code, nil
		}
		// A concurrent release made room between the two calls: try again.
	}
	return codes.DailyCountExceeded, nil
}
