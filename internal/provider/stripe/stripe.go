// Package stripe is the Stripe acquirer connector: provider.Provider on
// Stripe's PaymentIntents and Refunds APIs, through the official stripe-go
// library. It speaks Stripe's vocabulary inside and the spec's outside
// (OutcomeOf, DeclineCode; the table is docs/stripe.md).
//
// Rules it keeps (see provider.Provider for the contract):
//
//   - Every request that creates something carries an Idempotency-Key
//     derived from the service's own id: the charge's write-ahead reference
//     (ChargeRequest.Reference) or the refund id. Stripe answers a repeated
//     key with the first answer, so a retry never charges twice.
//   - The PaymentIntent of a charge is created with the key
//     Prefix+":"+reference and carries the reference in its metadata.
//     Lookup reuses that key with different parameters: if no charge used it,
//     Stripe creates an inert, unconfirmed intent that Lookup cancels at once,
//     and the key is spent, so a late Charge with the reference is refused by
//     Stripe (idempotency_error) and moves no money; if a charge used it,
//     Stripe refuses Lookup's request and Lookup finds the charge's intent by
//     its metadata (Search API). The residual risks are in docs/stripe.md.
//   - Every call is bounded: the HTTP client has a timeout and stripe-go
//     retries a failed call at most MaxNetworkRetries times with the same key.
//     A rate-limited call (429), which stripe-go does not retry, is retried
//     here with back-off and jitter; one that stays rate limited is
//     provider.ErrNotProcessed (ratelimit.go).
//   - No card number, CVV or secret key is logged or kept: the card goes to
//     Stripe as a PaymentMethod and only its id is used afterwards.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sg "github.com/stripe/stripe-go/v83"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// Metadata keys written on every PaymentIntent and Refund.
const (
	MetaReference        = "payreq_reference"
	MetaTransactionID    = "payreq_transaction_id"
	MetaPaymentRequestID = "payreq_payment_request_id"
	MetaRefundID         = "payreq_refund_id"
	// MetaClosed marks the inert intent Lookup creates to spend a reference
	// that was never charged.
	MetaClosed = "payreq_closed"
)

// Defaults.
const (
	DefaultTimeout    = 8 * time.Second
	DefaultRetries    = 1
	DefaultKeyPrefix  = "payreq"
	closeAmountMinor  = 100 // amount of the inert intent (never confirmed)
	closeCurrency     = "usd"
	maxReferenceBytes = 200
)

// Options configure a Provider.
type Options struct {
	SecretKey string // sk_live_… or sk_test_…; required
	// APIBase overrides https://api.stripe.com (stripe-mock in tests).
	APIBase string
	// HTTPClient carries the timeout of every call; default: a client with
	// Timeout.
	HTTPClient *http.Client
	Timeout    time.Duration // per HTTP call; default DefaultTimeout
	// MaxNetworkRetries of stripe-go, same Idempotency-Key; default 1.
	MaxNetworkRetries *int64
	// KeyPrefix namespaces the idempotency keys, so two stacks sharing a
	// Stripe account cannot collide; default "payreq".
	KeyPrefix string
	// ReturnURL is where Stripe sends the payer back after a 3-D Secure
	// challenge: the service's own challenge page of the transaction, which
	// settles it. returnTo is ChargeRequest.ReturnURL. Nil: no return_url is
	// sent, so a card needing 3-D Secure is declined with 004.
	ReturnURL func(transactionID int64, returnTo string) string
	// Rate-limited calls (HTTP 429) are sent again up to RateLimitRetries
	// times, after a full-jitter back-off from RateLimitBase doubling up to
	// RateLimitCap (or Stripe's Retry-After when longer), for at most
	// RateLimitWait in all and never past the caller's deadline. Defaults:
	// the DefaultRateLimit* constants; a negative RateLimitRetries is 0.
	RateLimitRetries int
	RateLimitBase    time.Duration
	RateLimitCap     time.Duration
	RateLimitWait    time.Duration
}

