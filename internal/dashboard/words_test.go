package dashboard

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/payment"
)

func TestAttemptsInPlainWords(t *testing.T) {
	for _, c := range []struct {
		st   payment.TransactionStatus
		code codes.Code
		want string
	}{
		{payment.TxApproved, "", "Approved"},
		{payment.TxDeclined, codes.InsufficientFunds, "Declined: insufficient funds (005)"},
		{payment.TxDeclined, codes.SecurityCodeIncorrect, "Declined: security code (CVV/PIN) incorrect (006)"},
		{payment.TxDeclined, codes.ThreeDSDecline, "Declined: 3-D Secure system decline (004)"},
		{payment.TxDeclined, codes.AmountAboveMaximum, "Declined: amount above maximum (018)"},
		{payment.TxDeclined, codes.DeclinedContactIssuer, "Declined, contact the card issuer (999)"},
		{payment.TxDeclined, codes.InvalidUPI, "Declined: invalid UPI (038)"},
		{payment.TxPending, "", "Pending"},
	} {
		if got := resultWords(c.st, c.code, c.code.Message()); got != c.want {
			t.Errorf("%d %q: %q, want %q", c.st, c.code, got, c.want)
		}
	}
	tx := &payment.Transaction{Method: "card", Card: &card.Masked{Brand: card.Visa, Last4: "4242"}, ThreeDS: payment.ThreeDSAuthenticated}
	if got := methodWords(tx); got != "Card · Visa ···· 4242" {
		t.Errorf("card method: %q", got)
	}
	if got := threeDSWords(tx); got != "Authenticated" {
		t.Errorf("3-D Secure: %q", got)
	}
	if got := threeDSWords(&payment.Transaction{Method: "card"}); got != "No challenge" {
		t.Errorf("no 3-D Secure: %q", got)
	}
	if got := methodWords(&payment.Transaction{Method: "upi", UPIID: "ann@upi"}); got != "UPI · ann@upi" {
		t.Errorf("UPI: %q", got)
	}
}

func TestAmountHasTheCurrencysDecimals(t *testing.T) {
	for _, c := range []struct{ in, unit, want string }{
		{"12.5", "EUR", "12.50"}, {"1500", "JPY", "1500"}, {"1.23", "KWD", "1.230"}, {"735.300000", "EUR", "735.30"},
		{"0.00000001", "BTC", "0.00000001"}, {"1.005", "EUR", "1.005"}, {"7", "XYZ", "7"},
	} {
		if got := amount(decimal.RequireFromString(c.in), c.unit); got != c.want {
			t.Errorf("amount(%s %s) = %s, want %s", c.in, c.unit, got, c.want)
		}
	}
}

// The page writer escapes every value and never prints a format slip: a
// number keeps its verb, a verb that does not fit its value writes the
// value as escaped text.
func TestPageWriterHasNoFormatSlips(t *testing.T) {
	var p pw
	p.f(`%d|%s|%d|%.1f|%s`, 24, 12, "<b>", 1.25, markup("<i>"))
	if got, want := p.b.String(), "24|12|&lt;b&gt;|1.2|<i>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "24 hours", time.Hour: "1 hour", 15 * time.Minute: "15 minutes", 90 * time.Minute: "90 minutes"} {
		if got := lifetime(d); got != want {
			t.Errorf("lifetime(%v) = %q, want %q", d, got, want)
		}
	}
}
