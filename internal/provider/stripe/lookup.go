package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	sg "github.com/stripe/stripe-go/v83"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// Finding what a charge became (docs/stripe.md, "After the first answer").
//
// A charge's intent is created under the Idempotency-Key of its reference.
// Stripe saves the first result of a key once its endpoint began
// executing, errors and 500s included, and answers every later request
// with that key with it (docs.stripe.com/api/idempotent_requests). So when
// Lookup's close request is refused as idempotency_error, the key holds a
// finished result: an intent it created (approved, declined, waiting), or
// an error that created none (a saved 500 may have created the intent or
// not: docs.stripe.com/error-low-level, "Server errors"). Which one is
// decided by finding the intent:
//
//  1. by its id when the service stored one (one read, consistent);
//  2. by search on its metadata (cheap, but eventually consistent, up to
//     about a minute, and not offered in every country: India);
//  3. by listing the intents created since the attempt began and reading
//     their metadata. Lists are not subject to search's delay
//     (docs.stripe.com/search, "Data freshness": read-after-write flows
//     use the list APIs). A complete list without the reference proves
//     that the key's saved result created nothing: the charge is
//     resolved as never made, and no later request with the key can make
//     it while Stripe remembers the key (at least 24 hours).
//
// A list is bounded (MaxListed intents per lookup); an account that created
// more intents since the attempt began leaves the charge unknown
// (ErrNotYetVisible) until search finds it.

// MaxListed bounds the intents one lookup lists (10 pages of 100).
const MaxListed = 1000

// Clock skew allowed between the service's clock and Stripe's when
// listing intents created since an attempt began, and the part of the
// window the charge itself takes (its call and stripe-go's retry, under
// the payment's 30 s lease): listed first.
const (
	listSkew  = time.Minute
	listFirst = 3 * time.Minute
)

// ErrInFlight: a request with the reference's key is still executing at
// Stripe (409); ask again later.
var ErrInFlight = errors.New("stripe: a request with this reference's Idempotency-Key is still executing")

// LookupCharge is Lookup with what the service stored of the charge
// (provider.ChargeLooker): an intent id is read directly; otherwise the
// reference is looked up, and a key Stripe saved an error for is resolved
// by listing (above).
func (p *Provider) LookupCharge(ctx context.Context, q provider.LookupQuery) (provider.Outcome, error) {
	if err := checkRef(q.Reference); err != nil {
		return provider.Outcome{}, err
	}
	if q.ProviderRef != "" {
		pi, err := p.retrieve(ctx, q.ProviderRef)
		if err == nil {
			return withFacts(pi), nil
		}
		if !isNotFound(err) {
			return provider.Outcome{}, err
		}
		// An id Stripe does not know (another account, a test clock):
		// look the reference up as if none was stored.
	}
	params := &sg.PaymentIntentCreateParams{
		Amount: sg.Int64(closeAmountMinor), Currency: sg.String(closeCurrency),
		PaymentMethodTypes: []*string{sg.String("card")},
		Metadata:           map[string]string{MetaReference: q.Reference, MetaClosed: "1"},
		Description:        sg.String("payreq: reference closed unused, never confirmed"),
	}
	params.SetIdempotencyKey(p.chargeKey(q.Reference))
	var pi *sg.PaymentIntent
	err := p.do(ctx, func(ctx context.Context) (err error) { pi, err = p.c.V1PaymentIntents.Create(ctx, params); return })
	if err == nil {
		// Stripe accepted these parameters under the key, so no charge used
		// it (a charge's parameters differ): the key now belongs to this
		// inert intent, fresh or replayed from an earlier Lookup.
		p.cancel(ctx, pi.ID, q.Reference)
		return provider.Outcome{}, provider.ErrUnknownReference
	}
	var se *sg.Error
	switch {
	case errors.As(err, &se) && se.HTTPStatusCode == http.StatusConflict:
		return provider.Outcome{}, fmt.Errorf("%w: %s", ErrInFlight, redact(err))
	case errors.As(err, &se) && se.Type == sg.ErrorTypeIdempotency:
		return p.findUsed(ctx, q.Reference, q.Since, false)
	case errors.Is(err, provider.ErrNotProcessed):
		return provider.Outcome{}, err
	}
	return provider.Outcome{}, fmt.Errorf("stripe: close reference: %w", redact(err))
}

var _ provider.ChargeLooker = (*Provider)(nil)

func isNotFound(err error) bool {
	var se *sg.Error
	return errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound
}

func (p *Provider) retrieve(ctx context.Context, id string) (*sg.PaymentIntent, error) {
	var pi *sg.PaymentIntent
	err := p.do(ctx, func(ctx context.Context) (err error) {
		pi, err = p.c.V1PaymentIntents.Retrieve(ctx, id, &sg.PaymentIntentRetrieveParams{})
		return
	})
	if err != nil {
		return nil, fmt.Errorf("stripe: retrieve payment intent: %w", redact(err))
	}
	return pi, nil
}