// Provider implements provider.Provider on Stripe. Safe for concurrent use.
type Provider struct {
	c                   *sg.Client
	opts                Options
	rateLimited         atomic.Int64
	unreachable         atomic.Int64
	savedErrorsResolved atomic.Int64
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Stripe provider.
func New(opts Options) (*Provider, error) {
	if opts.SecretKey == "" {
		return nil, errors.New("stripe: missing secret key")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: opts.Timeout}
	}
	if opts.MaxNetworkRetries == nil {
		r := int64(DefaultRetries)
		opts.MaxNetworkRetries = &r
	}
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = DefaultKeyPrefix
	}
	switch {
	case opts.RateLimitRetries == 0:
		opts.RateLimitRetries = DefaultRateLimitRetries
	case opts.RateLimitRetries < 0:
		opts.RateLimitRetries = 0
	}
	if opts.RateLimitBase <= 0 {
		opts.RateLimitBase = DefaultRateLimitBase
	}
	if opts.RateLimitCap <= 0 {
		opts.RateLimitCap = DefaultRateLimitCap
	}
	if opts.RateLimitWait <= 0 {
		opts.RateLimitWait = DefaultRateLimitWait
	}
	// Every send passes watchTransport, which tells a 429 that proves
	// nothing was processed from one after an unanswered send.
	hc := *opts.HTTPClient
	if hc.Transport == nil {
		hc.Transport = http.DefaultTransport
	}
	hc.Transport = watchTransport{next: hc.Transport}
	telemetry := false
	cfg := &sg.BackendConfig{HTTPClient: &hc, MaxNetworkRetries: opts.MaxNetworkRetries,
		EnableTelemetry: &telemetry, LeveledLogger: &sg.LeveledLogger{Level: sg.LevelError}}
	if opts.APIBase != "" {
		cfg.URL = sg.String(opts.APIBase)
	}
	return &Provider{c: sg.NewClient(opts.SecretKey, sg.WithBackends(sg.NewBackendsWithConfig(cfg))), opts: opts}, nil
}

// references are made of the service's ids; anything else is refused, so
// a reference can be quoted in a search query safely.
var validRef = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func checkRef(ref string) error {
	if ref == "" || len(ref) > maxReferenceBytes || !validRef.MatchString(ref) {
		return fmt.Errorf("%w: reference %q", provider.ErrInvalidRequest, ref)
	}
	return nil
}

// chargeKey is the Idempotency-Key of the PaymentIntent of reference ref.
func (p *Provider) chargeKey(ref string) string { return p.opts.KeyPrefix + ":" + ref }

