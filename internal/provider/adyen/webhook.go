package adyen

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// Adyen's standard webhooks (docs/acquirers.md, "Events handled"), read
// for the callbacks function: Webhook verifies every item's HMAC signature
// (Adyen's "Verify HMAC signatures" page) and says what each means for the
// service, as a paycore.Event:
//
//	AUTHORISATION success=true      → a final result, approved
//	AUTHORISATION success=false     → a final result, declined with the refusal's code (outcome.go)
//	REFUND success=true             → a refund result, succeeded
//	REFUND success=false,
//	REFUND_FAILED                   → a refund result, failed (a void's refund, "void_…", is ignored)
//	CANCEL_OR_REFUND success=true   → a void's result (Refund with Void sends a reversal), succeeded:
//	                                  the authorisation cancelled or the payment refunded
//	                                  (additionalData modification.action), either way returned
//	CANCEL_OR_REFUND success=false  → a void's result, failed
//	NOTIFICATION_OF_CHARGEBACK      → a dispute result, created (needs_response)
//	CHARGEBACK, SECOND_CHARGEBACK   → a dispute result, funds withdrawn (needs_response)
//	CHARGEBACK_REVERSED,
//	PREARBITRATION_WON              → a dispute result, won (funds reinstated, closed)
//	PREARBITRATION_LOST             → a dispute result, lost (closed)
//	CANCELLATION                    → acknowledged, nothing to settle (only Cancel sends one)
//	TECHNICAL_CANCEL                → acknowledged, nothing to settle (only CancelReference
//	                                  sends one; the transaction was declined when Adyen
//	                                  acknowledged the cancel, and a payment it could not
//	                                  cancel comes back as AUTHORISATION and is voided)
//	anything else                   → ignored (acknowledged all the same)
//
// A delivery is refused as a whole when one item's signature fails: Adyen
// then sends it again, and nothing of a forged batch is applied.

// Notification is Adyen's standard webhook body.
type Notification struct {
	Live              string `json:"live"`
	NotificationItems []struct {
		Item NotificationItem `json:"NotificationRequestItem"`
	} `json:"notificationItems"`
}

// NotificationItem is a NotificationRequestItem (Adyen's Webhooks-v1
// description); success and live are the strings "true" and "false".
type NotificationItem struct {
	AdditionalData      map[string]string `json:"additionalData,omitempty"`
	Amount              amount            `json:"amount"`
	EventCode           string            `json:"eventCode"`
	EventDate           string            `json:"eventDate,omitempty"`
	MerchantAccountCode string            `json:"merchantAccountCode"`
	MerchantReference   string            `json:"merchantReference"`
	OriginalReference   string            `json:"originalReference,omitempty"`
	PaymentMethod       string            `json:"paymentMethod,omitempty"`
	PSPReference        string            `json:"pspReference"`
	Reason              string            `json:"reason,omitempty"`
	Success             string            `json:"success"`
}

// SigningString is the string Adyen signs: pspReference,
// originalReference, merchantAccountCode, merchantReference, amount.value,
// amount.currency, eventCode and success, in that order, joined by ":"
// (an absent value is empty).
func (it NotificationItem) SigningString() string {
	return strings.Join([]string{it.PSPReference, it.OriginalReference, it.MerchantAccountCode, it.MerchantReference,
		strconv.FormatInt(it.Amount.Value, 10), it.Amount.Currency, it.EventCode, it.Success}, ":")
}

// Sign computes an item's signature with a hex HMAC key: HMAC-SHA256 of
// SigningString, base64. Adyen's own sender, and the local front, sign so.
func Sign(it NotificationItem, hexKey string) (string, error) {
	key, err := hex.DecodeString(hexKey)
	if err != nil {
		return "", errors.New("adyen: the HMAC key is not hex")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(it.SigningString()))
	return base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// Verify reports whether it carries a valid signature for one of keys
// (several during a key rotation). The comparison is constant-time.
func Verify(it NotificationItem, keys []string) bool {
	got, err := base64.StdEncoding.DecodeString(it.AdditionalData["hmacSignature"])
	if err != nil || len(got) == 0 {
		return false
	}
	ok := false
	for _, k := range keys {
		want, err := Sign(it, k)
		if err != nil {
			continue
		}
		w, _ := base64.StdEncoding.DecodeString(want)
		ok = hmac.Equal(got, w) || ok
	}
	return ok
}

// Webhook reads Adyen's signed standard webhooks.
type Webhook struct {
	HMACKeys []string // hex keys of the webhook endpoint; all are accepted
	// MerchantAccount, when set, is the only account whose items are read.
	MerchantAccount string
}

// ErrSignature: an item of the delivery is not signed with a known key.
var ErrSignature = errors.New("adyen: webhook HMAC signature invalid")

// Read verifies every item of body and turns each into a paycore.Event. It
// returns ErrSignature (nothing read) when one item fails, so the caller
// answers with an error and Adyen delivers again; on success the caller
// answers "[accepted]".
func (w Webhook) Read(body []byte) ([]paycore.Event, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, errors.New("adyen: webhook body is not a standard notification")
	}
	if len(n.NotificationItems) == 0 {
		return nil, errors.New("adyen: webhook without items")
	}
	out := make([]paycore.Event, 0, len(n.NotificationItems))
	for _, ni := range n.NotificationItems {
		if !Verify(ni.Item, w.HMACKeys) {
			return nil, ErrSignature
		}
	}
	for _, ni := range n.NotificationItems {
		it := ni.Item
		if w.MerchantAccount != "" && it.MerchantAccountCode != w.MerchantAccount {
			out = append(out, paycore.Event{ID: eventID(it), Type: it.EventCode, Ignored: true})
			continue
		}
		out = append(out, EventOf(it, n.Live == "true"))
	}
	return out, nil
}

