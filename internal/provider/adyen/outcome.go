package adyen

import (
	"strings"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// The one table from Adyen's answer to the spec's terms, from Adyen's
// "Result codes" page (docs.adyen.com/online-payments/payment-result-codes,
// and the resultCode description in CheckoutService-v71.json) and its
// "Refusal reasons" page (docs.adyen.com/development-resources/refusal-reasons).
// docs/acquirers.md shows it; TestResultTable checks it row by row.
//
//	Authorised                       → 1 approved
//	Refused, Error                   → 2 declined, code by refusalReasonCode (refusals below);
//	                                   without one: Refused 999, Error 001
//	Cancelled                        → 2 declined 012
//	RedirectShopper (redirect action)→ 3 pending, 3-D Secure redirect (closable)
//	ChallengeShopper, IdentifyShopper→ 3 pending, closable, no next action: the native 3-D Secure 2
//	                                   SDK step is not one the hosted page shows; the connector asks
//	                                   for the redirect flow, so it only meets these when told to
//	PresentToShopper                 → 3 pending, closable (a voucher or code: not a card step)
//	Pending, Received                → 3 pending, settled by the AUTHORISATION webhook
//	PartiallyAuthorised, anything else → 3 pending (never requested; the webhook decides, never
//	                                   a decline while the payment may stand)

// resultCode values, as in PaymentResponse.resultCode.
const (
	ResultAuthorised          = "Authorised"
	ResultRefused             = "Refused"
	ResultError               = "Error"
	ResultCancelled           = "Cancelled"
	ResultRedirectShopper     = "RedirectShopper"
	ResultChallengeShopper    = "ChallengeShopper"
	ResultIdentifyShopper     = "IdentifyShopper"
	ResultPresentToShopper    = "PresentToShopper"
	ResultPending             = "Pending"
	ResultReceived            = "Received"
	ResultPartiallyAuthorised = "PartiallyAuthorised"
)

// Refusals is Adyen's "Refusal reasons" page
// (docs.adyen.com/development-resources/refusal-reasons) row by row:
// refusalReasonCode, refusalReason, and the spec's code for it (the spec
// code is this service's choice; Adyen's page has none). A code missing
// here is 999 for Refused and 001 for Error.
//
// OnPage marks the rows read on Adyen's own pages: codes 2–18 on "Refusal
// reasons", 0–16 again on "Testing result codes and refusal reasons" (its
// "Values for testing refusal reasons" table, with resultCode and
// holderName). The stored copies of both pages end before code 19, so
// rows 19–46 are not confirmed on Adyen's page: their texts are the ones
// other Adyen integrations list, kept because each maps to a code no
// worse than the default 999. docs/acquirers.md marks them.
var Refusals = []struct {
	Code   string // refusalReasonCode
	Reason string // refusalReason
	Spec   codes.Code
	OnPage bool
}{
	{"0", "Unknown", codes.BankSystemError, true}, // resultCode Error
	{"2", "Refused", codes.DeclinedContactIssuer, true},
	{"3", "Referral", codes.DeclinedContactIssuer, true},
	{"4", "Acquirer Error", codes.BankSystemError, true},
	{"5", "Blocked Card", codes.CardRestricted, true},
	{"6", "Expired Card", codes.InvalidOrExpiredCard, true},
	{"7", "Invalid Amount", codes.InvalidAmount, true},
	{"8", "Invalid Card Number", codes.InvalidOrExpiredCard, true},
	{"9", "Issuer Unavailable", codes.BankSystemError, true},
	{"10", "Not supported", codes.UnsupportedCardType, true},
	{"11", "3D Not Authenticated", codes.ThreeDSDecline, true},
	{"12", "Not enough balance", codes.InsufficientFunds, true},
	{"14", "Acquirer Fraud", codes.RiskBlocked, true},
	{"15", "Cancelled", codes.TransactionCancelled, true},
	{"16", "Shopper Cancelled", codes.TransactionCancelled, true},
	{"17", "Invalid Pin", codes.SecurityCodeIncorrect, true},
	{"18", "Pin tries exceeded", codes.SecurityCodeIncorrect, true},
	{"19", "Pin validation not possible", codes.SecurityCodeIncorrect, false},
	{"20", "FRAUD", codes.RiskBlocked, false}, // Adyen's risk system
	{"21", "Not Submitted", codes.BankSystemError, false},
	{"22", "FRAUD-CANCELLED", codes.RiskBlocked, false},
	{"23", "Transaction Not Permitted", codes.CardRestricted, false},
	{"24", "CVC Declined", codes.SecurityCodeIncorrect, false},
	{"25", "Restricted Card", codes.CardRestricted, false},
	{"26", "Revocation Of Auth", codes.CardRestricted, false},
	{"27", "Declined Non Generic", codes.DeclinedContactIssuer, false},
	{"28", "Withdrawal amount exceeded", codes.InsufficientFunds, false},
	{"29", "Withdrawal count exceeded", codes.InsufficientFunds, false},
	{"31", "Issuer Suspected Fraud", codes.RiskBlocked, false},
	{"32", "AVS Declined", codes.DeclinedContactIssuer, false},
	{"33", "Card requires online pin", codes.DeclinedContactIssuer, false},
	{"34", "No checking account available on Card", codes.UnsupportedCardType, false},
	{"35", "No savings account available on Card", codes.UnsupportedCardType, false},
	{"36", "Mobile pin required", codes.DeclinedContactIssuer, false},
	{"37", "Contactless fallback", codes.DeclinedContactIssuer, false},
	{"38", "Authentication required", codes.ThreeDSDecline, false},
	{"39", "RReq not received from DS", codes.ThreeDSDecline, false},
	{"40", "Current AID is in Penalty Box", codes.BankSystemError, false},
	{"41", "CVM Required Restart Payment", codes.DeclinedContactIssuer, false},
	{"42", "3DS Authentication Error", codes.ThreeDSDecline, false},
	{"46", "Transaction blocked by Adyen to prevent excessive retry fees", codes.RiskBlocked, false},
}

var refusals, refusalsByReason = func() (map[string]codes.Code, map[string]codes.Code) {
	byCode, byReason := map[string]codes.Code{}, map[string]codes.Code{}
	for _, r := range Refusals {
		byCode[r.Code], byReason[strings.ToLower(r.Reason)] = r.Spec, r.Spec
	}
	return byCode, byReason
}()

// RefusalCodeOfReason maps a webhook's refusal: its refusalReasonCode when
// it has one, else its reason text (an AUTHORISATION item carries the
// refusalReason in reason); 999 when neither is known.
func RefusalCodeOfReason(refusalReasonCode, reason string) codes.Code {
	if c, ok := refusals[strings.TrimSpace(refusalReasonCode)]; ok {
		return c
	}
	if c, ok := refusalsByReason[strings.ToLower(strings.TrimSpace(reason))]; ok {
		return c
	}
	return codes.DeclinedContactIssuer
}

// RefusalCode maps a refused or failed payment to the spec's code.
func RefusalCode(resultCode, refusalReasonCode string) codes.Code {
	if c, ok := refusals[strings.TrimSpace(refusalReasonCode)]; ok {
		return c
	}
	if resultCode == ResultError {
		return codes.BankSystemError
	}
	return codes.DeclinedContactIssuer
}

// OutcomeOf maps a /payments or /payments/details answer (the table above).
func OutcomeOf(r paymentResponse) provider.Outcome {
	ref := r.PSPReference
	switch r.ResultCode {
	case ResultAuthorised:
		return provider.Final(provider.Approved, "", ref)
	case ResultRefused, ResultError:
		return provider.Final(provider.Declined, RefusalCode(r.ResultCode, r.RefusalReasonCode), ref)
	case ResultCancelled:
		return provider.Final(provider.Declined, codes.TransactionCancelled, ref)
	case ResultRedirectShopper:
		o := provider.Final(provider.Pending, "", ref)
		o.Message = "Pending: 3-D Secure authentication required"
		o.Closable = true
		if a := r.Action; a != nil && a.Type == "redirect" && a.URL != "" && (a.Method == "" || strings.EqualFold(a.Method, "GET")) {
			o.NextAction = &provider.NextAction{Type: provider.ActionThreeDSRedirect, URL: a.URL, Reference: ref}
		}
		return o
	case ResultChallengeShopper, ResultIdentifyShopper, ResultPresentToShopper:
		o := provider.Final(provider.Pending, "", ref)
		o.Message = "Pending: the acquirer asks for a step this service cannot show"
		o.Closable = true
		return o
	}
	o := provider.Final(provider.Pending, "", ref)
	o.Message = "Pending: the acquirer has not given the final result yet"
	return o
}