// Charge creates the PaymentMethod of a card (from its number, or from a
// wallet's Stripe token), then a confirmed PaymentIntent: two Stripe calls
// for an approved card payment. The other methods (UPI, QR, the
// alternatives) are one confirmed PaymentIntent carrying its payment method
// data; it waits for the payer (pending with the QR or app step) until
// Stripe's webhook settles it. The route is the table in methods.go.
func (p *Provider) Charge(ctx context.Context, req provider.ChargeRequest) (provider.Outcome, error) {
	if err := checkRef(req.Reference); err != nil {
		return provider.Outcome{}, err
	}
	pmType, err := routeOf(req.Method, req.Selector, req.Unit)
	if err != nil {
		return provider.Outcome{}, err
	}
	amount, cur, err := MinorUnits(req.Amount, req.Unit)
	if err != nil {
		return provider.Outcome{}, err
	}
	key := p.chargeKey(req.Reference)
	pip := &sg.PaymentIntentCreateParams{
		Amount: sg.Int64(amount), Currency: sg.String(cur),
		PaymentMethodTypes: []*string{sg.String(pmType)},
		Confirm:            sg.Bool(true),
		Metadata:           p.metadata(req.Reference, req.TransactionID, req.PaymentRequestID),
	}
	if req.Email != "" {
		pip.ReceiptEmail = sg.String(req.Email)
	}
	if pmType == "card" {
		pm, out, err := p.cardPaymentMethod(ctx, req, key)
		if err != nil || pm == "" {
			return out, err
		}
		pip.PaymentMethod = sg.String(pm)
		if req.CardholderPresent && p.opts.ReturnURL != nil {
			pip.ReturnURL = sg.String(p.opts.ReturnURL(req.TransactionID, req.ReturnURL))
		} else {
			// Nobody can answer a challenge: mail order, and fail rather than
			// wait when the issuer insists on 3-D Secure (→ 004).
			pip.ErrorOnRequiresAction = sg.Bool(true)
			if !req.CardholderPresent {
				pip.PaymentMethodOptions = &sg.PaymentIntentCreatePaymentMethodOptionsParams{
					Card: &sg.PaymentIntentCreatePaymentMethodOptionsCardParams{MOTO: sg.Bool(true)}}
			}
		}
	} else {
		pip.PaymentMethodData = &sg.PaymentIntentCreatePaymentMethodDataParams{Type: sg.String(pmType)}
		if req.Email != "" {
			// PromptPay and Pix need the payer's e-mail; the others keep it.
			pip.PaymentMethodData.BillingDetails = &sg.PaymentIntentCreatePaymentMethodDataBillingDetailsParams{Email: sg.String(req.Email)}
		}
		if pmType == "wechat_pay" {
			pip.PaymentMethodOptions = &sg.PaymentIntentCreatePaymentMethodOptionsParams{
				WeChatPay: &sg.PaymentIntentCreatePaymentMethodOptionsWeChatPayParams{Client: sg.String("web")}}
		}
		if p.opts.ReturnURL != nil {
			// Apps that redirect (Cash App, Swish, UPI on a phone) bring the
			// payer back to the service's page of the attempt.
			pip.ReturnURL = sg.String(p.opts.ReturnURL(req.TransactionID, req.ReturnURL))
		}
	}
	pip.SetIdempotencyKey(key)
	var pi *sg.PaymentIntent
	err = p.do(ctx, func(ctx context.Context) (err error) { pi, err = p.c.V1PaymentIntents.Create(ctx, pip); return })
	if err != nil {
		var se *sg.Error
		if errors.As(err, &se) && se.Type == sg.ErrorTypeIdempotency {
			// The reference was spent by Lookup, or holds a result Stripe
			// saved (a 500 included): answer with what became of it,
			// charge nothing.
			out, err := p.findUsed(ctx, req.Reference, req.AttemptStart, true)
			if errors.Is(err, provider.ErrNotProcessed) {
				// The search was rate limited, not the charge: the key was
				// used, so the outcome is unknown, never "not processed".
				err = fmt.Errorf("stripe: find the intent of a used key: %s", err.Error())
			}
			return out, err
		}
		if out, ok := cardError(err); ok {
			return out, nil
		}
		if errors.Is(err, provider.ErrNotProcessed) {
			return provider.Outcome{}, err
		}
		if errors.As(err, &se) && se.Type == sg.ErrorTypeInvalidRequest && se.Param == "payment_method" && strings.HasPrefix(req.WalletToken, "pm_") {
			// A wallet PaymentMethod Stripe does not know or will not charge
			// again (unattached ones are single-use): the spec's invalid token.
			return provider.Final(provider.Declined, codes.InvalidToken, ""), nil
		}
		return provider.Outcome{}, fmt.Errorf("stripe: create payment intent: %w", redact(err))
	}
	return p.outcome(ctx, pi, req.CardholderPresent), nil
}

