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

// Refusals is Adyen's "Refusal reasons" page, row by row: refusalReasonCode,
// refusalReason, and the spec's code for it. A code missing here is 999 for
// Refused and 001 for Error.
var Refusals = []struct {
	Code   string // refusalReasonCode
	Reason string // refusalReason
	Spec   codes.Code
}{
	{"0", "Unknown", codes.BankSystemError}, // resultCode Error
	{"2", "Refused", codes.DeclinedContactIssuer},
	{"3", "Referral", codes.DeclinedContactIssuer},
	{"4", "Acquirer Error", codes.BankSystemError},
	{"5", "Blocked Card", codes.CardRestricted},
	{"6", "Expired Card", codes.InvalidOrExpiredCard},
	{"7", "Invalid Amount", codes.InvalidAmount},
	{"8", "Invalid Card Number", codes.InvalidOrExpiredCard},
	{"9", "Issuer Unavailable", codes.BankSystemError},
	{"10", "Not supported", codes.UnsupportedCardType},
	{"11", "3D Not Authenticated", codes.ThreeDSDecline},
	{"12", "Not enough balance", codes.InsufficientFunds},
	{"14", "Acquirer Fraud", codes.RiskBlocked},
	{"15", "Cancelled", codes.TransactionCancelled},
	{"16", "Shopper Cancelled", codes.TransactionCancelled},
	{"17", "Invalid Pin", codes.SecurityCodeIncorrect},
	{"18", "Pin tries exceeded", codes.SecurityCodeIncorrect},
	{"19", "Pin validation not possible", codes.SecurityCodeIncorrect},
	{"20", "FRAUD", codes.RiskBlocked}, // Adyen's risk system
	{"21", "Not Submitted", codes.BankSystemError},
	{"22", "FRAUD-CANCELLED", codes.RiskBlocked},
	{"23", "Transaction Not Permitted", codes.CardRestricted},
	{"24", "CVC Declined", codes.SecurityCodeIncorrect},
	{"25", "Restricted Card", codes.CardRestricted},
	{"26", "Revocation Of Auth", codes.CardRestricted},
	{"27", "Declined Non Generic", codes.DeclinedContactIssuer},
	{"28", "Withdrawal amount exceeded", codes.InsufficientFunds},
	{"29", "Withdrawal count exceeded", codes.InsufficientFunds},
	{"31", "Issuer Suspected Fraud", codes.RiskBlocked},
	{"32", "AVS Declined", codes.DeclinedContactIssuer},
	{"33", "Card requires online pin", codes.DeclinedContactIssuer},
	{"34", "No checking account available on Card", codes.UnsupportedCardType},
	{"35", "No savings account available on Card", codes.UnsupportedCardType},
	{"36", "Mobile pin required", codes.DeclinedContactIssuer},
	{"37", "Contactless fallback", codes.DeclinedContactIssuer},
	{"38", "Authentication required", codes.ThreeDSDecline},
	{"39", "RReq not received from DS", codes.ThreeDSDecline},
	{"40", "Current AID is in Penalty Box", codes.BankSystemError},
	{"41", "CVM Required Restart Payment", codes.DeclinedContactIssuer},
	{"42", "3DS Authentication Error", codes.ThreeDSDecline},
	{"46", "Transaction blocked by Adyen to prevent excessive retry fees", codes.RiskBlocked},
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
