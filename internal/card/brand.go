package card

import "strconv"

// Brand is the card network, derived from the number's leading digits (IIN).
type Brand string

const (
	Visa       Brand = "visa"
	Mastercard Brand = "mastercard"
	Amex       Brand = "amex"
	Discover   Brand = "discover"
	JCB        Brand = "jcb"
	Diners     Brand = "diners"
	UnionPay   Brand = "unionpay"
	Maestro    Brand = "maestro"
	Unknown    Brand = "unknown"
)

// iinRange maps numbers whose first width digits lie in [lo, hi] to a brand.
type iinRange struct {
	width  int
	lo, hi int
	brand  Brand
}

// iinRanges is checked in order: a narrower range must precede a wider one it
// overlaps (Discover's 622126–622925 sits inside UnionPay's 62).
var iinRanges = []iinRange{
	{2, 34, 34, Amex},
	{2, 37, 37, Amex},
	{3, 300, 305, Diners},
	{4, 3095, 3095, Diners},
	{2, 36, 36, Diners},
	{2, 38, 39, Diners},
	{4, 3528, 3589, JCB},
	{1, 4, 4, Visa},
	{2, 51, 55, Mastercard},
	{4, 2221, 2720, Mastercard},
	{4, 6011, 6011, Discover},
	{6, 622126, 622925, Discover},
	{3, 644, 649, Discover},
	{2, 65, 65, Discover},
	{2, 62, 62, UnionPay},
	{2, 50, 50, Maestro},
	{2, 56, 58, Maestro},
	{4, 6304, 6304, Maestro},
	{3, 639, 639, Maestro},
	{2, 67, 67, Maestro},
}

// brandNames are the brands as the hosted page names them, with the number
// lengths it expects while the payer types (a hint for its messages; the
// service itself takes 12 to 19 digits with a valid check digit).
var brandNames = map[Brand]struct {
	name    string
	lengths []int
}{
	Amex:       {"American Express", []int{15}},
	Visa:       {"Visa", []int{13, 16, 19}},
	Mastercard: {"Mastercard", []int{16}},
	Discover:   {"Discover", []int{16, 19}},
	Diners:     {"Diners Club", []int{14, 16, 19}},
	JCB:        {"JCB", []int{16, 19}},
	UnionPay:   {"UnionPay", []int{16, 17, 18, 19}},
	Maestro:    {"Maestro", []int{12, 13, 14, 15, 16, 17, 18, 19}},
}

// DetectBrand returns the brand of a digits-only card number, or Unknown. It
// looks at the prefix only, so it also works on a partially typed number.
func DetectBrand(digits string) Brand {
	if !isDigits(digits) {
		return Unknown
	}
	for _, r := range iinRanges {
		if len(digits) < r.width {
			continue
		}
		p, _ := strconv.Atoi(digits[:r.width]) // digits checked above
		if p >= r.lo && p <= r.hi {
			return r.brand
		}
	}
	return Unknown
}

// CVVLength is the security code length printed on cards of brand b.
func (b Brand) CVVLength() int {
	if b == Amex {
		return 4
	}
	return 3
}