// cardPaymentMethod creates the PaymentMethod of a card payment: from the
// card's number, or from a wallet token (Google Pay or Apple Pay tokenized
// for Stripe, "tok_…"), which Stripe charges as a card. An empty id with a
// nil error is a card Stripe refused before any intent (out says how).
func (p *Provider) cardPaymentMethod(ctx context.Context, req provider.ChargeRequest, key string) (string, provider.Outcome, error) {
	if req.Method == provider.MethodWallet && strings.HasPrefix(req.WalletToken, "pm_") {
		// A card PaymentMethod Stripe.js made from an Apple Pay payment on the
		// hosted page: Stripe holds the card, the intent charges it as is.
		return req.WalletToken, provider.Outcome{}, nil
	}
	cp := &sg.PaymentMethodCreateCardParams{}
	switch {
	case req.Method == provider.MethodWallet && req.WalletToken != "":
		cp.Token = sg.String(req.WalletToken)
	case req.Method == provider.MethodCard && req.Card != nil:
		cp.Number, cp.CVC = sg.String(req.Card.Digits), optional(req.CVV)
		cp.ExpMonth, cp.ExpYear = sg.Int64(int64(req.Card.Expiry.Month)), sg.Int64(int64(req.Card.Expiry.Year))
	default:
		return "", provider.Outcome{}, fmt.Errorf("%w: a %s payment without its card or token", provider.ErrInvalidRequest, req.Method)
	}
	pmp := &sg.PaymentMethodCreateParams{Type: sg.String(string(sg.PaymentMethodTypeCard)), Card: cp}
	pmp.SetIdempotencyKey(key + ":pm")
	var pm *sg.PaymentMethod
	err := p.do(ctx, func(ctx context.Context) (err error) { pm, err = p.c.V1PaymentMethods.Create(ctx, pmp); return })
	if err != nil {
		if out, ok := cardError(err); ok {
			return "", out, nil // refused before any intent: nothing to charge
		}
		if errors.Is(err, provider.ErrNotProcessed) {
			// No intent exists yet: nothing can have been charged.
			return "", provider.Outcome{}, err
		}
		if req.Method == provider.MethodWallet {
			var se *sg.Error
			if errors.As(err, &se) && se.Type == sg.ErrorTypeInvalidRequest {
				// A token Stripe does not know (expired, used, another
				// account's): the spec's invalid token, nothing charged.
				return "", provider.Final(provider.Declined, codes.InvalidToken, ""), nil
			}
		}
		return "", provider.Outcome{}, fmt.Errorf("stripe: create payment method: %w", redact(err))
	}
	return pm.ID, provider.Outcome{}, nil
}

// outcome is OutcomeOf, except that an intent waiting for a step nobody
// will take (a challenge without a cardholder, a next action the service
// cannot show) is cancelled before the attempt is declined 004; an intent
// Stripe will not cancel any more answers with what it became, and one
// whose cancel got no answer stays pending (recovery closes it).
func (p *Provider) outcome(ctx context.Context, pi *sg.PaymentIntent, cardholderPresent bool) provider.Outcome {
	out := OutcomeOf(pi)
	if out.Status != provider.Pending || pi.Status != sg.PaymentIntentStatusRequiresAction {
		return out
	}
	challenge := out.NextAction != nil && out.NextAction.Type == provider.ActionThreeDSRedirect
	if out.NextAction != nil && (!challenge || cardholderPresent) {
		return out
	}
	closed, err := p.ClosePending(ctx, pi.Metadata[MetaReference], pi.ID)
	if err != nil {
		return out // unanswered cancel: pending, closed by recovery
	}
	if closed.Status == provider.Declined && closed.Code == codes.AuthenticationTimeout {
		// Cancelled by this call: the issuer's step could not be taken.
		return provider.Final(provider.Declined, codes.ThreeDSDecline, pi.ID)
	}
	closed.Facts = nil // this call's own intent
	return closed
}

// cardError turns a declined card (HTTP 402) into a declined outcome. The
// PaymentIntent in the error, when there is one, names the charge.
func cardError(err error) (provider.Outcome, bool) {
	var se *sg.Error
	if !errors.As(err, &se) || se.Type != sg.ErrorTypeCard {
		return provider.Outcome{}, false
	}
	ref := ""
	if se.PaymentIntent != nil {
		ref = se.PaymentIntent.ID
	}
	return provider.Final(provider.Declined, DeclineCode(string(se.Code), string(se.DeclineCode)), ref), true
}

// redact keeps what identifies a Stripe failure and drops the rest of the
// error body (it may echo request parameters).
func redact(err error) error {
	var se *sg.Error
	if errors.As(err, &se) {
		return fmt.Errorf("%s %d %s (request %s)", se.Type, se.HTTPStatusCode, se.Code, se.RequestID)
	}
	return err
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return sg.String(s)
}

