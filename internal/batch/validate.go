package batch

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payer"
)

// Field names of the amount, unit and reference errors: those of the create
// payment request API. Card and payer fields use the card and payer
// packages' names, so a merchant sees one vocabulary in API errors and in
// result files.
const (
	FieldAmount      = "amount"
	FieldUnit        = "unit"
	FieldReferenceID = "referenceId"
)

// MaxReferenceLen is the longest accepted reference, in characters.
const MaxReferenceLen = 100

// Validate checks a row at now with the spec's codes and returns every field
// error in position order (nil when the row is valid). The card rules are
// the card package's, the payer rules the payer package's, so a batch row is
// held to exactly what the API accepts. currencies decides unit and amount
// precision; a nil lookup accepts no unit.
func Validate(row Row, now time.Time, currencies CurrencyLookup) []errkind.FieldError {
	return validate(row, true, now, currencies)
}

// validate is Validate for the reader, which knows whether the amount was
// written as a plain decimal number (Row.Amount no longer shows it).
func validate(row Row, amountOK bool, now time.Time, currencies CurrencyLookup) []errkind.FieldError {
	_, cardErrs := card.Input{Holder: row.HolderName, Number: row.CardNumber, Expiry: row.CardExpiry, CVV: row.CVV}.Validate(now)
	payerErrs := payer.Data{
		Name: row.HolderName, Email: row.Email, PhoneNumber: row.Phone, Address: row.Address,
		City: row.City, State: row.State, PostalCode: row.PostalCode, Country: row.Country,
	}.Validate(payer.Other)

	var errs []errkind.FieldError
	// The holder is checked twice: by the card rules (required, length) and
	// by the payer name rules, which also refuse control characters. Report
	// it once, first, as the card holder.
	holderErr := fieldErr(cardErrs, card.FieldHolder)
	if holderErr == nil {
		if e := fieldErr(payerErrs, payer.FieldName); e != nil {
			holderErr = &errkind.FieldError{Field: card.FieldHolder, Code: e.Code, Detail: e.Detail}
		}
	}
	if holderErr != nil {
		errs = append(errs, *holderErr)
	}
	errs = appendExcept(errs, cardErrs, card.FieldHolder)
	errs = appendExcept(errs, payerErrs, payer.FieldName)

	decimals, unitOK := int32(0), false
	if currencies != nil {
		decimals, unitOK = currencies(row.Unit)
	}
	switch {
	case !amountOK:
		errs = append(errs, errkind.FieldError{Field: FieldAmount, Code: codes.InvalidAmount,
			Detail: "amount must be a decimal number with a dot as separator, such as 10.50"})
	case !row.Amount.IsPositive():
		errs = append(errs, errkind.FieldError{Field: FieldAmount, Code: codes.InvalidAmount,
			Detail: "amount must be greater than 0"})
	case unitOK && !row.Amount.Equal(row.Amount.Truncate(decimals)):
		// Trailing zeros are fine ("10.50" EUR); more precision is not.
		errs = append(errs, errkind.FieldError{Field: FieldAmount, Code: codes.InvalidAmount,
			Detail: "amount has more than " + strconv.Itoa(int(decimals)) + " decimal places for " + row.Unit})
	}
	if !unitOK {
		errs = append(errs, errkind.FieldError{Field: FieldUnit, Code: codes.InvalidCurrency,
			Detail: "unit must be an ISO 4217 currency or a supported crypto currency code"})
	}
	if d := referenceProblem(row.ReferenceID); d != "" {
		errs = append(errs, errkind.FieldError{Field: FieldReferenceID, Code: codes.InvalidReference, Detail: d})
	}
	return errs
}

// referenceProblem: optional, but when given it is echoed in notifications
// and result files, so it must be printable text of bounded length.
func referenceProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "referenceId must be valid UTF-8 text"
	case utf8.RuneCountInString(s) > MaxReferenceLen:
		return "referenceId must be at most " + strconv.Itoa(MaxReferenceLen) + " characters"
	case strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }):
		return "referenceId must contain printable characters only"
	}
	return ""
}

func fieldErr(errs []errkind.FieldError, field string) *errkind.FieldError {
	for i := range errs {
		if errs[i].Field == field {
			return &errs[i]
		}
	}
	return nil
}

func appendExcept(dst, errs []errkind.FieldError, field string) []errkind.FieldError {
	for _, e := range errs {
		if e.Field != field {
			dst = append(dst, e)
		}
	}
	return dst
}