// findUsed finds the intent of a reference whose key holds a saved result:
// by search, then by listing from since. A closed reference is
// ErrUnknownReference (a 012 decline for a charge); a key whose saved
// result created no intent is ErrUnknownReference (a 001 decline for a
// charge: nothing was charged).
func (p *Provider) findUsed(ctx context.Context, reference string, since time.Time, forCharge bool) (provider.Outcome, error) {
	out, err := p.find(ctx, reference, forCharge)
	switch {
	case err == nil, errors.Is(err, provider.ErrUnknownReference):
		return out, err
	case errors.Is(err, provider.ErrNotProcessed):
		return out, err // rate limited: the list would be too
	}
	// Not searchable yet, or search is not offered: list.
	var found *sg.PaymentIntent
	complete := false
	err = p.do(ctx, func(ctx context.Context) (err error) {
		found, complete, err = p.listFor(ctx, reference, since)
		return
	})
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("stripe: list payment intents: %w", redact(err))
	}
	if found != nil {
		if found.Metadata[MetaClosed] == "1" {
			if forCharge {
				return provider.Final(provider.Declined, codes.TransactionCancelled, found.ID), nil
			}
			return provider.Outcome{}, provider.ErrUnknownReference
		}
		p.savedErrorsResolved.Add(1)
		return withFacts(found), nil
	}
	if !complete {
		return provider.Outcome{}, ErrNotYetVisible
	}
	p.savedErrorsResolved.Add(1)
	if forCharge {
		return provider.Final(provider.Declined, codes.BankSystemError, ""), nil
	}
	return provider.Outcome{}, provider.ErrUnknownReference
}

// listFor lists the intents created since the attempt began (first the
// minutes its charge takes, then the rest up to now) and returns the one
// of reference; complete says every intent of the window was read.
func (p *Provider) listFor(ctx context.Context, reference string, since time.Time) (*sg.PaymentIntent, bool, error) {
	now := time.Now()
	if since.IsZero() || since.After(now) {
		since = now.Add(-24 * time.Hour) // unknown start: Stripe keeps a key at least this long
	}
	from := since.Add(-listSkew)
	split := since.Add(listFirst)
	end := now.Add(listSkew)
	first := split
	if end.Before(first) {
		first = end
	}
	windows := [][2]int64{{from.Unix(), first.Unix()}}
	if split.Before(now) {
		windows = append(windows, [2]int64{split.Unix() + 1, end.Unix()})
	}
	read := 0
	for _, w := range windows {
		lp := &sg.PaymentIntentListParams{CreatedRange: &sg.RangeQueryParams{GreaterThanOrEqual: w[0], LesserThanOrEqual: w[1]}}
		lp.Limit = sg.Int64(100)
		for pi, err := range p.c.V1PaymentIntents.List(ctx, lp) {
			if err != nil {
				return nil, false, err
			}
			if pi.Metadata[MetaReference] == reference {
				// The charge's intent, or Lookup's inert one: one key, one
				// saved result, so there is no other.
				return pi, true, nil
			}
			read++
			if read >= MaxListed {
				return nil, false, nil
			}
		}
	}
	return nil, true, nil
}

// SavedErrorsResolved counts the lookups whose key held a saved result that
// search could not explain and a list resolved (for tests and the bench).
func (p *Provider) SavedErrorsResolved() int64 { return p.savedErrorsResolved.Load() }

// ClosePending cancels the intent of a pending charge (provider.
// PendingCloser): a 3-D Secure challenge or a QR code nobody answered
// within its window, or an intent waiting for a step the service cannot
// show. Stripe allows cancelling an intent in requires_payment_method,
// requires_capture, requires_confirmation, requires_action and, rarely,
// processing; a cancelled intent can never be charged
// (docs.stripe.com/api/payment_intents/cancel). When Stripe refuses
// (the intent already succeeded or failed), the intent's own outcome is
// returned.
func (p *Provider) ClosePending(ctx context.Context, reference, providerRef string) (provider.Outcome, error) {
	if providerRef == "" {
		out, err := p.LookupCharge(ctx, provider.LookupQuery{Reference: reference})
		if err != nil {
			return out, err
		}
		if out.Status != provider.Pending {
			return out, nil
		}
		providerRef = out.ProviderRef
	}
	cp := &sg.PaymentIntentCancelParams{}
	cp.SetIdempotencyKey(p.chargeKey(reference) + ":cancel")
	var pi *sg.PaymentIntent
	err := p.do(ctx, func(ctx context.Context) (err error) {
		pi, err = p.c.V1PaymentIntents.Cancel(ctx, providerRef, cp)
		return
	})
	cancelled := err == nil
	if err != nil {
		var se *sg.Error
		if !errors.As(err, &se) || se.Type != sg.ErrorTypeInvalidRequest {
			return provider.Outcome{}, fmt.Errorf("stripe: cancel payment intent: %w", redact(err))
		}
		// Not cancellable: it ended (or is processing); read what it is.
		if pi, err = p.retrieve(ctx, providerRef); err != nil {
			return provider.Outcome{}, err
		}
	}
	out := withFacts(pi)
	if cancelled && out.Status != provider.Approved && pi.Status != sg.PaymentIntentStatusProcessing {
		// Stripe accepted the cancel: the intent is canceled and can never
		// charge (whatever status a stateless mock echoes back).
		out.Status, out.Code = provider.Declined, codes.AuthenticationTimeout
		out.Message = provider.Message(provider.Declined, codes.AuthenticationTimeout)
		out.NextAction, out.Closable = nil, false
	}
	return out, nil
}

var _ provider.PendingCloser = (*Provider)(nil)

// RefundStatus reads a refund (provider.RefundReader): a refund Stripe
// answered pending is settled by its events; this read is the fallback
// when none arrives.
func (p *Provider) RefundStatus(ctx context.Context, providerRef string) (provider.RefundOutcome, error) {
	var r *sg.Refund
	err := p.do(ctx, func(ctx context.Context) (err error) {
		r, err = p.c.V1Refunds.Retrieve(ctx, providerRef, &sg.RefundRetrieveParams{})
		return
	})
	if err != nil {
		return provider.RefundOutcome{}, fmt.Errorf("stripe: retrieve refund: %w", redact(err))
	}
	return RefundOutcomeOf(r), nil
}

var _ provider.RefundReader = (*Provider)(nil)