func (p *Provider) metadata(ref string, txID, prID int64) map[string]string {
	m := map[string]string{MetaReference: ref}
	if txID > 0 {
		m[MetaTransactionID] = strconv.FormatInt(txID, 10)
	}
	if prID > 0 {
		m[MetaPaymentRequestID] = strconv.FormatInt(prID, 10)
	}
	return m
}

// cancel cancels an intent that must not go on (best effort: an intent
// left in requires_action expires without moving money).
func (p *Provider) cancel(ctx context.Context, id, ref string) {
	cp := &sg.PaymentIntentCancelParams{}
	cp.SetIdempotencyKey(p.chargeKey(ref) + ":cancel")
	_ = p.do(ctx, func(ctx context.Context) error { _, err := p.c.V1PaymentIntents.Cancel(ctx, id, cp); return err })
}

// Lookup reports what became of reference; see the package doc for how it
// makes sure a reference it reports unknown can never be charged, and
// LookupCharge (lookup.go) for a charge whose key holds a saved error.
func (p *Provider) Lookup(ctx context.Context, reference string) (provider.Outcome, error) {
	return p.LookupCharge(ctx, provider.LookupQuery{Reference: reference})
}

// ErrNotYetVisible: Stripe says the reference was used, but its intent is
// not in the search index yet (it lags by up to a minute). Ask again later.
var ErrNotYetVisible = errors.New("stripe: the intent of this reference is not searchable yet")

// find reads the intent of reference through the Search API. A closed
// reference is ErrUnknownReference for Lookup and a 012 decline for Charge.
func (p *Provider) find(ctx context.Context, reference string, forCharge bool) (out provider.Outcome, err error) {
	err = p.do(ctx, func(ctx context.Context) (err error) { out, err = p.search(ctx, reference, forCharge); return })
	return out, err
}

func (p *Provider) search(ctx context.Context, reference string, forCharge bool) (provider.Outcome, error) {
	sp := &sg.PaymentIntentSearchParams{SearchParams: sg.SearchParams{
		Query: fmt.Sprintf("metadata['%s']:'%s'", MetaReference, reference), Limit: sg.Int64(10)}}
	var found *sg.PaymentIntent
	for pi, err := range p.c.V1PaymentIntents.Search(ctx, sp) {
		if err != nil {
			if rateLimited(err) {
				return provider.Outcome{}, err // retried by find
			}
			return provider.Outcome{}, fmt.Errorf("stripe: search payment intent: %w", redact(err))
		}
		if pi.Metadata[MetaReference] != reference {
			continue
		}
		if pi.Metadata[MetaClosed] == "1" {
			if forCharge {
				return provider.Final(provider.Declined, codes.TransactionCancelled, pi.ID), nil
			}
			return provider.Outcome{}, provider.ErrUnknownReference
		}
		found = pi
		break
	}
	if found == nil {
		return provider.Outcome{}, ErrNotYetVisible
	}
	return withFacts(found), nil
}

