package stripe

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	sg "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// Stripe's webhook events (docs/stripe.md, "Events handled"), read for the
// callbacks function: Webhook verifies a delivery's Stripe-Signature and
// says what the event means for the service, as a paycore.Event:
//
//	payment_intent.succeeded        → a final result, approved
//	payment_intent.payment_failed   → a final result, declined with the code per docs/stripe.md
//	payment_intent.canceled         → a final result, declined 012
//	payment_intent.requires_action  → nothing to settle (the payer is in the challenge)
//	refund.created, refund.updated,
//	charge.refund.updated,
//	refund.failed                   → a refund result (a void's refund is ignored)
//	charge.dispute.created, .updated,
//	.closed, .funds_withdrawn,
//	.funds_reinstated               → a dispute result
//	charge.refunded                 → nothing (its refunds' own events carry them)
//	anything else, or an object without our metadata → ignored

// DefaultTolerance is Stripe's own default for the timestamp check.
const DefaultTolerance = 5 * time.Minute

// Webhook reads Stripe's signed event deliveries.
type Webhook struct {
	Secrets   []string      // whsec_… endpoint secrets; all are accepted (rotation)
	Tolerance time.Duration // default DefaultTolerance
}

// Read verifies body's signature (the Stripe-Signature header's value)
// against every secret and reads the event. Its error, when the signature
// is refused, says why in a few words ("invalid", "too old", "from the
// future").
func (w Webhook) Read(body []byte, signature string, now time.Time) (paycore.Event, error) {
	ev, err := w.verify(body, signature, now)
	if err != nil {
		return paycore.Event{}, err
	}
	out := paycore.Event{ID: ev.ID, Type: string(ev.Type), Ignored: true}
	if ev.Data == nil {
		return out, nil
	}
	typ := string(ev.Type)
	switch {
	case strings.HasPrefix(typ, "payment_intent."):
		if res, ok := stripeResult(ev); ok {
			out.Ignored = false
			if res.TransactionID != 0 {
				out.Payment = &res
			}
		}
	case typ == "refund.created" || typ == "refund.updated" || typ == "refund.failed" || typ == "charge.refund.updated":
		if res, ok := refundResult(ev); ok {
			out.Ignored, out.Refund = false, &res
		}
	case strings.HasPrefix(typ, "charge.dispute."):
		if res, ok := disputeResult(ev); ok {
			out.Ignored, out.Dispute = false, &res
		}
	case typ == "charge.refunded":
		out.Ignored = false // its refunds' own events carry the change
	}
	return out, nil
}

// verify checks the signature against each secret. Stripe's library only
// bounds the age of the timestamp; a timestamp from the future beyond the
// tolerance is refused here too.
func (w Webhook) verify(body []byte, header string, now time.Time) (sg.Event, error) {
	tol := w.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	if ts, ok := stripeTimestamp(header); ok && time.Unix(ts, 0).Sub(now) > tol {
		return sg.Event{}, errors.New("from the future")
	}
	stale := false
	for _, secret := range w.Secrets {
		ev, err := webhook.ConstructEventWithOptions(body, header, secret,
			webhook.ConstructEventOptions{Tolerance: tol, IgnoreAPIVersionMismatch: true})
		if err == nil {
			return ev, nil
		}
		stale = stale || errors.Is(err, webhook.ErrTooOld)
	}
	if stale {
		return sg.Event{}, errors.New("too old")
	}
	return sg.Event{}, errors.New("invalid")
}

func stripeTimestamp(header string) (int64, bool) {
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
			ts, err := strconv.ParseInt(v, 10, 64)
			return ts, err == nil
		}
	}
	return 0, false
}

