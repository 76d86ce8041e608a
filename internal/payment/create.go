package payment

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payer"
)

// Field limits for POST /payment-requests.
const (
	MaxNameLen      = 100
	MaxReferenceLen = 100
	MaxNotesLen     = 1000
	MaxURLLen       = 2048
	MaxClientIDLen  = 100
	// Amounts beyond 15 integer digits are refused: no real payment needs them
	// and it keeps every amount exact in DynamoDB's 38-digit numbers.
	maxIntegerDigits = 15
)

// CreateInput is the body of POST /payment-requests.
type CreateInput struct {
	Amount        json.RawMessage `json:"amount"`
	Unit          string          `json:"unit"`
	RecipientName string          `json:"recipientName"`
	ReferenceID   string          `json:"referenceId"`
	Notes         string          `json:"notes"`
	Client        *Client         `json:"client"`
	NotifyURL     string          `json:"notifyUrl"`
	SuccessURL    string          `json:"successUrl"`
	FailureURL    string          `json:"failureUrl"`
}

// CreateRules carries what validation needs from outside the body.
type CreateRules struct {
	// AllowHTTP permits http:// URLs (sandbox and local stack); production
	// requires https.
	AllowHTTP bool
	// DefaultRecipient is used when recipientName is omitted (merchant name).
	DefaultRecipient string
}

// Validate checks every field and returns the request to store (without id
// and timestamps) or the complete list of field errors, in body order.
func (in CreateInput) Validate(rules CreateRules) (Request, []errkind.FieldError) {
	var errs []errkind.FieldError
	add := func(field string, code codes.Code, detail string) {
		errs = append(errs, errkind.FieldError{Field: field, Code: code, Detail: detail})
	}
	r := Request{Status: RequestUnpaid}

	unit := strings.TrimSpace(in.Unit)
	cur, curOK := currency.Lookup(unit)
	amount, amountErr := ParseAmount(in.Amount)
	switch {
	case amountErr != "":
		add("amount", codes.InvalidAmount, amountErr)
	case curOK && !cur.ValidAmount(amount):
		add("amount", codes.InvalidAmount, "amount has more decimal places than "+unit+" allows")
	}
	switch {
	case unit == "":
		add("unit", codes.InvalidCurrency, "unit is required")
	case !curOK:
		add("unit", codes.InvalidCurrency, "unit must be an ISO 4217 currency code or a supported crypto code (BTC, ETH, USDT, USDC, LTC, ...), in upper case")
	}
	r.Amount, r.Unit = amount, unit

	r.RecipientName = strings.TrimSpace(in.RecipientName)
	if r.RecipientName == "" {
		r.RecipientName = rules.DefaultRecipient
	}
	if !validText(r.RecipientName, MaxNameLen) {
		add("recipientName", codes.InvalidName, "recipientName must be printable text of at most 100 characters")
	}
	r.ReferenceID = strings.TrimSpace(in.ReferenceID)
	if !validText(r.ReferenceID, MaxReferenceLen) {
		add("referenceId", codes.InvalidReference, "referenceId must be printable text of at most 100 characters")
	}
	r.Notes = in.Notes
	// notes has no code of its own in the spec; 028 (invalid reference) is
	// the closest: both are the merchant's free text about the payment.
	if utf8.RuneCountInString(r.Notes) > MaxNotesLen || !payer.PlainText(r.Notes) {
		add("notes", codes.InvalidReference, "notes must be printable text of at most 1000 characters, without control, bidirectional-override or zero-width characters")
	}
	if in.Client != nil {
		c := *in.Client
		if !validText(c.ID, MaxClientIDLen) || !validText(c.MemberID, MaxClientIDLen) {
			add("client.id", codes.InvalidCustomer, "client.id and client.memberId must be printable text of at most 100 characters")
		}
		if !validText(c.Name, MaxNameLen) {
			add("client.name", codes.InvalidName, "client.name must be printable text of at most 100 characters")
		}
		if c.Email != "" && !payer.ValidEmail(c.Email) {
			add("client.email", codes.InvalidEmail, "client.email must be a valid e-mail address of at most 100 characters")
		}
		if c.Phone != "" && !payer.ValidPhone(c.Phone) {
			add("client.phone", codes.InvalidPhone, "client.phone must be 10 to 14 digits")
		}
		if c != (Client{}) {
			r.Client = &c
		}
	}
	for _, u := range []struct {
		field string
		val   string
		code  codes.Code
		dst   *string
	}{
		{"notifyUrl", in.NotifyURL, codes.InvalidNotifyURL, &r.NotifyURL},
		{"successUrl", in.SuccessURL, codes.InvalidSuccessURL, &r.SuccessURL},
		{"failureUrl", in.FailureURL, codes.InvalidFailureURL, &r.FailureURL},
	} {
		*u.dst = strings.TrimSpace(u.val)
		if *u.dst != "" && !ValidURL(*u.dst, rules.AllowHTTP) {
			scheme := "https"
			if rules.AllowHTTP {
				scheme = "http or https"
			}
			add(u.field, u.code, u.field+" must be an absolute "+scheme+" URL without credentials, at most 2048 characters")
		}
	}
	return r, errs
}

