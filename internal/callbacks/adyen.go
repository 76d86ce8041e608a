package callbacks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/paycore"
)

// Adyen's standard webhooks on POST /callbacks/adyen.
//
// Every item of a delivery carries an HMAC signature (additionalData.
// hmacSignature) made with the endpoint's HMAC key; the reader
// (provider/adyen.Webhook) verifies each, in constant time, against every
// configured key (two during a rotation) and refuses the whole delivery
// when one item fails: 401, nothing applied. Adyen keeps a refused
// delivery in its retry queue.
//
// Each item then goes exactly as a Stripe event does (stripe.go): bound to
// its transaction by its own facts (paycore.Bind and its refund and dispute
// forms), applied by an idempotent transition, its id recorded afterwards
// ("adyen:" + pspReference:eventCode:success). An item that came before
// the answer to the service's own call was stored is answered 503 (Adyen
// delivers it again); anything else that is not this stack's is
// acknowledged as ignored. A delivery is answered 200 with the body
// "[accepted]", which Adyen's webhooks expect within 10 seconds.

// AdyenEventReader verifies and reads a delivery (provider/adyen.Webhook).
type AdyenEventReader interface {
	Read(body []byte) ([]paycore.Event, error)
}

// AdyenWebhook configures Adyen's webhooks on /callbacks/adyen.
type AdyenWebhook struct {
	Reader AdyenEventReader
	// IsSignatureError tells a refused signature from a body that is not a
	// standard notification (both are the sender's fault, answered 401 and
	// 400).
	IsSignatureError func(error) bool
	Events           EventMarker // may be nil
	Settler          Settler     // default: Deps.Service
}

// adyenEventTTL is how long an item id is remembered: Adyen retries a
// webhook it could not deliver for 30 days.
const adyenEventTTL = 31 * 24 * time.Hour

// AdyenPath is the callback address of Adyen's webhooks.
const AdyenPath = "/callbacks/adyen"

// AdyenAccepted is the body Adyen expects of an accepted delivery.
const AdyenAccepted = "[accepted]"

func (h *handler) adyenEvent(w http.ResponseWriter, r *http.Request) error {
	if h.Adyen == nil {
		return errkind.NotFoundErr("No Adyen webhook is configured on this stage.")
	}
	body, err := httpapi.ReadBody(w, r, MaxBody)
	if err != nil {
		return err
	}
	evs, err := h.Adyen.Reader.Read(body)
	if err != nil {
		if h.Adyen.IsSignatureError != nil && h.Adyen.IsSignatureError(err) {
			return errkind.UnauthorizedErr("An item's HMAC signature is invalid; nothing was applied.")
		}
		return errkind.BadInput("The body is not an Adyen standard notification.", "")
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	var changed int
	for _, ev := range evs {
		s, txID, err := h.applyEvent(ctx, ev, connector.Adyen, h.Adyen.Settler)
		switch {
		case errors.Is(err, errIgnored), errors.Is(err, paycore.ErrUnknownTransaction),
			errors.Is(err, paycore.ErrMismatch), errors.Is(err, paycore.ErrUnbound):
			// Not acted on, or not this stack's (logged and counted by the
			// binding): accepted, or Adyen retries it for 30 days.
			httpapi.AddLogAttrs(r, slog.String("adyen_event", ev.ID), slog.String("adyen_type", ev.Type), slog.String("adyen_ignored", err.Error()))
			continue
		case errors.Is(err, paycore.ErrBindLater):
			httpapi.AddLogAttrs(r, slog.String("adyen_event", ev.ID), slog.Bool("bind_later", true))
			e := errkind.UnavailableErr("An item arrived before its payment's answer was stored; send it again.")
			e.RetryAfter = time.Minute
			return e
		case err != nil:
			return err // 500: Adyen delivers again; every change is idempotent
		}
		if s.Changed {
			changed++
		}
		if h.Adyen.Events != nil {
			if err := h.Adyen.Events.MarkCallbackEvent(ctx, "adyen:"+ev.ID, h.Now(), adyenEventTTL); err != nil && !errkind.Is(err, errkind.Exists) {
				h.Log.Warn("record Adyen event failed", "event_id", ev.ID, "error", err.Error())
			}
		}
		httpapi.AddLogAttrs(r, slog.String("adyen_event", ev.ID), slog.String("adyen_type", ev.Type),
			slog.Int64("transaction_id", txID), slog.Bool("changed", s.Changed))
	}
	httpapi.AddLogAttrs(r, slog.Int("adyen_items", len(evs)), slog.Int("adyen_changed", changed))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, AdyenAccepted)
	return nil
}
