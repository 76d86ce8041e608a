// Package codes holds the specification's payment error codes. They appear in
// lastLog.code, in notifications and in the "code" member of problem responses.
package codes

// Code is a three-digit spec code such as "043". It is a string because the
// leading zeros are part of the value.
type Code string

const (
	BankSystemError        Code = "001"
	InvalidOrExpiredCard   Code = "002"
	CardRestricted         Code = "003"
	ThreeDSDecline         Code = "004"
	InsufficientFunds      Code = "005"
	SecurityCodeIncorrect  Code = "006"
	RiskBlocked            Code = "007"
	UnsupportedCardType    Code = "008"
	InvalidEmail           Code = "009"
	InvalidPostalCode      Code = "010"
	InvalidCredentials     Code = "011"
	TransactionCancelled   Code = "012"
	AuthenticationTimeout  Code = "013"
	OriginDomainBlocked    Code = "014"
	CallbackURLNotAllowed  Code = "015"
	EmailChargebackBlock   Code = "016"
	CardChargebackBlock    Code = "017"
	AmountAboveMaximum     Code = "018"
	AmountBelowMinimum     Code = "019"
	CurrencyNotAllowed     Code = "020"
	DailyCountExceeded     Code = "021"
	MonthlyCountExceeded   Code = "022"
	DailyAmountExceeded    Code = "023"
	MonthlyAmountExceeded  Code = "024"
	InvalidName            Code = "025"
	InvalidAmount          Code = "026"
	InvalidCurrency        Code = "027"
	InvalidReference       Code = "028"
	InvalidNotifyURL       Code = "029"
	InvalidSuccessURL      Code = "030"
	InvalidFailureURL      Code = "031"
	InvalidOriginDomain    Code = "032"
	InvalidPhone           Code = "033"
	InvalidAddress         Code = "034"
	InvalidCity            Code = "035"
	InvalidState           Code = "036"
	InvalidCountry         Code = "037"
	InvalidUPI             Code = "038"
	InvalidCaptureDelay    Code = "039"
	InvalidCardNumber      Code = "040"
	InvalidCardExpiration  Code = "041"
	InvalidCardCVV         Code = "042"
	EntityNotFound         Code = "043"
	InvalidCustomer        Code = "044"
	InvalidPaymentMethod   Code = "045"
	InvalidPaymentProvider Code = "046"
	CountryNotAllowed      Code = "047"
	InvalidToken           Code = "048"
	SystemError            Code = "998"
	DeclinedContactIssuer  Code = "999"
)

var messages = map[Code]string{
	BankSystemError:        "Bank system error, try later",
	InvalidOrExpiredCard:   "Invalid or expired card",
	CardRestricted:         "Card blocked or restricted",
	ThreeDSDecline:         "3-D Secure system decline",
	InsufficientFunds:      "Insufficient funds",
	SecurityCodeIncorrect:  "Security code (CVV/PIN) incorrect",
	RiskBlocked:            "Blocked by risk control",
	UnsupportedCardType:    "Unsupported card type",
	InvalidEmail:           "Invalid email format",
	InvalidPostalCode:      "Invalid postal code",
	InvalidCredentials:     "Invalid credentials or encryption error",
	TransactionCancelled:   "Transaction cancelled",
	AuthenticationTimeout:  "Authentication timed out",
	OriginDomainBlocked:    "Declined: origin domain blocked",
	CallbackURLNotAllowed:  "Declined: callback URL not allowed",
	EmailChargebackBlock:   "Declined: email blocked for high chargeback history",
	CardChargebackBlock:    "Declined: card blocked for high chargeback history",
	AmountAboveMaximum:     "Declined: amount above maximum",
	AmountBelowMinimum:     "Declined: amount below minimum",
	CurrencyNotAllowed:     "Declined: currency not allowed",
	DailyCountExceeded:     "Declined: daily transaction count exceeded",
	MonthlyCountExceeded:   "Declined: monthly transaction count exceeded",
	DailyAmountExceeded:    "Declined: daily total amount exceeded",
	MonthlyAmountExceeded:  "Declined: monthly total amount exceeded",
	InvalidName:            "Invalid name",
	InvalidAmount:          "Invalid total amount",
	InvalidCurrency:        "Invalid currency",
	InvalidReference:       "Invalid reference",
	InvalidNotifyURL:       "Invalid notify URL",
	InvalidSuccessURL:      "Invalid success URL",
	InvalidFailureURL:      "Invalid failure URL",
	InvalidOriginDomain:    "Invalid origin domain",
	InvalidPhone:           "Invalid phone number",
	InvalidAddress:         "Invalid address",
	InvalidCity:            "Invalid city",
	InvalidState:           "Invalid state",
	InvalidCountry:         "Invalid country",
	InvalidUPI:             "Invalid UPI",
	InvalidCaptureDelay:    "Invalid capture delay hours",
	InvalidCardNumber:      "Invalid card number",
	InvalidCardExpiration:  "Invalid card expiration",
	InvalidCardCVV:         "Invalid card CVV",
	EntityNotFound:         "Entity not found",
	InvalidCustomer:        "Invalid customer",
	InvalidPaymentMethod:   "Invalid payment method",
	InvalidPaymentProvider: "Invalid payment provider",
	CountryNotAllowed:      "Declined: country not allowed",
	InvalidToken:           "Invalid token",
	SystemError:            "System internal error, contact the administrator",
	DeclinedContactIssuer:  "Declined, contact the card issuer",
}

// Message is the spec's meaning of the code, used as lastLog.message and as
// the default detail of a problem. Unknown codes yield "".
func (c Code) Message() string { return messages[c] }

// Known reports whether c is one of the specification's codes.
func (c Code) Known() bool { _, ok := messages[c]; return ok }

// All returns every code of the specification (order not significant).
func All() []Code {
	out := make([]Code, 0, len(messages))
	for c := range messages {
		out = append(out, c)
	}
	return out
}
