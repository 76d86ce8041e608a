package stripe

import (
	"strconv"
	"strings"

	sg "github.com/stripe/stripe-go/v83"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// OutcomeOf maps a PaymentIntent to the service's outcome. The table is
// docs/stripe.md; TestOutcomeOfTable checks it row by row.
//
//	succeeded                          → 1 approved
//	requires_capture                   → 1 approved (authorised; we never create manual-capture intents)
//	processing                         → 3 pending, settled by webhook
//	requires_action + redirect_to_url  → 3 pending, 3-D Secure redirect
//	requires_action + a QR or app step → 3 pending, nextAction qr (upi_collect for UPI), settled by webhook
//	requires_action, any other action  → 3 pending, no next action: the connector cancels it
//	                                     before declining (Charge), recovery closes it (never
//	                                     declined while it can still succeed)
//	requires_payment_method            → 2 declined, code from last_payment_error (DeclineCode)
//	requires_confirmation              → 2 declined 001 (the confirm never happened)
//	canceled                           → 2 declined 012
func OutcomeOf(pi *sg.PaymentIntent) provider.Outcome {
	switch pi.Status {
	case sg.PaymentIntentStatusSucceeded, sg.PaymentIntentStatusRequiresCapture:
		return provider.Final(provider.Approved, "", pi.ID)
	case sg.PaymentIntentStatusProcessing:
		o := provider.Final(provider.Pending, "", pi.ID)
		o.Message = "Pending: the card network has not answered yet"
		return o
	case sg.PaymentIntentStatusRequiresAction:
		if u := redirectURL(pi); u != "" {
			o := provider.Final(provider.Pending, "", pi.ID)
			o.Message = "Pending: 3-D Secure authentication required"
			o.NextAction = &provider.NextAction{Type: provider.ActionThreeDSRedirect, URL: u, Reference: pi.ID}
			o.Closable = true
			return o
		}
		if a, left := qrAction(pi); a != nil {
			o := provider.Final(provider.Pending, "", pi.ID)
			o.Message = "Pending: waiting for the QR code to be paid"
			if a.Type == provider.ActionUPICollect {
				o.Message = "Pending: waiting for the payer to approve the UPI collect request"
			}
			o.NextAction, o.Window, o.Closable = a, left, true
			return o
		}
		// A step the service cannot show: never a decline while Stripe may
		// still complete it; the intent is cancelled first (Provider.outcome,
		// ClosePending).
		o := provider.Final(provider.Pending, "", pi.ID)
		o.Message = "Pending: the acquirer asks for a step this service cannot show"
		o.Closable = true
		return o
	case sg.PaymentIntentStatusRequiresPaymentMethod:
		var code, decline string
		if e := pi.LastPaymentError; e != nil {
			code, decline = string(e.Code), string(e.DeclineCode)
		}
		return provider.Final(provider.Declined, DeclineCode(code, decline), pi.ID)
	case sg.PaymentIntentStatusRequiresConfirmation:
		return provider.Final(provider.Declined, codes.BankSystemError, pi.ID)
	case sg.PaymentIntentStatusCanceled:
		return provider.Final(provider.Declined, codes.TransactionCancelled, pi.ID)
	}
	return provider.Final(provider.Declined, codes.BankSystemError, pi.ID)
}

func redirectURL(pi *sg.PaymentIntent) string {
	if pi.NextAction == nil || pi.NextAction.RedirectToURL == nil {
		return ""
	}
	return pi.NextAction.RedirectToURL.URL
}

// declineCodes maps Stripe's decline_code (issuer reasons) and error code
// (Stripe's own reasons) to the spec's codes. Anything missing is 999,
// "Declined, contact the card issuer", which is what Stripe advises payers
// for a generic decline.
var declineCodes = map[string]codes.Code{
	// Invalid or expired card.
	"expired_card":                      codes.InvalidOrExpiredCard,
	"incorrect_number":                  codes.InvalidOrExpiredCard,
	"invalid_number":                    codes.InvalidOrExpiredCard,
	"invalid_expiry_month":              codes.InvalidOrExpiredCard,
	"invalid_expiry_year":               codes.InvalidOrExpiredCard,
	"invalid_account":                   codes.InvalidOrExpiredCard,
	"new_account_information_available": codes.InvalidOrExpiredCard,
	// Blocked or restricted.
	"restricted_card":         codes.CardRestricted,
	"lost_card":               codes.CardRestricted,
	"stolen_card":             codes.CardRestricted,
	"pickup_card":             codes.CardRestricted,
	"card_not_supported_here": codes.CardRestricted,
	// 3-D Secure.
	"authentication_required":               codes.ThreeDSDecline,
	"payment_intent_authentication_failure": codes.ThreeDSDecline,
	"authentication_not_handled":            codes.ThreeDSDecline,
	// Funds.
	"insufficient_funds": codes.InsufficientFunds,
	// Security code.
	"incorrect_cvc": codes.SecurityCodeIncorrect,
	"invalid_cvc":   codes.SecurityCodeIncorrect,
	"incorrect_pin": codes.SecurityCodeIncorrect,
	"invalid_pin":   codes.SecurityCodeIncorrect,
	// Risk.
	"fraudulent":         codes.RiskBlocked,
	"merchant_blacklist": codes.RiskBlocked,
	"security_violation": codes.RiskBlocked,
	// Card type and currency.
	"card_not_supported":     codes.UnsupportedCardType,
	"currency_not_supported": codes.CurrencyNotAllowed,
	// Amounts.
	"amount_too_large": codes.AmountAboveMaximum,
	"amount_too_small": codes.AmountBelowMinimum,
	// The acquirer or issuer failed.
	"processing_error":                codes.BankSystemError,
	"issuer_not_available":            codes.BankSystemError,
	"reenter_transaction":             codes.BankSystemError,
	"try_again_later":                 codes.BankSystemError,
	"duplicate_transaction":           codes.BankSystemError,
	"approve_with_id":                 codes.BankSystemError,
	"payment_method_unexpected_state": codes.BankSystemError,
}

// DeclineCode maps a Stripe error code and decline code to a spec code. The
// issuer's decline_code is more precise and wins; "card_declined" alone (or
// "generic_decline", "do_not_honor", ...) is 999.
func DeclineCode(code, declineCode string) codes.Code {
	if c, ok := declineCodes[strings.ToLower(declineCode)]; ok {
		return c
	}
	if c, ok := declineCodes[strings.ToLower(code)]; ok {
		return c
	}
	return codes.DeclinedContactIssuer
}

// FactsOf is what intent pi says of itself: the reference and payment
// request in its metadata and its amount in the service's units (Unit ""
// when Stripe reports a currency the table does not charge, which matches
// no transaction).
func FactsOf(pi *sg.PaymentIntent) *provider.ChargeFacts {
	f := &provider.ChargeFacts{Reference: pi.Metadata[MetaReference]}
	f.PaymentRequestID, _ = strconv.ParseInt(pi.Metadata[MetaPaymentRequestID], 10, 64)
	if amount, unit, ok := FromMinorUnits(pi.Amount, string(pi.Currency)); ok {
		f.Amount, f.Unit = amount, unit
	}
	return f
}

// withFacts is OutcomeOf(pi) carrying pi's facts, for an intent the
// connector found or read back rather than created in this call.
func withFacts(pi *sg.PaymentIntent) provider.Outcome {
	out := OutcomeOf(pi)
	out.Facts = FactsOf(pi)
	return out
}