// eventID names an item: Adyen may deliver one item more than once, and
// pspReference with eventCode and success tells the deliveries of one
// event apart from another event of the same payment.
func eventID(it NotificationItem) string {
	return it.PSPReference + ":" + it.EventCode + ":" + it.Success
}

// EventOf turns a verified item into the service's terms (the table above).
func EventOf(it NotificationItem, live bool) paycore.Event {
	ev := paycore.Event{ID: eventID(it), Type: it.EventCode, Ignored: true}
	ok := it.Success == "true"
	switch it.EventCode {
	case "AUTHORISATION":
		if r, bound := authorisation(it, ok); bound {
			ev.Ignored, ev.Payment = false, &r
		}
	case "REFUND", "REFUND_FAILED":
		if r, bound := refund(it, ok && it.EventCode == "REFUND"); bound {
			ev.Ignored, ev.Refund = false, &r
		}
	case "CANCEL_OR_REFUND":
		if r, bound := reversal(it, ok); bound {
			ev.Ignored, ev.Refund = false, &r
		}
	case "NOTIFICATION_OF_CHARGEBACK", "CHARGEBACK", "SECOND_CHARGEBACK", "CHARGEBACK_REVERSED", "PREARBITRATION_WON", "PREARBITRATION_LOST":
		if r, bound := dispute(it, live); bound {
			ev.Ignored, ev.Dispute = false, &r
		}
	case "CANCELLATION":
		ev.Ignored = false // acknowledged; Cancel's caller already treats the payment as closed
	case "TECHNICAL_CANCEL":
		// Acknowledged: CancelReference's caller declined the transaction
		// when Adyen acknowledged the cancel. success=false (nothing to
		// cancel, or captured already) needs nothing either: a payment that
		// exists brings its own AUTHORISATION, voided as a late charge.
		ev.Ignored = false
	}
	return ev
}

// authorisation is the payment result of an AUTHORISATION item. The
// transaction is named by the metadata Charge sent (Adyen returns it in
// additionalData as "metadata.<key>") or by the reference "ptx_<id>"; it
// binds only by the item's own facts (paycore.Bind).
func authorisation(it NotificationItem, success bool) (paycore.ProviderResult, bool) {
	amt, unit, known := FromMinorUnits(it.Amount.Value, it.Amount.Currency)
	if !known || it.PSPReference == "" || it.MerchantReference == "" {
		return paycore.ProviderResult{}, false
	}
	txID, _ := strconv.ParseInt(it.AdditionalData["metadata."+MetaTransactionID], 10, 64)
	if txID <= 0 {
		txID, _ = strconv.ParseInt(strings.TrimPrefix(it.MerchantReference, "ptx_"), 10, 64)
	}
	if txID <= 0 {
		return paycore.ProviderResult{}, false
	}
	prID, _ := strconv.ParseInt(it.AdditionalData["metadata."+MetaPaymentRequestID], 10, 64)
	out := provider.Final(provider.Approved, "", it.PSPReference)
	if !success {
		out = provider.Final(provider.Declined, RefusalCodeOfReason(it.AdditionalData["refusalReasonCode"], it.Reason), it.PSPReference)
	}
	r := paycore.ProviderResult{EventID: eventID(it), TransactionID: txID, Status: out.Status, Code: out.Code,
		Message: out.Message, ProviderRef: it.PSPReference,
		Facts: &provider.ChargeFacts{Reference: it.MerchantReference, PaymentRequestID: prID, Amount: amt, Unit: unit}}
	if out.Status == provider.Declined && out.Code == "004" {
		r.ThreeDS = payment.ThreeDSFailed
	}
	return r, true
}

