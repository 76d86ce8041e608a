// Package adyen is the Adyen acquirer connector: provider.Provider on
// Adyen's Checkout API v71 (/payments, /payments/details,
// /payments/{paymentPspReference}/refunds and /cancels), through a small
// client of its own (client.go): Adyen's official Go library is not
// reachable from this build, and four calls do not need a generator. The
// tests hold every request and answer to Adyen's own OpenAPI description,
// served by Prism (internal/devstack/adyenmock). It speaks Adyen's
// vocabulary inside and the spec's outside (outcome.go; the table is
// docs/acquirers.md).
//
// internal/wire/paywire builds it for a production stage configured for
// Adyen (docs/acquirers.md, "Configuration"); its webhooks arrive on
// /callbacks/adyen. Rules it keeps (see provider.Provider for the contract):
//
//   - Every call carries an Idempotency-Key derived from the service's own
//     id: KeyPrefix+":"+reference for the charge, with ":details" for the
//     3-D Secure step, KeyPrefix+":refund:"+refund id, KeyPrefix+":cancel:"+
//     reference, KeyPrefix+":tcancel:"+reference for the technical cancel.
//     Adyen returns the first answer to a key it has processed
//     ("API idempotency": keys are at least 31 days valid, 64 characters at
//     most), so a call whose answer was lost is sent again with the same key
//     and charges once. An answer of error 704 (the key's first request is
//     still in progress) or with Transient-Error: true is not Adyen's answer
//     to the call: it is sent again, and never read as a decline.
//   - Every call is bounded: Timeout per send, Retries sends at most, all
//     within the caller's context. Only an unanswered send or a 5xx or 429
//     is sent again; a 4xx is Adyen's answer.
//   - Checkout has no "read a payment". Lookup sends, under the charge's key,
//     a zero-amount request without card data: a key Adyen processed answers
//     with the charge's first answer (the stored outcome); anything else
//     (a refusal, or 704 while the charge is in flight) proves nothing, so
//     Lookup answers ErrOutcomeUnknown and never
//     provider.ErrUnknownReference. The result then comes from the
//     AUTHORISATION webhook (webhook.go), which Adyen sends for every payment
//     it processed; an attempt past its deadline that never got one is
//     closed by CancelReference (Adyen's technical cancel, POST /cancels).
//   - Refunds and cancels are asynchronous at Adyen: the API only
//     acknowledges ("received"); REFUND, REFUND_FAILED, CANCELLATION and
//     TECHNICAL_CANCEL webhooks settle them.
//   - No card number, security code or API key is logged or kept; errors
//     carry Adyen's error code and PSP reference, never its message.
package adyen

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

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// Defaults.
const (
	DefaultTimeout   = 8 * time.Second
	DefaultRetries   = 2
	DefaultRetryBase = 200 * time.Millisecond
	DefaultKeyPrefix = "payreq"
	// TestBaseURL is Adyen's test Checkout endpoint of this API version; a
	// live one is https://{prefix}-checkout-live.adyenpayments.com/checkout/v71.
	TestBaseURL = "https://checkout-test.adyen.com/v71"
	maxKeyBytes = 64 // Adyen: "a maximum of 64 characters"
)

// Options configure a Provider.
type Options struct {
	APIKey          string // the web service user's API key (X-API-Key); required
	MerchantAccount string // required
	// BaseURL is the Checkout API root ending in /v71 (no trailing slash);
	// default TestBaseURL. Prism's address in the tests.
	BaseURL string
	// HTTPClient sends every call; default a client with Timeout.
	HTTPClient *http.Client
	Timeout    time.Duration // per send; default DefaultTimeout
	// Retries is how many times an unanswered or transient call is sent
	// again with the same key; default DefaultRetries, negative is 0.
	Retries   int
	RetryBase time.Duration // first back-off, doubling; default DefaultRetryBase
	// KeyPrefix namespaces the idempotency keys (Adyen keeps them per
	// company account); default "payreq".
	KeyPrefix string
	// ReturnURL is where Adyen sends the payer back after a 3-D Secure
	// redirect (with redirectResult, for SubmitDetails). Nil: returnUrl,
	// which Adyen requires, is ChargeRequest.ReturnURL.
	ReturnURL func(transactionID int64, returnTo string) string
	// NativeThreeDS asks Adyen for the native 3-D Secure 2 flow
	// (IdentifyShopper, ChallengeShopper) instead of the redirect flow; the
	// hosted page does not run Adyen's SDK, so it is off by default.
	NativeThreeDS bool
}

