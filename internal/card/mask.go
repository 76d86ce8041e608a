package card

import (
	"log/slog"
	"strings"
)

// Masked is the only representation of a card that may be stored or logged:
// brand, first six and last four digits.
type Masked struct {
	Brand  Brand  `json:"brand"`
	First6 string `json:"bin"`
	Last4  string `json:"last4"`
}

// Mask keeps the first six and last four digits of a card number. Input that
// is not a plausible card number (non-digits, fewer than MinDigits) reveals no
// digits at all, since first six plus last four of a short string would be
// most or all of it.
func Mask(digits string) Masked {
	if len(digits) < MinDigits || !isDigits(digits) {
		return Masked{Brand: Unknown}
	}
	return Masked{Brand: DetectBrand(digits), First6: digits[:6], Last4: digits[len(digits)-4:]}
}

// String renders "visa 411111******1111". The number of stars is fixed so the
// output does not reveal the number's length either.
func (m Masked) String() string {
	brand := m.Brand
	if brand == "" {
		brand = Unknown
	}
	if m.First6 == "" && m.Last4 == "" {
		return string(brand)
	}
	return string(brand) + " " + m.First6 + strings.Repeat("*", 6) + m.Last4
}

// LogValue logs the masked card as a group {brand, bin, last4}.
func (m Masked) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("brand", string(m.Brand)),
		slog.String("bin", m.First6),
		slog.String("last4", m.Last4),
	)
}
