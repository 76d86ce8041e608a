package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	sg "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/payments"
	"github.com/payreq/payreq/internal/problem"
	"github.com/payreq/payreq/internal/provider"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
)

// Stripe events on POST /callbacks/svcwh.
//
// A request carrying a Stripe-Signature header is a Stripe event. It is
// verified with Stripe's scheme (HMAC-SHA256 of "t.body", timestamp within
// Tolerance either way) against every configured endpoint secret, so a
// secret can be rolled without losing events. Then (docs/stripe.md, "Events
// handled"):
//
//	payment_intent.succeeded        → Settle approved (a success for a declined
//	                                  transaction is voided at once)
//	payment_intent.payment_failed   → Settle declined, code per docs/stripe.md
//	payment_intent.canceled         → Settle declined 012
//	payment_intent.requires_action  → nothing to settle (the payer is in the challenge)
//	refund.created, refund.updated,
//	charge.refund.updated,
//	refund.failed                   → the refund moves (payments.RefundEvent); one
//	                                  made in Stripe's Dashboard is recorded
//	charge.dispute.created, .updated,
//	.closed, .funds_withdrawn,
//	.funds_reinstated               → the dispute is recorded (payments.DisputeEvent)
//	charge.refunded                 → nothing (its refunds' own events carry them)
//	anything else, or an object without our metadata → acknowledged, ignored
//
// An event changes only the transaction it is bound to (payments.Bind and
// its refund and dispute forms): the intent id stored when Stripe first
// answered, the metadata reference and payment request id, the amount and
// currency charged. Any other is acknowledged as ignored, logged with the
// reason and counted (metric UnboundProviderResults, alarm
// UnboundProviderResultsAlarm). An event for a transaction that has no
// intent id yet and is still open (it came before the answer to the
// service's own call was stored) is answered 503 and not recorded: Stripe
// sends it again (for up to three days) and it binds once the id is stored.
//
// De-duplication by event id: every change is an idempotent transition, so
// an event is applied first and its id recorded afterwards
// (MarkCallbackEvent), only when it was answered 2xx; a replay changes
// nothing and is answered duplicate. Recording after, not before, means a
// crash in between cannot hide an unprocessed event.

// StripeSignatureHeader is the header Stripe signs events with.
const StripeSignatureHeader = "Stripe-Signature"

// DefaultStripeTolerance is Stripe's own default for the timestamp check.
const DefaultStripeTolerance = 5 * time.Minute

// Settler applies a provider result (payments.Service).
type Settler interface {
	Settle(ctx context.Context, r payments.ProviderResult) (payments.Settled, error)
}

// AfterSettler applies Stripe's refund and dispute events
// (payments.Service); a Settler that has them is used for them too.
type AfterSettler interface {
	RefundEvent(ctx context.Context, r payments.RefundResult) (payments.Settled, error)
	DisputeEvent(ctx context.Context, r payments.DisputeResult) (payments.Settled, error)
}

// EventMarker records processed event ids (dynamo.Store).
type EventMarker interface {
	MarkCallbackEvent(ctx context.Context, eventID string, now time.Time, ttl time.Duration) error
}

// StripeWebhook configures Stripe events on /callbacks/svcwh.
type StripeWebhook struct {
	Secrets   []string      // whsec_… endpoint secrets; all are accepted (rotation)
	Tolerance time.Duration // default DefaultStripeTolerance
	Events    EventMarker   // may be nil: no duplicate report for events that settle nothing
	Settler   Settler       // default: Deps.Service
}

// stripeEventTTL is how long an event id is remembered: Stripe retries a
// failed delivery for up to three days.
const stripeEventTTL = 4 * 24 * time.Hour

// isStripeEvent reports whether r is for the Stripe hook.
func (h *handler) isStripeEvent(r *http.Request) bool {
	return h.Stripe != nil && r.Method == http.MethodPost && r.URL.Path == "/callbacks/svcwh" && r.Header.Get(StripeSignatureHeader) != ""
}

// StripeAck is the answer to a Stripe event.
type StripeAck struct {
	Received      bool   `json:"received"`
	EventID       string `json:"eventId"`
	Ignored       bool   `json:"ignored,omitempty"`
	Duplicate     bool   `json:"duplicate"`
	Changed       bool   `json:"changed"`
	TransactionID int64  `json:"transactionId,omitempty"`
}