// refund is the refund result of a REFUND or REFUND_FAILED item: the
// refund's PSP reference, the refunded payment's (originalReference), and
// the service's refund id and transaction (the reference Refund sent,
// RefundReference); it binds to the transaction by the payment's PSP
// reference, currency and amount (paycore's refund binding).
func refund(it NotificationItem, succeeded bool) (paycore.RefundResult, bool) {
	amt, unit, known := FromMinorUnits(it.Amount.Value, it.Amount.Currency)
	if !known || it.PSPReference == "" || it.OriginalReference == "" || strings.HasPrefix(it.MerchantReference, paycore.VoidPrefix) {
		return paycore.RefundResult{}, false
	}
	status, failure := "succeeded", ""
	if !succeeded {
		status, failure = "failed", it.Reason
	}
	refundID, txID := ParseRefundReference(it.MerchantReference)
	return paycore.RefundResult{EventID: eventID(it), TransactionID: txID, RefundRef: it.PSPReference, ChargeRef: it.OriginalReference,
		RefundID: refundID, Status: status, FailureReason: failure, Amount: amt, Unit: unit}, true
}

// reversal is the void result of a CANCEL_OR_REFUND item (Adyen's
// "Reversal" page: pspReference is the reversal's, originalReference the
// payment's): a refund result whose RefundID is the void's, so paycore
// settles the void it asked for (the late charge of the transaction). The
// void is named by the reference reverse sent (merchantReference,
// RefundReference); should Adyen put the payment's own reference there
// instead (Webhooks-v1 says merchantReference "corresponds to the payment
// request assigned to the original payment" for modifications), the void of
// that payment is the one the service sends. A reversal the service did not
// send (made in the Customer Area) names neither and is ignored.
func reversal(it NotificationItem, succeeded bool) (paycore.RefundResult, bool) {
	amt, unit, known := FromMinorUnits(it.Amount.Value, it.Amount.Currency)
	if !known || it.PSPReference == "" || it.OriginalReference == "" {
		return paycore.RefundResult{}, false
	}
	refundID, txID := ParseRefundReference(it.MerchantReference)
	if txID <= 0 || !strings.HasPrefix(refundID, paycore.VoidPrefix) {
		txID, _ = strconv.ParseInt(strings.TrimPrefix(it.MerchantReference, "ptx_"), 10, 64)
		refundID = paycore.VoidPrefix + it.MerchantReference
	}
	if txID <= 0 || refundID != paycore.VoidPrefix+payment.ChargeReference(txID) {
		return paycore.RefundResult{}, false
	}
	status, failure := "succeeded", ""
	if !succeeded {
		status, failure = "failed", it.Reason
	}
	action := it.AdditionalData["modification.action"]
	if action != "cancel" && action != "refund" {
		action = "" // only the two Adyen's page names are recorded
	}
	return paycore.RefundResult{EventID: eventID(it), TransactionID: txID, RefundRef: it.PSPReference, ChargeRef: it.OriginalReference,
		RefundID: refundID, Status: status, FailureReason: failure, Amount: amt, Unit: unit, Action: action}, true
}

// disputeEvents maps Adyen's dispute events to the merchant's event and the
// dispute's status.
var disputeEvents = map[string]struct{ event, status string }{
	"NOTIFICATION_OF_CHARGEBACK": {payment.EventDisputeCreated, payment.DisputeNeedsResponse},
	"CHARGEBACK":                 {payment.EventDisputeFundsWithdrawn, payment.DisputeNeedsResponse},
	"SECOND_CHARGEBACK":          {payment.EventDisputeFundsWithdrawn, payment.DisputeNeedsResponse},
	"CHARGEBACK_REVERSED":        {payment.EventDisputeFundsReinstated, payment.DisputeWon},
	"PREARBITRATION_WON":         {payment.EventDisputeClosed, payment.DisputeWon},
	"PREARBITRATION_LOST":        {payment.EventDisputeClosed, payment.DisputeLost},
}

// dispute is the dispute result of a chargeback item: the disputed payment
// is originalReference; the dispute is named by it too (Adyen's chargeback
// events of one payment form one dispute).
func dispute(it NotificationItem, live bool) (paycore.DisputeResult, bool) {
	d, ok := disputeEvents[it.EventCode]
	amt, unit, known := FromMinorUnits(it.Amount.Value, it.Amount.Currency)
	if !ok || !known || it.OriginalReference == "" {
		return paycore.DisputeResult{}, false
	}
	at, err := time.Parse(time.RFC3339, it.EventDate)
	if err != nil {
		at = time.Time{}
	}
	reason := it.AdditionalData["chargebackReasonCode"]
	if reason == "" {
		reason = it.Reason
	}
	return paycore.DisputeResult{EventID: eventID(it), EventType: d.event, EventAt: at.UTC(), Live: live,
		DisputeID: "adyen_" + it.OriginalReference, ChargeRef: it.OriginalReference, Status: d.status,
		Reason: reason, Amount: amt, Unit: unit}, true
}
