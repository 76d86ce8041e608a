package stripe

import (
	"os"
	"regexp"
	"testing"

	sg "github.com/stripe/stripe-go/v83"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

func TestOutcomeOfTable(t *testing.T) {
	redirect := &sg.PaymentIntentNextAction{Type: "redirect_to_url", RedirectToURL: &sg.PaymentIntentNextActionRedirectToURL{URL: "https://acs.example/x"}}
	for _, tc := range []struct {
		status   sg.PaymentIntentStatus
		next     *sg.PaymentIntentNextAction
		lastErr  *sg.Error
		want     provider.Status
		code     codes.Code
		redirect bool
	}{
		{sg.PaymentIntentStatusSucceeded, nil, nil, provider.Approved, "", false},
		{sg.PaymentIntentStatusRequiresCapture, nil, nil, provider.Approved, "", false},
		{sg.PaymentIntentStatusProcessing, nil, nil, provider.Pending, "", false},
		{sg.PaymentIntentStatusRequiresAction, redirect, nil, provider.Pending, "", true},
		// A step the service cannot show stays pending: never declined while
		// Stripe may still complete it (the connector cancels it first).
		{sg.PaymentIntentStatusRequiresAction, &sg.PaymentIntentNextAction{Type: "use_stripe_sdk"}, nil, provider.Pending, "", false},
		{sg.PaymentIntentStatusRequiresPaymentMethod, nil, &sg.Error{Code: "card_declined", DeclineCode: "insufficient_funds"}, provider.Declined, codes.InsufficientFunds, false},
		{sg.PaymentIntentStatusRequiresPaymentMethod, nil, &sg.Error{Code: "payment_intent_authentication_failure"}, provider.Declined, codes.ThreeDSDecline, false},
		{sg.PaymentIntentStatusRequiresPaymentMethod, nil, nil, provider.Declined, codes.DeclinedContactIssuer, false},
		{sg.PaymentIntentStatusRequiresConfirmation, nil, nil, provider.Declined, codes.BankSystemError, false},
		{sg.PaymentIntentStatusCanceled, nil, nil, provider.Declined, codes.TransactionCancelled, false},
	} {
		out := OutcomeOf(&sg.PaymentIntent{ID: "pi_1", Status: tc.status, NextAction: tc.next, LastPaymentError: tc.lastErr})
		if out.Status != tc.want || out.Code != tc.code || out.ProviderRef != "pi_1" || (out.NextAction != nil) != tc.redirect {
			t.Errorf("%s: got %v %q next %v", tc.status, out.Status, out.Code, out.NextAction)
		}
		if out.Status == provider.Declined && out.Message != tc.code.Message() {
			t.Errorf("%s: message %q", tc.status, out.Message)
		}
	}
}

// TestDocsDeclineTable checks docs/stripe.md's decline-code table row by row
// against DeclineCode, and that every mapped code is documented.
func TestDocsDeclineTable(t *testing.T) {
	b, err := os.ReadFile("../../../docs/stripe.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| `(\\d{3})` \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		seen[m[1]] = true
		if got := DeclineCode("", m[1]); got != codes.Code(m[2]) {
			t.Errorf("docs say %s → %s, DeclineCode gives %s", m[1], m[2], got)
		}
	}
	for k := range declineCodes {
		if !seen[k] {
			t.Errorf("decline code %s is not in docs/stripe.md", k)
		}
	}
	if DeclineCode("card_declined", "generic_decline") != codes.DeclinedContactIssuer || DeclineCode("card_declined", "insufficient_funds") != codes.InsufficientFunds {
		t.Error("the issuer's decline_code must win over card_declined, and unknown codes are 999")
	}
}
