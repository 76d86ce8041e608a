package dashboard

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/payment"
)

// Attempts in plain words: what a merchant's people read, from the spec's
// code meanings (internal/codes); the wire form (lastLog) stays available
// on the page for developers.

// resultWords says how an attempt ended: "Approved", "Declined:
// insufficient funds (005)", "Pending".
func resultWords(st payment.TransactionStatus, code codes.Code, message string) string {
	switch st {
	case payment.TxApproved:
		return "Approved"
	case payment.TxPending:
		return "Pending"
	case payment.TxWaiting:
		return "Waiting for the payer"
	case payment.TxDeclined:
		return declineWords(code, message)
	}
	return "Status " + strconv.Itoa(int(st))
}

// declineWords is "Declined: <the code's meaning> (<code>)"; the spec's own
// meanings that already start with "Declined" are kept as they are.
func declineWords(code codes.Code, message string) string {
	meaning := code.Message()
	if meaning == "" {
		meaning = message
	}
	if meaning == "" {
		return withCode("Declined", code)
	}
	if strings.HasPrefix(meaning, "Declined") {
		return withCode(meaning, code)
	}
	return withCode("Declined: "+lowerFirst(meaning), code)
}

func withCode(s string, code codes.Code) string {
	if code == "" {
		return s
	}
	return s + " (" + string(code) + ")"
}

// lowerFirst lower-cases the first letter unless the word is an acronym
// ("UPI", "CVV") or starts with a digit ("3-D Secure").
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || !unicode.IsUpper(r) {
		return s
	}
	if r2, _ := utf8.DecodeRuneInString(s[n:]); unicode.IsUpper(r2) {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

var methodNames = map[string]string{"card": "Card", "wallet": "Wallet", "qr": "QR code", "upi": "UPI", "alternative": "Alternative method"}

var brandNames = map[card.Brand]string{card.Visa: "Visa", card.Mastercard: "Mastercard", card.Amex: "American Express",
	card.Discover: "Discover", card.JCB: "JCB", card.Diners: "Diners Club", card.UnionPay: "UnionPay", card.Maestro: "Maestro"}

// methodWords names the method, with the card's brand and last four digits
// when a card paid ("Card · Visa ···· 4242").
func methodWords(t *payment.Transaction) string {
	m := methodNames[t.Method]
	if m == "" {
		m = t.Method
	}
	if t.Card != nil && t.Card.Last4 != "" {
		brand := brandNames[t.Card.Brand]
		if brand == "" {
			brand = string(t.Card.Brand)
		}
		return strings.TrimSpace(m + " · " + brand + " ···· " + t.Card.Last4)
	}
	if t.UPIID != "" {
		return m + " · " + t.UPIID
	}
	return m
}

// threeDSWords says what 3-D Secure did on the attempt.
func threeDSWords(t *payment.Transaction) string {
	switch t.ThreeDS {
	case payment.ThreeDSAuthenticated:
		return "Authenticated"
	case payment.ThreeDSFailed:
		return "Failed"
	case payment.ThreeDSTimedOut:
		return "Timed out"
	case payment.ThreeDSChallenge:
		return "Challenge sent to the payer"
	case "":
		if t.Method == "card" {
			return "No challenge"
		}
		return "Not used"
	}
	return t.ThreeDS
}