func (h *handler) stripeEvent(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return problem.TooLarge(MaxBody)
	}
	ev, err := h.verifyStripe(body, r.Header.Get(StripeSignatureHeader))
	if err != nil {
		return problem.Unauthorized("The " + StripeSignatureHeader + " signature is " + err.Error() + ".")
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	ack := StripeAck{Received: true, EventID: ev.ID}
	s, txID, err := h.applyStripe(ctx, ev)
	switch {
	case errors.Is(err, errIgnored):
		ack.Ignored = true
	case errors.Is(err, payments.ErrBindLater):
		// Before the answer to the service's own call was stored: not
		// recorded, so Stripe's retry finds it unprocessed and binds it.
		httpapi.AddLogAttrs(r, slog.String("stripe_event", ev.ID), slog.String("stripe_type", string(ev.Type)), slog.Bool("bind_later", true))
		e := errkind.UnavailableErr("The event arrived before its payment's answer was stored; send it again.")
		e.RetryAfter = time.Minute
		return e
	case errors.Is(err, payments.ErrUnknownTransaction), errors.Is(err, payments.ErrMismatch), errors.Is(err, payments.ErrUnbound):
		// Not a transaction of this stack (a shared test-mode account),
		// or an object that is not the transaction's (logged and counted):
		// acknowledge, or Stripe retries it for days.
		ack.Ignored = true
	case err != nil:
		return err // 500: Stripe retries; every change is idempotent
	default:
		ack.Duplicate, ack.Changed, ack.TransactionID = s.Duplicate, s.Changed, txID
	}
	if h.Stripe.Events != nil {
		err := h.Stripe.Events.MarkCallbackEvent(ctx, "stripe:"+ev.ID, h.Now(), stripeEventTTL)
		if errors.Is(err, dynamo.ErrExists) && !ack.Changed {
			// Recorded by an earlier delivery. One that changed something
			// says so even when a concurrent duplicate recorded it first.
			ack.Duplicate = true
		} else if err != nil && !errors.Is(err, dynamo.ErrExists) {
			h.Log.Warn("record Stripe event failed", "event_id", ev.ID, "error", err.Error())
		}
	}
	httpapi.AddLogAttrs(r, slog.String("stripe_event", ev.ID), slog.String("stripe_type", string(ev.Type)),
		slog.Int64("transaction_id", ack.TransactionID), slog.Bool("duplicate", ack.Duplicate), slog.Bool("changed", ack.Changed))
	httpapi.WriteJSON(w, http.StatusOK, ack)
	return nil
}

// errIgnored: an event this service does not act on (acknowledged).
var errIgnored = errors.New("event ignored")

// applyStripe applies event ev; errIgnored for one not acted on. txID is
// the transaction it concerned (0: none).
func (h *handler) applyStripe(ctx context.Context, ev sg.Event) (payments.Settled, int64, error) {
	if ev.Data == nil {
		return payments.Settled{}, 0, errIgnored
	}
	typ := string(ev.Type)
	switch {
	case strings.HasPrefix(typ, "payment_intent."):
		res, ok := stripeResult(ev)
		if !ok {
			return payments.Settled{}, 0, errIgnored
		}
		if res.TransactionID == 0 {
			return payments.Settled{}, 0, nil // acknowledged, nothing to settle
		}
		settler := h.Stripe.Settler
		if settler == nil {
			settler = h.Service
		}
		s, err := settler.Settle(ctx, res)
		return s, res.TransactionID, err
	case typ == "refund.created" || typ == "refund.updated" || typ == "refund.failed" || typ == "charge.refund.updated":
		res, ok := refundResult(ev)
		if !ok {
			return payments.Settled{}, 0, errIgnored
		}
		s, err := h.afterSettler().RefundEvent(ctx, res)
		return s, txOf(s), err
	case strings.HasPrefix(typ, "charge.dispute."):
		res, ok := disputeResult(ev)
		if !ok {
			return payments.Settled{}, 0, errIgnored
		}
		s, err := h.afterSettler().DisputeEvent(ctx, res)
		return s, txOf(s), err
	case typ == "charge.refunded":
		return payments.Settled{}, 0, nil // its refunds' own events carry the change
	}
	return payments.Settled{}, 0, errIgnored
}

func (h *handler) afterSettler() AfterSettler {
	if a, ok := h.Stripe.Settler.(AfterSettler); ok {
		return a
	}
	return h.Service
}

func txOf(s payments.Settled) int64 {
	if s.Transaction == nil {
		return 0
	}
	return s.Transaction.ID
}