// Provider implements provider.Provider on Adyen. Safe for concurrent use.
type Provider struct {
	opts        Options
	unreachable atomic.Int64
}

var (
	_ provider.Provider           = (*Provider)(nil)
	_ provider.MethodServer       = (*Provider)(nil)
	_ provider.ReferenceCanceller = (*Provider)(nil)
)

// New returns an Adyen provider.
func New(opts Options) (*Provider, error) {
	if opts.APIKey == "" || opts.MerchantAccount == "" {
		return nil, errors.New("adyen: missing API key or merchant account")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = TestBaseURL
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: opts.Timeout}
	}
	switch {
	case opts.Retries == 0:
		opts.Retries = DefaultRetries
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = DefaultKeyPrefix
	}
	return &Provider{opts: opts}, nil
}

// Serves reports the methods this connector charges: cards only (wallet
// tokens, QR and UPI are Adyen payment methods it does not send yet).
func (p *Provider) Serves(m provider.Method) bool { return m == provider.MethodCard }

var validRef = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// key builds an Idempotency-Key, refusing ids that would not fit Adyen's
// 64 characters or are not made of the service's id characters.
func (p *Provider) key(parts ...string) (string, error) {
	for _, s := range parts {
		if s == "" || !validRef.MatchString(s) {
			return "", fmt.Errorf("%w: reference %q", provider.ErrInvalidRequest, s)
		}
	}
	k := p.opts.KeyPrefix + ":" + strings.Join(parts, ":")
	if len(k) > maxKeyBytes {
		return "", fmt.Errorf("%w: idempotency key of %q is longer than Adyen's 64 characters", provider.ErrInvalidRequest, parts[len(parts)-1])
	}
	return k, nil
}

// Charge sends one /payments request for a card. Authorised, refused and
// pending answers are outcomes; an error means no answer was had after the
// retries (the outcome is unknown: Lookup, or the webhook, settles it).
func (p *Provider) Charge(ctx context.Context, req provider.ChargeRequest) (provider.Outcome, error) {
	key, err := p.key(req.Reference)
	if err != nil {
		return provider.Outcome{}, err
	}
	if req.Method != provider.MethodCard || req.Card == nil {
		return provider.Outcome{}, fmt.Errorf("%w: the Adyen connector charges cards only", provider.ErrInvalidRequest)
	}
	value, cur, err := MinorUnits(req.Amount, req.Unit)
	if err != nil {
		return provider.Outcome{}, err
	}
	returnURL := req.ReturnURL
	if p.opts.ReturnURL != nil {
		returnURL = p.opts.ReturnURL(req.TransactionID, req.ReturnURL)
	}
	if returnURL == "" {
		return provider.Outcome{}, fmt.Errorf("%w: Adyen requires a returnUrl", provider.ErrInvalidRequest)
	}
	pr := paymentRequest{
		Amount: amount{Currency: cur, Value: value}, MerchantAccount: p.opts.MerchantAccount,
		Reference: req.Reference, ReturnURL: returnURL,
		PaymentMethod: cardDetails{Type: "scheme", Number: req.Card.Digits,
			ExpiryMonth: fmt.Sprintf("%02d", req.Card.Expiry.Month), ExpiryYear: strconv.Itoa(req.Card.Expiry.Year),
			CVC: req.CVV, HolderName: req.HolderName},
		ShopperEmail: req.Email,
		Metadata:     metadata(req.TransactionID, req.PaymentRequestID),
	}
	if req.CardholderPresent {
		pr.ShopperInteraction, pr.Channel = "Ecommerce", "Web"
		native := "disabled"
		if p.opts.NativeThreeDS {
			native = "preferred"
		}
		pr.AuthenticationData = &authenticationData{ThreeDSRequestData: &threeDSRequestData{NativeThreeDS: native}}
	} else {
		// Mail order: nobody can answer a challenge, so none is attempted.
		pr.ShopperInteraction = "Moto"
		pr.AuthenticationData = &authenticationData{AttemptAuthentication: "never"}
	}
	var resp paymentResponse
	if err := p.post(ctx, "/payments", key, pr, &resp); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.HTTPStatus == http.StatusUnprocessableEntity && ae.ErrorType == "validation" &&
			!ae.transient() {
			// Adyen refused the request's content (a card number it cannot
			// read, say) before any authorisation: nothing was charged.
			return provider.Final(provider.Declined, codes.InvalidOrExpiredCard, ae.PSPReference), nil
		}
		return provider.Outcome{}, err
	}
	if resp.MerchantReference != "" && resp.MerchantReference != req.Reference {
		return provider.Outcome{}, fmt.Errorf("adyen: answer for reference %q, not %q", resp.MerchantReference, req.Reference)
	}
	out := OutcomeOf(resp)
	if out.Status == provider.Pending && out.NextAction != nil && !req.CardholderPresent {
		// A challenge nobody will answer: declined 004, as the Stripe
		// connector does; the redirect is never shown.
		return provider.Final(provider.Declined, codes.ThreeDSDecline, resp.PSPReference), nil
	}
	return out, nil
}

