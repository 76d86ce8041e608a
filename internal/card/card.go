// Package card validates payment card input and produces the masked form that
// is the only representation of a card the service may store or log
// (docs/security.md: PAN kept as first 6 / last 4, CVV never persisted).
//
// The package is pure: no I/O, no clock (callers pass now), no storage.
package card

import "strings"

// Card number length bounds of ISO/IEC 7812 as accepted by the service.
const (
	MinDigits = 12
	MaxDigits = 19
)

// Normalize removes the spaces and dashes people type between digit groups.
// Nothing else is removed, so any other character still fails validation
// instead of being silently dropped.
func Normalize(number string) string {
	if !strings.ContainsAny(number, " -") {
		return number
	}
	var b strings.Builder
	b.Grow(len(number))
	for _, r := range number {
		if r != ' ' && r != '-' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Luhn reports whether digits (ASCII digits only, 12 to 19 of them) pass the
// Luhn mod-10 check.
func Luhn(digits string) bool {
	if len(digits) < MinDigits || len(digits) > MaxDigits || !isDigits(digits) {
		return false
	}
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// isDigits reports whether s is non-empty and made of ASCII digits only
// (unicode.IsDigit would accept other scripts' digits, which no network uses).
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
