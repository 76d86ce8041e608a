package card

import (
	"errors"
	"fmt"
	"time"
)

// ErrExpiryFormat is returned by ParseExpiry for anything but "MM/YY".
var ErrExpiryFormat = errors.New("card: expiry must be MM/YY with a month from 01 to 12")

// Expiry is a card's expiration month. Year has four digits.
type Expiry struct {
	Month int
	Year  int
}

// ParseExpiry accepts exactly "MM/YY" (the batch file format and what card
// forms show); YY is taken as 20YY.
func ParseExpiry(s string) (Expiry, error) {
	if len(s) != 5 || s[2] != '/' || !isDigits(s[:2]) || !isDigits(s[3:]) {
		return Expiry{}, ErrExpiryFormat
	}
	month := int(s[0]-'0')*10 + int(s[1]-'0')
	year := int(s[3]-'0')*10 + int(s[4]-'0')
	if month < 1 || month > 12 {
		return Expiry{}, ErrExpiryFormat
	}
	return Expiry{Month: month, Year: 2000 + year}, nil
}

// Expired reports whether the card can no longer be used at now. A card is
// valid through the last day of its expiry month; UTC is used so the answer
// does not depend on the server's zone.
func (e Expiry) Expired(now time.Time) bool {
	firstInvalid := time.Date(e.Year, time.Month(e.Month)+1, 1, 0, 0, 0, 0, time.UTC)
	return !now.UTC().Before(firstInvalid)
}

// String renders the expiry as "MM/YY".
func (e Expiry) String() string { return fmt.Sprintf("%02d/%02d", e.Month, e.Year%100) }

// ValidCVV reports whether cvv has the length brand b prints (4 for amex,
// 3 otherwise) and only digits.
func ValidCVV(cvv string, b Brand) bool {
	return len(cvv) == b.CVVLength() && isDigits(cvv)
}