// Metadata keys sent with every payment (Adyen: up to 20 keys of 20
// characters).
const (
	MetaTransactionID    = "payreqTx"
	MetaPaymentRequestID = "payreqPr"
)

func metadata(txID, prID int64) map[string]string {
	m := map[string]string{}
	if txID > 0 {
		m[MetaTransactionID] = strconv.FormatInt(txID, 10)
	}
	if prID > 0 {
		m[MetaPaymentRequestID] = strconv.FormatInt(prID, 10)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// SubmitDetails completes a payment that waited for the payer: details is
// what Adyen gave back, {"redirectResult": …} from the returnUrl after a
// redirect, or {"threeDSResult": …} from the native SDK. One
// /payments/details call, idempotent under the charge's key with ":details";
// Adyen, not the payer's claim, decides the outcome.
func (p *Provider) SubmitDetails(ctx context.Context, reference string, details map[string]string) (provider.Outcome, error) {
	key, err := p.key(reference, "details")
	if err != nil {
		return provider.Outcome{}, err
	}
	if len(details) == 0 {
		return provider.Outcome{}, fmt.Errorf("%w: no details from the payer's return", provider.ErrInvalidRequest)
	}
	var resp paymentResponse
	if err := p.post(ctx, "/payments/details", key, paymentDetailsRequest{Details: details}, &resp); err != nil {
		return provider.Outcome{}, err
	}
	if resp.MerchantReference != "" && resp.MerchantReference != reference {
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	return OutcomeOf(resp), nil
}

// ErrNeedsDetails: Adyen decides a challenge from what it sent back to the
// payer's return (ChallengeResult.Details, its redirectResult); it has no
// call that reads a payment, so a completion without them cannot be asked.
var ErrNeedsDetails = errors.New("adyen: completing a 3-D Secure challenge needs the redirectResult Adyen returned")

// CompleteChallenge posts what Adyen handed back through the payer's
// return (res.Details: redirectResult, or threeDSResult) to
// /payments/details (SubmitDetails); Adyen's answer decides. Without
// details it returns ErrNeedsDetails.
func (p *Provider) CompleteChallenge(ctx context.Context, res provider.ChallengeResult) (provider.Outcome, error) {
	if res.Reference == "" {
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	details := map[string]string{}
	for _, k := range []string{"redirectResult", "threeDSResult"} {
		if v := res.Details[k]; v != "" {
			details[k] = v
		}
	}
	if len(details) == 0 {
		return provider.Outcome{}, ErrNeedsDetails
	}
	return p.SubmitDetails(ctx, res.Reference, details)
}

// ErrOutcomeUnknown: Adyen gave no stored answer for the charge's key, so
// whether it charged is unknown until its AUTHORISATION webhook.
// It is provider.ErrOutcomeUnknown: past the attempt's deadline the
// service closes such a charge by CancelReference.
var ErrOutcomeUnknown = fmt.Errorf("adyen: no stored answer for this reference; the AUTHORISATION webhook settles it (%w)", provider.ErrOutcomeUnknown)

// Lookup replays the charge's key (see the package doc). It returns the
// stored answer's outcome, ErrOutcomeUnknown, or a transport error.
func (p *Provider) Lookup(ctx context.Context, reference string) (provider.Outcome, error) {
	key, err := p.key(reference)
	if err != nil {
		return provider.Outcome{}, err
	}
	// Zero amount and no card: if Adyen has not seen the key it has nothing
	// to charge, and it refuses the request.
	probe := paymentRequest{Amount: amount{Currency: "EUR", Value: 0}, MerchantAccount: p.opts.MerchantAccount,
		Reference: reference, ReturnURL: "https://lookup.invalid/", PaymentMethod: cardDetails{Type: "scheme"}}
	var resp paymentResponse
	err = p.post(ctx, "/payments", key, probe, &resp)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && (!ae.transient() || ae.InProgress()):
		// A refusal proves nothing; 704 says the charge is still in flight.
		return provider.Outcome{}, fmt.Errorf("%w (%s)", ErrOutcomeUnknown, ae.Error())
	case err != nil:
		return provider.Outcome{}, err
	case resp.MerchantReference != reference || resp.ResultCode == "":
		return provider.Outcome{}, ErrOutcomeUnknown
	}
	return OutcomeOf(resp), nil
}

// Refund asks Adyen to refund the captured payment req.ProviderRef (its PSP
// reference): one /payments/{psp}/refunds call, idempotent by RefundID.
// Adyen only acknowledges it: the outcome is pending with the refund's PSP
// reference until the REFUND or REFUND_FAILED webhook. A void (req.Void: a
// charge the service cannot keep, whether or not Adyen captured it yet) is
// a reversal instead (reverse).
func (p *Provider) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	if !req.Amount.IsPositive() || req.ProviderRef == "" {
		return provider.RefundOutcome{}, fmt.Errorf("%w: a refund needs a positive amount and the payment's PSP reference", provider.ErrInvalidRequest)
	}
	if req.Void {
		return p.reverse(ctx, req)
	}
	key, err := p.key("refund", req.RefundID)
	if err != nil {
		return provider.RefundOutcome{}, err
	}
	value, cur, err := MinorUnits(req.Amount, req.Unit)
	if err != nil {
		return provider.RefundOutcome{}, err
	}
	rr := refundRequest{Amount: amount{Currency: cur, Value: value}, MerchantAccount: p.opts.MerchantAccount,
		Reference: RefundReference(req.RefundID, req.TransactionID)}
	var resp modificationResponse
	if err := p.post(ctx, "/payments/"+pathEscape(req.ProviderRef)+"/refunds", key, rr, &resp); err != nil {
		return refusedOrErr(err, "Refund")
	}
	return provider.RefundOutcome{Status: provider.Pending, Message: "Refund pending", ProviderRef: resp.PSPReference}, nil
}

// reverse is a void: one /payments/{psp}/reversals call {merchantAccount,
// reference: RefundReference}, idempotent under KeyPrefix+":reversal:"+
// RefundID. Adyen cancels the authorisation when it has not captured it and
// refunds it when it has ("Reversal"; a refund of an authorisation not yet
// captured may be refused), always for the whole amount; it acknowledges
// the request, and the CANCEL_OR_REFUND webhook brings the outcome. So the
// outcome is pending with the reversal's PSP reference.
func (p *Provider) reverse(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	key, err := p.key("reversal", req.RefundID)
	if err != nil {
		return provider.RefundOutcome{}, err
	}
	var resp modificationResponse
	if err := p.post(ctx, "/payments/"+pathEscape(req.ProviderRef)+"/reversals", key,
		cancelRequest{MerchantAccount: p.opts.MerchantAccount, Reference: RefundReference(req.RefundID, req.TransactionID)}, &resp); err != nil {
		return refusedOrErr(err, "Reversal")
	}
	return provider.RefundOutcome{Status: provider.Pending, Message: "Reversal pending", ProviderRef: resp.PSPReference}, nil
}

// refusedOrErr turns Adyen's refusal of a modification (a 4xx that is not
// transient) into a declined outcome; anything else stays an error (the
// outcome is unknown and the call is asked again under the same key).
func refusedOrErr(err error, what string) (provider.RefundOutcome, error) {
	var ae *APIError
	if errors.As(err, &ae) && !ae.transient() {
		return provider.RefundOutcome{Status: provider.Declined, Code: codes.BankSystemError,
			Message: what + " refused by the acquirer (" + ae.ErrorCode + ")"}, nil
	}
	return provider.RefundOutcome{}, err
}

// RefundReference is the reference a refund is sent with: the service's
// refund id and, after a ".", its transaction's id. Adyen's REFUND webhook
// returns it as merchantReference and carries neither the payment's
// reference nor its metadata, so this is how the webhook names the
// transaction (ParseRefundReference). Neither part contains a ".".
func RefundReference(refundID string, txID int64) string {
	if txID <= 0 {
		return refundID
	}
	return refundID + "." + strconv.FormatInt(txID, 10)
}

// ParseRefundReference splits a RefundReference; txID is 0 for a refund
// this service did not send (made in Adyen's Customer Area).
func ParseRefundReference(ref string) (refundID string, txID int64) {
	if i := strings.LastIndexByte(ref, '.'); i > 0 {
		if id, err := strconv.ParseInt(ref[i+1:], 10, 64); err == nil && id > 0 {
			return ref[:i], id
		}
	}
	return ref, 0
}

// Cancel asks Adyen to cancel the authorised, not yet captured payment
// pspReference (one /payments/{psp}/cancels call, idempotent by
// reference). It returns the cancellation's PSP reference; the CANCELLATION
// webhook says whether it took effect. It moves no money.
func (p *Provider) Cancel(ctx context.Context, reference, pspReference string) (string, error) {
	if pspReference == "" {
		return "", fmt.Errorf("%w: a cancel needs the payment's PSP reference", provider.ErrInvalidRequest)
	}
	key, err := p.key("cancel", reference)
	if err != nil {
		return "", err
	}
	var resp modificationResponse
	if err := p.post(ctx, "/payments/"+pathEscape(pspReference)+"/cancels", key,
		cancelRequest{MerchantAccount: p.opts.MerchantAccount, Reference: reference}, &resp); err != nil {
		return "", err
	}
	return resp.PSPReference, nil
}

// CancelReference is Adyen's technical cancel: one POST /cancels
// {merchantAccount, paymentReference: reference, reference}, for a charge
// whose PSP reference the service never got (Adyen's "Cancel" page: "if you
// don't have the pspReference available, for example because of a
// timeout"). Idempotent under KeyPrefix+":tcancel:"+reference; nil once
// Adyen acknowledged it ("received"). The TECHNICAL_CANCEL webhook says
// whether it cancelled an authorisation; a payment Adyen already captured
// is not cancelled, and its AUTHORISATION webhook brings it to the service,
// which voids it. It moves no money.
func (p *Provider) CancelReference(ctx context.Context, reference string) error {
	key, err := p.key("tcancel", reference)
	if err != nil {
		return err
	}
	var resp technicalCancelResponse
	if err := p.post(ctx, "/cancels", key, technicalCancelRequest{MerchantAccount: p.opts.MerchantAccount,
		PaymentReference: reference, Reference: "tcancel_" + reference}, &resp); err != nil {
		return err
	}
	if resp.Status != "received" || resp.PaymentReference != reference {
		return fmt.Errorf("adyen: technical cancel of %q answered status %q for %q", reference, resp.Status, resp.PaymentReference)
	}
	return nil
}

// pathEscape keeps a PSP reference (16 alphanumerics at Adyen) from
// changing the path.
func pathEscape(s string) string {
	if validRef.MatchString(s) {
		return s
	}
	return "invalid"
}
