package card

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payer"
)

// MaxHolderLen is the longest accepted card holder name, in characters.
const MaxHolderLen = 100

// Field names used in errkind.FieldError for card input.
const (
	FieldHolder = "holderName"
	FieldNumber = "number"
	FieldExpiry = "expiry"
	FieldCVV    = "cvc"
)

// Input is card data as the payer typed it (hosted page) or as a batch row
// carries it. It holds the full number and the CVV, so every way of printing
// it (fmt, slog, encoding/json) is redacted; see String.
type Input struct {
	Holder string
	Number string
	Expiry string
	CVV    string
}

// Details is validated card data ready for a provider. It still holds the full
// number, so it prints, logs and marshals as its Masked form only. The CVV is
// deliberately not part of it: it travels beside it for one provider call.
type Details struct {
	Digits string
	Brand  Brand
	Expiry Expiry
	Masked Masked
}

// Validate checks the input at now and returns every field error, in form
// order. Details is the zero value whenever an error is returned, so partial
// data cannot be charged by mistake. An unknown brand is accepted: the
// provider decides whether it supports the card (code 008).
func (in Input) Validate(now time.Time) (Details, []errkind.FieldError) {
	var errs []errkind.FieldError
	add := func(field string, code codes.Code, detail string) {
		errs = append(errs, errkind.FieldError{Field: field, Code: code, Detail: detail})
	}

	holder := strings.TrimSpace(in.Holder)
	switch {
	case holder == "":
		add(FieldHolder, codes.InvalidName, "holderName is required")
	case utf8.RuneCountInString(holder) > MaxHolderLen:
		add(FieldHolder, codes.InvalidName, "holderName must be at most "+strconv.Itoa(MaxHolderLen)+" characters")
	case !payer.PlainText(holder):
		add(FieldHolder, codes.InvalidName, "holderName must not contain control, bidirectional-override or zero-width characters")
	}

	digits := Normalize(in.Number)
	numberOK := isDigits(digits) && Luhn(digits)
	switch {
	case digits == "":
		add(FieldNumber, codes.InvalidCardNumber, "number is required")
	case !isDigits(digits):
		add(FieldNumber, codes.InvalidCardNumber, "number must contain only digits, spaces and dashes")
	case !numberOK:
		add(FieldNumber, codes.InvalidCardNumber, "number is not a valid card number")
	}

	exp, err := ParseExpiry(in.Expiry)
	switch {
	case err != nil:
		add(FieldExpiry, codes.InvalidCardExpiration, "expiry must be MM/YY")
	case exp.Expired(now):
		add(FieldExpiry, codes.InvalidCardExpiration, "card has expired")
	}

	brand := DetectBrand(digits)
	if !numberOK {
		// The brand of a mistyped number is a guess; accept either CVV length
		// so the payer is not told their correct CVV is wrong too.
		if !ValidCVV(in.CVV, Visa) && !ValidCVV(in.CVV, Amex) {
			add(FieldCVV, codes.InvalidCardCVV, "cvc must be 3 or 4 digits")
		}
	} else if !ValidCVV(in.CVV, brand) {
		add(FieldCVV, codes.InvalidCardCVV, "cvc must be "+strconv.Itoa(brand.CVVLength())+" digits")
	}

	if len(errs) > 0 {
		return Details{}, errs
	}
	return Details{Digits: digits, Brand: brand, Expiry: exp, Masked: Mask(digits)}, nil
}

// masked is the printable form of whatever number the payer typed.
func (in Input) masked() Masked { return Mask(Normalize(in.Number)) }

// String never includes the number, the CVV, the holder or the expiry: only
// the masked card and whether a CVV was given.
func (in Input) String() string {
	return "card.Input{" + in.masked().String() + " cvv:" + presence(in.CVV) + "}"
}

// Format makes every fmt verb, %#v and %+v included, print String; without it
// %+v and %#v would print the struct fields.
func (in Input) Format(f fmt.State, verb rune) { writeRedacted(f, verb, in.String()) }

// LogValue keeps slog handlers (text and JSON) from reflecting over the fields.
func (in Input) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("card", in.masked()),
		slog.Bool("cvvPresent", in.CVV != ""),
	)
}

// MarshalJSON writes the masked card, so encoding an Input (a log line, a
// stored record) cannot leak the number or the CVV.
func (in Input) MarshalJSON() ([]byte, error) { return json.Marshal(in.masked()) }

// String is the masked card.
func (d Details) String() string { return d.Masked.String() }

// Format prints String for every verb.
func (d Details) Format(f fmt.State, verb rune) { writeRedacted(f, verb, d.String()) }

// LogValue logs the masked card only.
func (d Details) LogValue() slog.Value { return d.Masked.LogValue() }

// MarshalJSON writes the masked card only.
func (d Details) MarshalJSON() ([]byte, error) { return json.Marshal(d.Masked) }

func writeRedacted(f fmt.State, verb rune, s string) {
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = f.Write([]byte(s))
}

func presence(s string) string {
	if s == "" {
		return "absent"
	}
	return "present"
}
