// Package payer holds the payer data of the host-to-host payment operations
// (spec "Payer data" and "browserInfo") and its validation. The single-field
// validators are exported so the batch-file processor applies the very same
// rules to its rows.
//
// Lengths are counted in Unicode characters (runes), as a payer reads them,
// not in bytes. Free-text fields must also be valid UTF-8 without control
// characters: a line break in a name would corrupt batch result files and
// log lines, and no real name, address or city needs one.
package payer

import (
	"strings"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// BrowserInfo describes the payer's browser for 3-D Secure (wallet operation
// only). All fields are optional; their types are the spec's, which is why
// numeric-looking values such as colorDepth are strings.
type BrowserInfo struct {
	AcceptHeader      string `json:"acceptHeader,omitempty"`
	ColorDepth        string `json:"colorDepth,omitempty"`
	IP                string `json:"ip,omitempty"`
	JavaEnabled       *bool  `json:"javaEnabled,omitempty"`
	JavascriptEnabled *bool  `json:"javascriptEnabled,omitempty"`
	Language          string `json:"language,omitempty"`
	ScreenHeight      string `json:"screenHeight,omitempty"`
	ScreenWidth       string `json:"screenWidth,omitempty"`
	Timezone          string `json:"timezone,omitempty"`
	UserAgent         string `json:"userAgent,omitempty"`
}

// Data is the payer data sent to a payment operation. Optional members are
// pointers so that "absent" stays distinguishable from an empty value: the QR
// operation must reject a token that is present at all.
type Data struct {
	Name        string       `json:"name"`
	Email       string       `json:"email"`
	PhoneNumber string       `json:"phoneNumber"`
	Address     string       `json:"address"`
	City        string       `json:"city"`
	State       string       `json:"state"`
	PostalCode  string       `json:"postalCode"`
	Country     string       `json:"country"`
	Token       *string      `json:"token,omitempty"`
	BrowserInfo *BrowserInfo `json:"browserInfo,omitempty"`
	Is3DS       *bool        `json:"is3ds,omitempty"`
	IsSandbox   *bool        `json:"isSandbox,omitempty"`
	IPAddress   *string      `json:"ipAddress,omitempty"`
	// UPIID is the payer's virtual payment address, used by the UPI methods
	// (not in the spec's payer table; docs/payments.md).
	UPIID string `json:"upiId,omitempty"`
}

// Kind is the payment operation the data is sent to; it decides which of
// token, browserInfo and upiId are required or refused.
type Kind int

const (
	Wallet Kind = iota // token required, browserInfo allowed
	QR                 // token refused
	UPI                // upiId required
	Other              // alternative methods: only the common fields
)

func (k Kind) String() string {
	switch k {
	case Wallet:
		return "wallet"
	case QR:
		return "QR"
	case UPI:
		return "UPI"
	case Other:
		return "other"
	}
	return "unknown"
}

// JSON names of the payer fields, as used in errkind.FieldError.Field.
const (
	FieldName        = "name"
	FieldEmail       = "email"
	FieldPhoneNumber = "phoneNumber"
	FieldAddress     = "address"
	FieldCity        = "city"
	FieldState       = "state"
	FieldPostalCode  = "postalCode"
	FieldCountry     = "country"
	FieldToken       = "token"
	FieldBrowserInfo = "browserInfo"
	FieldUPIID       = "upiId"
)

// Normalize puts d's fields in their stored form before Validate (the
// country code in upper case).
func (d *Data) Normalize() { d.Country = NormalizeCountry(d.Country) }

// Validate checks d for operation k and returns one error per invalid field,
// in the order of the spec's payer table (upiId, which the table lacks, last).
func (d Data) Validate(k Kind) []errkind.FieldError {
	var errs []errkind.FieldError
	check := func(field string, code codes.Code, detail string) {
		if detail != "" {
			errs = append(errs, errkind.FieldError{Field: field, Code: code, Detail: detail})
		}
	}

	check(FieldName, codes.InvalidName, nameProblem(d.Name))
	check(FieldEmail, codes.InvalidEmail, emailProblem(d.Email))
	check(FieldPhoneNumber, codes.InvalidPhone, phoneProblem(d.PhoneNumber))
	check(FieldAddress, codes.InvalidAddress, addressProblem(d.Address))
	check(FieldCity, codes.InvalidCity, cityProblem(d.City))
	check(FieldState, codes.InvalidState, stateProblem(d.State))
	check(FieldPostalCode, codes.InvalidPostalCode, postalCodeProblem(d.PostalCode))
	check(FieldCountry, codes.InvalidCountry, countryProblem(d.Country))
	check(FieldToken, codes.InvalidToken, tokenProblem(d.Token, k))
	if d.BrowserInfo != nil && k != Wallet {
		// Not a spec code: nothing in the Errors table means "field not
		// accepted here", so the entry carries a detail only.
		check(FieldBrowserInfo, "", "browserInfo is accepted by the wallet operation only")
	}
	if k == UPI {
		check(FieldUPIID, codes.InvalidUPI, upiProblem(d.UPIID))
	}
	return errs
}

func tokenProblem(token *string, k Kind) string {
	switch k {
	case Wallet:
		if token == nil || strings.TrimSpace(*token) == "" {
			return "token is required"
		}
	case QR:
		if token != nil {
			return "token is not accepted by the QR operation"
		}
	}
	return ""
}