// ParseAmount reads a JSON number (or a numeric JSON string) as an exact
// decimal. It returns a non-empty reason when the value is not a positive
// plain decimal.
func ParseAmount(raw json.RawMessage) (decimal.Decimal, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return decimal.Decimal{}, "amount is required"
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return decimal.Decimal{}, "amount must be a number"
		}
	} else if m, e, ok := strings.Cut(strings.ToLower(s), "e"); ok {
		// A JSON number in exponent form, as JavaScript writes 0.0000001
		// (1e-7): read exactly, then held to the plain form's limits.
		return exponentAmount(m, e)
	}
	if !plainDecimal(s) {
		return decimal.Decimal{}, "amount must be a plain decimal number such as 10.50"
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, "amount must be a number"
	}
	if !d.IsPositive() {
		return decimal.Decimal{}, "amount must be greater than zero"
	}
	return d, ""
}

// exponentAmount reads mantissa "e" exponent exactly. The value must fit
// the plain form (at most 15 integer digits and 18 decimal places, trailing
// zeros not counted); the currency's own decimals are checked later, like
// any amount's.
func exponentAmount(mantissa, exp string) (decimal.Decimal, string) {
	const bad = "amount must be a decimal number such as 10.50 or 1e-7"
	e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
	if !plainDecimal(mantissa) || err != nil || e < -40 || e > 40 || strings.HasPrefix(exp, "+-") {
		return decimal.Decimal{}, bad
	}
	m, err := decimal.NewFromString(mantissa)
	if err != nil {
		return decimal.Decimal{}, bad
	}
	d := m.Shift(int32(e))
	if !d.IsPositive() {
		return decimal.Decimal{}, "amount must be greater than zero"
	}
	if !plainDecimal(d.String()) {
		return decimal.Decimal{}, bad
	}
	return d, ""
}

// plainDecimal accepts -?digits(.digits)? with at most 15 integer digits:
// no exponent, no leading plus, no hex.
func plainDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || len(intPart) > maxIntegerDigits || (hasDot && frac == "") || len(frac) > 18 {
		return false
	}
	for _, c := range intPart + frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ValidURL accepts absolute http(s) URLs with a host and no user info.
func ValidURL(raw string, allowHTTP bool) bool {
	if len(raw) > MaxURLLen {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return false
	}
	return u.Scheme == "https" || (allowHTTP && u.Scheme == "http")
}

// validText: at most max characters of plain text (payer.PlainText).
func validText(s string, max int) bool {
	return utf8.RuneCountInString(s) <= max && payer.PlainText(s)
}