// CompleteChallenge reads the intent after the payer's 3-D Secure challenge:
// Stripe, not the payer's claim (res.Approved), decides.
func (p *Provider) CompleteChallenge(ctx context.Context, res provider.ChallengeResult) (provider.Outcome, error) {
	if res.ProviderRef == "" {
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	var pi *sg.PaymentIntent
	err := p.do(ctx, func(ctx context.Context) (err error) {
		pi, err = p.c.V1PaymentIntents.Retrieve(ctx, res.ProviderRef, &sg.PaymentIntentRetrieveParams{})
		return
	})
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("stripe: retrieve payment intent: %w", redact(err))
	}
	if pi.Metadata[MetaReference] != res.Reference {
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	out := withFacts(pi)
	if out.Status == provider.Pending {
		return provider.Outcome{}, ErrChallengeOpen
	}
	return out, nil
}

// ErrChallengeOpen: the payer has not finished the challenge yet.
var ErrChallengeOpen = errors.New("stripe: the 3-D Secure challenge is still open")

// Refund returns money through the Refunds API, idempotent by RefundID. A
// void of an intent that never succeeded cancels it instead.
func (p *Provider) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	if req.RefundID == "" || !req.Amount.IsPositive() {
		return provider.RefundOutcome{}, fmt.Errorf("%w: a refund needs an id and a positive amount", provider.ErrInvalidRequest)
	}
	if err := checkRef(req.RefundID); err != nil {
		return provider.RefundOutcome{}, err
	}
	amount, _, err := MinorUnits(req.Amount, req.Unit)
	if err != nil {
		return provider.RefundOutcome{}, err
	}
	piID := req.ProviderRef
	if piID == "" && req.ChargeReference != "" {
		// A void after a crash may not know the intent yet.
		out, err := p.Lookup(ctx, req.ChargeReference)
		if errors.Is(err, provider.ErrUnknownReference) {
			return provider.RefundOutcome{Status: provider.Approved, Message: "Nothing was charged"}, nil
		}
		if err != nil {
			return provider.RefundOutcome{}, err
		}
		piID = out.ProviderRef
	}
	if piID == "" {
		return provider.RefundOutcome{}, fmt.Errorf("%w: refund without a charge", provider.ErrInvalidRequest)
	}
	md := map[string]string{MetaRefundID: req.RefundID, MetaReference: req.ChargeReference}
	if req.TransactionID > 0 {
		md[MetaTransactionID] = strconv.FormatInt(req.TransactionID, 10)
	}
	rp := &sg.RefundCreateParams{PaymentIntent: sg.String(piID), Amount: sg.Int64(amount), Metadata: md}
	if req.Void {
		rp.Reason = sg.String(string(sg.RefundReasonRequestedByCustomer))
	}
	rp.SetIdempotencyKey(p.opts.KeyPrefix + ":refund:" + req.RefundID)
	var r *sg.Refund
	err = p.do(ctx, func(ctx context.Context) (err error) { r, err = p.c.V1Refunds.Create(ctx, rp); return })
	if err != nil {
		var se *sg.Error
		if req.Void && errors.As(err, &se) && se.Type == sg.ErrorTypeInvalidRequest {
			// Nothing captured to refund (still in requires_action, say):
			// cancel the intent so it can never capture.
			p.cancel(ctx, piID, req.ChargeReference)
			return provider.RefundOutcome{Status: provider.Approved, Message: "Cancelled", ProviderRef: piID}, nil
		}
		return provider.RefundOutcome{}, fmt.Errorf("stripe: create refund: %w", redact(err))
	}
	return RefundOutcomeOf(r), nil
}

// RefundOutcomeOf maps a Refund's status.
func RefundOutcomeOf(r *sg.Refund) provider.RefundOutcome {
	switch r.Status {
	case sg.RefundStatusSucceeded:
		return provider.RefundOutcome{Status: provider.Approved, Message: "Refunded", ProviderRef: r.ID}
	case sg.RefundStatusPending, sg.RefundStatusRequiresAction:
		return provider.RefundOutcome{Status: provider.Pending, Message: "Refund pending", ProviderRef: r.ID}
	}
	return provider.RefundOutcome{Status: provider.Declined, Code: codes.BankSystemError,
		Message: "Refund " + string(r.Status), ProviderRef: r.ID}
}

// ChallengeStatus reads the intent of a pending 3-D Secure charge (one
// call), next action included; the service's challenge page uses it to send
// the payer to the issuer and to settle when Stripe sends the payer back.
func (p *Provider) ChallengeStatus(ctx context.Context, providerRef string) (provider.Outcome, error) {
	var pi *sg.PaymentIntent
	err := p.do(ctx, func(ctx context.Context) (err error) {
		pi, err = p.c.V1PaymentIntents.Retrieve(ctx, providerRef, &sg.PaymentIntentRetrieveParams{})
		return
	})
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("stripe: retrieve payment intent: %w", redact(err))
	}
	return withFacts(pi), nil
}
