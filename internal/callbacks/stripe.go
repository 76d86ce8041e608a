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
// secret can be rolled without losing events. Then:
//
//	payment_intent.succeeded       → Settle approved
//	payment_intent.payment_failed  → Settle declined, code per docs/stripe.md
//	payment_intent.requires_action → nothing to settle (the payer is in the challenge)
//	charge.refunded                → nothing to settle (refunds are recorded when the service makes them)
//	anything else, or an intent without our metadata → acknowledged, ignored
//
// An event settles only the transaction it is bound to (payments.Bind):
// the intent id stored when Stripe first answered, the metadata reference
// and payment request id, the amount and currency charged. Any other is
// acknowledged as ignored, logged with the reason and counted (metric
// UnboundProviderResults, alarm UnboundProviderResultsAlarm).
//
// De-duplication by event id: Settle is an idempotent transition, so an
// event is applied first and its id recorded afterwards (MarkCallbackEvent);
// a replay changes nothing and is answered duplicate. Recording after, not
// before, means a crash in between cannot hide an unprocessed event.

// StripeSignatureHeader is the header Stripe signs events with.
const StripeSignatureHeader = "Stripe-Signature"

// DefaultStripeTolerance is Stripe's own default for the timestamp check.
const DefaultStripeTolerance = 5 * time.Minute

// Settler applies a provider result (payments.Service).
type Settler interface {
	Settle(ctx context.Context, r payments.ProviderResult) (payments.Settled, error)
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
	res, ok := stripeResult(ev)
	if !ok {
		ack.Ignored = true
	} else if res.TransactionID != 0 {
		settler := h.Stripe.Settler
		if settler == nil {
			settler = h.Service
		}
		s, err := settler.Settle(ctx, res)
		switch {
		case errors.Is(err, payments.ErrUnknownTransaction), errors.Is(err, payments.ErrMismatch), errors.Is(err, payments.ErrUnbound):
			// Not a transaction of this stack (a shared test-mode account),
			// or an intent that is not the transaction's (logged and counted
			// by Settle): acknowledge, or Stripe retries it for days.
			ack.Ignored = true
		case err != nil:
			return err // 500: Stripe retries; Settle is idempotent
		default:
			ack.Duplicate, ack.Changed, ack.TransactionID = s.Duplicate, s.Changed, res.TransactionID
		}
	}
	if h.Stripe.Events != nil {
		err := h.Stripe.Events.MarkCallbackEvent(ctx, "stripe:"+ev.ID, h.Now(), stripeEventTTL)
		if errors.Is(err, dynamo.ErrExists) {
			ack.Duplicate, ack.Changed = true, false
		} else if err != nil {
			h.Log.Warn("record Stripe event failed", "event_id", ev.ID, "error", err.Error())
		}
	}
	httpapi.AddLogAttrs(r, slog.String("stripe_event", ev.ID), slog.String("stripe_type", string(ev.Type)),
		slog.Int64("transaction_id", ack.TransactionID), slog.Bool("duplicate", ack.Duplicate), slog.Bool("changed", ack.Changed))
	httpapi.WriteJSON(w, http.StatusOK, ack)
	return nil
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

// stripeResult is the provider result an event stands for; ok is false
// when the event is not one this service acts on. TransactionID 0 means
// "acknowledge, nothing to settle".
func stripeResult(ev sg.Event) (payments.ProviderResult, bool) {
	switch ev.Type {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.requires_action":
	case "charge.refunded":
		return payments.ProviderResult{EventID: ev.ID}, true
	default:
		return payments.ProviderResult{}, false
	}
	if ev.Data == nil {
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
