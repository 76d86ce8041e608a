package callbacks

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/paycore"
)

// Stripe events on POST /callbacks/svcwh.
//
// A request carrying a Stripe-Signature header is a Stripe event. Its
// reader (provider/stripe.Webhook) verifies it with Stripe's scheme
// (HMAC-SHA256 of "t.body", timestamp within the tolerance either way)
// against every configured endpoint secret, so a secret can be rolled
// without losing events, and says what it means (docs/stripe.md, "Events
// handled"): a payment result to settle, a refund or a dispute
// (paycore.RefundEvent, DisputeEvent), nothing to settle, or an event the
// service ignores.
//
// An event changes only the transaction it is bound to (paycore.Bind and
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

// Settler applies a provider result (paycore.Service).
type Settler interface {
	Settle(ctx context.Context, r paycore.ProviderResult) (paycore.Settled, error)
}

// AfterSettler applies Stripe's refund and dispute events
// (paycore.Service); a Settler that has them is used for them too.
type AfterSettler interface {
	RefundEvent(ctx context.Context, r paycore.RefundResult) (paycore.Settled, error)
	DisputeEvent(ctx context.Context, r paycore.DisputeResult) (paycore.Settled, error)
}

// EventMarker records processed event ids (dynamo.Store).
type EventMarker interface {
	MarkCallbackEvent(ctx context.Context, eventID string, now time.Time, ttl time.Duration) error
}

// EventReader verifies a Stripe event delivery and reads it
// (provider/stripe.Webhook): its error, when the signature is refused, says
// why in a few words.
type EventReader interface {
	Read(body []byte, signature string, now time.Time) (paycore.Event, error)
}

// StripeWebhook configures Stripe events on /callbacks/svcwh.
type StripeWebhook struct {
	Reader  EventReader // the platform account's endpoint; nil: only Accounts
	Events  EventMarker // may be nil: no duplicate report for events that settle nothing
	Settler Settler     // default: Deps.Service
	// Accounts, when set, reads the events of merchants' own Stripe
	// accounts on StripeAccountPath.
	Accounts AccountHooks
}

// AccountHooks gives the event reader of a merchant's own Stripe account,
// verifying with that account's own signing secret.
type AccountHooks interface {
	// StripeAccountReader: errkind.NotFound when the merchant has no such
	// active Stripe account; any other error is transient.
	StripeAccountReader(ctx context.Context, merchantID, name string) (EventReader, error)
}

// StripeAccountPath is the webhook address of a merchant's own Stripe
// account: each account registers its own at Stripe, signed with its own
// endpoint secret, and its events bind only to the transactions that
// merchant charged through that account.
const StripeAccountPath = "/callbacks/svcwh/{merchantId}/{accountName}"

// stripeEventTTL is how long an event id is remembered: Stripe retries a
// failed delivery for up to three days.
const stripeEventTTL = 4 * 24 * time.Hour

// isStripeEvent reports whether r is for the Stripe hook.
func (h *handler) isStripeEvent(r *http.Request) bool {
	return h.Stripe != nil && h.Stripe.Reader != nil && r.Method == http.MethodPost && r.URL.Path == "/callbacks/svcwh" && r.Header.Get(StripeSignatureHeader) != ""
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
	body, err := httpapi.ReadBody(w, r, MaxBody)
	if err != nil {
		return err
	}
	return h.stripeEventOf(w, r, body, h.Stripe.Reader, connector.Stripe, "stripe:")
}