// stripeResult is the provider result a payment_intent event stands for;
// ok is false when the event is not one this service acts on.
// TransactionID 0 means "acknowledge, nothing to settle".
func stripeResult(ev sg.Event) (paycore.ProviderResult, bool) {
	switch ev.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.requires_action", "payment_intent.canceled":
	default:
		return paycore.ProviderResult{}, false
	}
	var pi sg.PaymentIntent
	if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
		return paycore.ProviderResult{}, false
	}
	txID, err := strconv.ParseInt(pi.Metadata[MetaTransactionID], 10, 64)
	if err != nil || txID <= 0 || pi.Metadata[MetaClosed] != "" {
		return paycore.ProviderResult{}, false
	}
	if ev.Type == "payment_intent.requires_action" {
		return paycore.ProviderResult{EventID: ev.ID}, true
	}
	out := OutcomeOf(&pi)
	if !out.Status.Final() {
		return paycore.ProviderResult{EventID: ev.ID}, true
	}
	// The event binds to the transaction only by the intent's own facts
	// (paycore.Bind): its id, reference, payment request, amount and
	// currency; the transaction id in metadata only says where to look.
	r := paycore.ProviderResult{EventID: ev.ID, TransactionID: txID, Status: out.Status, Code: out.Code,
		Message: out.Message, ProviderRef: pi.ID, Facts: FactsOf(&pi)}
	if out.Status == provider.Declined && out.Code == "004" {
		r.ThreeDS = payment.ThreeDSFailed
	}
	return r, true
}

// refundResult reads a refund event (refund.*, charge.refund.updated: the
// object is a Refund). A void's refund (the service's refund id "void_…")
// is not a merchant refund: ignored.
func refundResult(ev sg.Event) (paycore.RefundResult, bool) {
	var re sg.Refund
	if err := json.Unmarshal(ev.Data.Raw, &re); err != nil || re.ID == "" || re.PaymentIntent == nil || re.PaymentIntent.ID == "" {
		return paycore.RefundResult{}, false
	}
	if strings.HasPrefix(re.Metadata[MetaRefundID], "void_") {
		return paycore.RefundResult{}, false
	}
	amount, unit, ok := FromMinorUnits(re.Amount, string(re.Currency))
	if !ok {
		return paycore.RefundResult{}, false
	}
	txID, _ := strconv.ParseInt(re.Metadata[MetaTransactionID], 10, 64)
	if txID <= 0 {
		txID, _ = strconv.ParseInt(strings.TrimPrefix(re.Metadata[MetaReference], "ptx_"), 10, 64)
	}
	return paycore.RefundResult{EventID: ev.ID, RefundRef: re.ID, ChargeRef: re.PaymentIntent.ID,
		RefundID: re.Metadata[MetaRefundID], TransactionID: max(txID, 0), Status: string(re.Status),
		FailureReason: string(re.FailureReason), Amount: amount, Unit: unit}, true
}

// disputeEvents maps Stripe's dispute events to the merchant's.
var disputeEvents = map[string]string{
	"charge.dispute.created":          payment.EventDisputeCreated,
	"charge.dispute.updated":          payment.EventDisputeUpdated,
	"charge.dispute.closed":           payment.EventDisputeClosed,
	"charge.dispute.funds_withdrawn":  payment.EventDisputeFundsWithdrawn,
	"charge.dispute.funds_reinstated": payment.EventDisputeFundsReinstated,
}

// disputeResult reads a dispute event (the object is a Dispute). A dispute
// of a charge made without a PaymentIntent is not the service's: ignored.
func disputeResult(ev sg.Event) (paycore.DisputeResult, bool) {
	typ, ok := disputeEvents[string(ev.Type)]
	if !ok {
		return paycore.DisputeResult{}, false
	}
	var d sg.Dispute
	if err := json.Unmarshal(ev.Data.Raw, &d); err != nil || d.ID == "" || d.PaymentIntent == nil || d.PaymentIntent.ID == "" {
		return paycore.DisputeResult{}, false
	}
	amount, unit, ok := FromMinorUnits(d.Amount, string(d.Currency))
	if !ok {
		return paycore.DisputeResult{}, false
	}
	r := paycore.DisputeResult{EventID: ev.ID, EventType: typ, EventAt: time.Unix(ev.Created, 0).UTC(), Live: ev.Livemode,
		DisputeID: d.ID, ChargeRef: d.PaymentIntent.ID, Status: string(d.Status), Reason: string(d.Reason),
		Amount: amount, Unit: unit}
	if d.EvidenceDetails != nil && d.EvidenceDetails.DueBy > 0 {
		r.EvidenceDueBy = time.Unix(d.EvidenceDetails.DueBy, 0).UTC()
	}
	return r, true
}