// verifyStripe checks the signature against each secret. Stripe's library
// only bounds the age of the timestamp; a timestamp from the future beyond
// the tolerance is refused here too.
func (h *handler) verifyStripe(body []byte, header string) (sg.Event, error) {
	tol := h.Stripe.Tolerance
	if tol <= 0 {
		tol = DefaultStripeTolerance
	}
	if ts, ok := stripeTimestamp(header); ok && time.Unix(ts, 0).Sub(h.Now()) > tol {
		return sg.Event{}, errors.New("from the future")
	}
	stale := false
	for _, secret := range h.Stripe.Secrets {
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
func stripeResult(ev sg.Event) (payments.ProviderResult, bool) {
	switch ev.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.requires_action", "payment_intent.canceled":
	default:
		return payments.ProviderResult{}, false
	}
	var pi sg.PaymentIntent
	if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
		return payments.ProviderResult{}, false
	}
	txID, err := strconv.ParseInt(pi.Metadata[stripeprov.MetaTransactionID], 10, 64)
	if err != nil || txID <= 0 || pi.Metadata[stripeprov.MetaClosed] != "" {
		return payments.ProviderResult{}, false
	}
	if ev.Type == "payment_intent.requires_action" {
		return payments.ProviderResult{EventID: ev.ID}, true
	}
	out := stripeprov.OutcomeOf(&pi)
	if !out.Status.Final() {
		return payments.ProviderResult{EventID: ev.ID}, true
	}
	// The event binds to the transaction only by the intent's own facts
	// (payments.Bind): its id, reference, payment request, amount and
	// currency; the transaction id in metadata only says where to look.
	r := payments.ProviderResult{EventID: ev.ID, TransactionID: txID, Status: out.Status, Code: out.Code,
		Message: out.Message, ProviderRef: pi.ID, Facts: stripeprov.FactsOf(&pi)}
	if out.Status == provider.Declined && out.Code == "004" {
		r.ThreeDS = payment.ThreeDSFailed
	}
	return r, true
}

// refundResult reads a refund event (refund.*, charge.refund.updated: the
// object is a Refund). A void's refund (the service's refund id "void_…")
// is not a merchant refund: ignored.
func refundResult(ev sg.Event) (payments.RefundResult, bool) {
	var re sg.Refund
	if err := json.Unmarshal(ev.Data.Raw, &re); err != nil || re.ID == "" || re.PaymentIntent == nil || re.PaymentIntent.ID == "" {
		return payments.RefundResult{}, false
	}
	if strings.HasPrefix(re.Metadata[stripeprov.MetaRefundID], "void_") {
		return payments.RefundResult{}, false
	}
	amount, unit, ok := stripeprov.FromMinorUnits(re.Amount, string(re.Currency))
	if !ok {
		return payments.RefundResult{}, false
	}
	txID, _ := strconv.ParseInt(re.Metadata[stripeprov.MetaTransactionID], 10, 64)
	if txID <= 0 {
		txID, _ = strconv.ParseInt(strings.TrimPrefix(re.Metadata[stripeprov.MetaReference], "ptx_"), 10, 64)
	}
	return payments.RefundResult{EventID: ev.ID, RefundRef: re.ID, ChargeRef: re.PaymentIntent.ID,
		RefundID: re.Metadata[stripeprov.MetaRefundID], TransactionID: max(txID, 0), Status: string(re.Status),
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
func disputeResult(ev sg.Event) (payments.DisputeResult, bool) {
	typ, ok := disputeEvents[string(ev.Type)]
	if !ok {
		return payments.DisputeResult{}, false
	}
	var d sg.Dispute
	if err := json.Unmarshal(ev.Data.Raw, &d); err != nil || d.ID == "" || d.PaymentIntent == nil || d.PaymentIntent.ID == "" {
		return payments.DisputeResult{}, false
	}
	amount, unit, ok := stripeprov.FromMinorUnits(d.Amount, string(d.Currency))
	if !ok {
		return payments.DisputeResult{}, false
	}
	r := payments.DisputeResult{EventID: ev.ID, EventType: typ, EventAt: time.Unix(ev.Created, 0).UTC(), Live: ev.Livemode,
		DisputeID: d.ID, ChargeRef: d.PaymentIntent.ID, Status: string(d.Status), Reason: string(d.Reason),
		Amount: amount, Unit: unit}
	if d.EvidenceDetails != nil && d.EvidenceDetails.DueBy > 0 {
		r.EvidenceDueBy = time.Unix(d.EvidenceDetails.DueBy, 0).UTC()
	}
	return r, true
}