// stripeAccountEvent takes an event of a merchant's own Stripe account on
// its own address. An address of no active Stripe account answers as an
// event whose signature is invalid: nothing says whether the account
// exists.
func (h *handler) stripeAccountEvent(w http.ResponseWriter, r *http.Request) error {
	body, err := httpapi.ReadBody(w, r, MaxBody)
	if err != nil {
		return err
	}
	merchantID, name := r.PathValue("merchantId"), r.PathValue("accountName")
	invalid := errkind.UnauthorizedErr("The " + StripeSignatureHeader + " signature is invalid.")
	if h.Stripe == nil || h.Stripe.Accounts == nil || !connector.ValidName(name) || r.Header.Get(StripeSignatureHeader) == "" {
		return invalid
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	reader, err := h.Stripe.Accounts.StripeAccountReader(ctx, merchantID, name)
	if errkind.Is(err, errkind.NotFound) {
		return invalid
	}
	if err != nil {
		return err // 500: Stripe retries
	}
	conn := paycore.AccountEventConnector(merchantID, name)
	return h.stripeEventOf(w, r, body, reader, conn, "stripe:"+conn+":")
}

// stripeEventOf verifies and applies body, an event of connector conn read
// by reader; its id is recorded under markPrefix.
func (h *handler) stripeEventOf(w http.ResponseWriter, r *http.Request, body []byte, reader EventReader, conn, markPrefix string) error {
	ev, err := reader.Read(body, r.Header.Get(StripeSignatureHeader), h.Now())
	if err != nil {
		return errkind.UnauthorizedErr("The " + StripeSignatureHeader + " signature is " + err.Error() + ".")
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	ack := StripeAck{Received: true, EventID: ev.ID}
	s, txID, err := h.applyEvent(ctx, ev, conn, h.Stripe.Settler)
	switch {
	case errors.Is(err, errIgnored):
		ack.Ignored = true
	case errors.Is(err, paycore.ErrBindLater):
		// Before the answer to the service's own call was stored: not
		// recorded, so Stripe's retry finds it unprocessed and binds it.
		httpapi.AddLogAttrs(r, slog.String("stripe_event", ev.ID), slog.String("stripe_type", ev.Type), slog.Bool("bind_later", true))
		e := errkind.UnavailableErr("The event arrived before its payment's answer was stored; send it again.")
		e.RetryAfter = time.Minute
		return e
	case errors.Is(err, paycore.ErrUnknownTransaction), errors.Is(err, paycore.ErrMismatch), errors.Is(err, paycore.ErrUnbound):
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
		err := h.Stripe.Events.MarkCallbackEvent(ctx, markPrefix+ev.ID, h.Now(), stripeEventTTL)
		if errkind.Is(err, errkind.Exists) && !ack.Changed {
			// Recorded by an earlier delivery. One that changed something
			// says so even when a concurrent duplicate recorded it first.
			ack.Duplicate = true
		} else if err != nil && !errkind.Is(err, errkind.Exists) {
			h.Log.Warn("record Stripe event failed", "event_id", ev.ID, "error", err.Error())
		}
	}
	httpapi.AddLogAttrs(r, slog.String("stripe_event", ev.ID), slog.String("stripe_type", ev.Type),
		slog.Int64("transaction_id", ack.TransactionID), slog.Bool("duplicate", ack.Duplicate), slog.Bool("changed", ack.Changed))
	httpapi.WriteJSON(w, http.StatusOK, ack)
	return nil
}

// errIgnored: an event this service does not act on (acknowledged).
var errIgnored = errors.New("event ignored")

// applyEvent applies an event of connector name through settler (nil:
// Deps.Service); errIgnored for one not acted on. An acquirer's events
// change only the transactions that acquirer charged (paycore refuses
// the others as unbound).
func (h *handler) applyEvent(ctx context.Context, ev paycore.Event, name string, settler Settler) (paycore.Settled, int64, error) {
	if settler == nil {
		settler = h.Service
	}
	after, ok := settler.(AfterSettler)
	if !ok {
		after = h.Service
	}
	switch {
	case ev.Ignored:
		return paycore.Settled{}, 0, errIgnored
	case ev.Payment != nil:
		r := *ev.Payment
		r.Connector = name
		s, err := settler.Settle(ctx, r)
		return s, r.TransactionID, err
	case ev.Refund != nil:
		r := *ev.Refund
		r.Connector = name
		s, err := after.RefundEvent(ctx, r)
		return s, txOf(s), err
	case ev.Dispute != nil:
		r := *ev.Dispute
		r.Connector = name
		s, err := after.DisputeEvent(ctx, r)
		return s, txOf(s), err
	}
	return paycore.Settled{}, 0, nil // acknowledged, nothing to settle
}

func txOf(s paycore.Settled) int64 {
	if s.Transaction == nil {
		return 0
	}
	return s.Transaction.ID
}
