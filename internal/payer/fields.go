package payer

import (
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the spec's payer table, in characters.
const (
	MaxNameLen       = 100
	MaxEmailLen      = 100
	MinPhoneLen      = 10
	MaxPhoneLen      = 14
	MaxAddressLen    = 100
	MaxCityLen       = 50
	MaxPostalCodeLen = 10
	CountryLen       = 2
	// MaxUPILen follows from upiPattern: 256 + "@" + 65.
	MaxUPILen = 322
)

// ValidName reports whether s is an acceptable payer name (code 025).
func ValidName(s string) bool { return nameProblem(s) == "" }

// ValidEmail reports whether s is a bare e-mail address of at most
// MaxEmailLen characters (code 009).
func ValidEmail(s string) bool { return emailProblem(s) == "" }

// ValidPhone reports whether s is 10 to 14 ASCII digits (code 033).
func ValidPhone(s string) bool { return phoneProblem(s) == "" }

// ValidAddress reports whether s is an acceptable street address (code 034).
func ValidAddress(s string) bool { return addressProblem(s) == "" }

// ValidCity reports whether s is an acceptable city (code 035).
func ValidCity(s string) bool { return cityProblem(s) == "" }

// ValidState reports whether s is an acceptable state name or code (code 036).
func ValidState(s string) bool { return stateProblem(s) == "" }

// ValidPostalCode reports whether s is an acceptable postal code (code 010).
func ValidPostalCode(s string) bool { return postalCodeProblem(s) == "" }

// ValidCountry reports whether code is an assigned ISO 3166-1 alpha-2 code in
// upper case (code 037); NormalizeCountry first makes every channel accept
// either case.
func ValidCountry(code string) bool { return countryProblem(code) == "" }

// ValidUPI reports whether s is a UPI virtual payment address (code 038).
func ValidUPI(s string) bool { return upiProblem(s) == "" }

// Each xxxProblem returns "" when the value is valid, else the detail of the
// field error, so Validate and the exported predicates cannot drift apart.

func nameProblem(s string) string    { return textProblem(FieldName, s, MaxNameLen) }
func addressProblem(s string) string { return textProblem(FieldAddress, s, MaxAddressLen) }
func cityProblem(s string) string    { return textProblem(FieldCity, s, MaxCityLen) }

// stateProblem: the spec sets only a minimum length for state.
func stateProblem(s string) string { return textProblem(FieldState, s, 0) }

// textProblem checks a required free-text field; max 0 means no upper bound.
func textProblem(field, s string, max int) string {
	switch {
	case strings.TrimSpace(s) == "":
		return field + " is required"
	case max > 0 && utf8.RuneCountInString(s) > max:
		return field + " must be at most " + strconv.Itoa(max) + " characters"
	case !utf8.ValidString(s):
		return field + " must be valid UTF-8 text"
	case !PlainText(s):
		return field + " must not contain control, bidirectional-override or zero-width characters"
	}
	return ""
}

func emailProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "email is required"
	case utf8.RuneCountInString(s) > MaxEmailLen:
		return "email must be at most " + strconv.Itoa(MaxEmailLen) + " characters"
	case !emailFormat(s):
		return "email must be an e-mail address such as payer@example.com"
	}
	return ""
}

// emailFormat accepts a bare addr-spec (no display name, comment or quotes)
// whose domain is a dotted host name. RFC 5322 also allows "a@b" and domain
// literals, but no payer has such a mailbox and notifications could not
// reach it.
func emailFormat(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return false
	}
	labels := strings.Split(s[strings.LastIndexByte(s, '@')+1:], ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			// Non-ASCII letters are kept for internationalised domains.
			if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return false
			}
		}
	}
	return true
}

func phoneProblem(s string) string {
	switch {
	case s == "":
		return "phoneNumber is required"
	case !asciiDigits(s):
		return "phoneNumber must contain digits only"
	case len(s) < MinPhoneLen || len(s) > MaxPhoneLen:
		return "phoneNumber must be " + strconv.Itoa(MinPhoneLen) + " to " + strconv.Itoa(MaxPhoneLen) + " digits"
	}
	return ""
}

// postalCodeProblem: beyond the spec's length, postal codes worldwide use
// only Latin letters, digits, spaces and hyphens ("SW1A 1AA", "12345-6789"),
// so anything else is a typing or injection error.
func postalCodeProblem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "postalCode is required"
	case utf8.RuneCountInString(s) > MaxPostalCodeLen:
		return "postalCode must be at most " + strconv.Itoa(MaxPostalCodeLen) + " characters"
	}
	for _, r := range s {
		if !isASCIIAlnum(r) && r != ' ' && r != '-' {
			return "postalCode may contain only letters, digits, spaces and hyphens"
		}
	}
	return ""
}

func countryProblem(s string) string {
	switch {
	case s == "":
		return "country is required"
	case len(s) != CountryLen || !iso3166[s]:
		return "country must be an ISO 3166-1 alpha-2 code, such as US"
	}
	return ""
}

// upiPattern is a virtual payment address: a handle, "@", and a PSP name that
// starts with a letter.
var upiPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{2,256}@[A-Za-z][A-Za-z0-9]{1,64}$`)

func upiProblem(s string) string {
	switch {
	case s == "":
		return "upiId is required"
	case !upiPattern.MatchString(s):
		return "upiId must be a UPI address such as name@bank"
	}
	return ""
}

func asciiDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isASCIIAlnum(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z'
}

// NormalizeCountry upper-cases the ASCII letters of a country code: every
// channel (the API, the hosted page, batch rows) accepts "us" as "US" and
// stores the upper-case form. Other bytes are left alone, so a non-ASCII
// look-alike still fails validation.
func NormalizeCountry(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}
