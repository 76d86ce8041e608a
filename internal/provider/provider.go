// Package provider is the seam between the payment service and an acquirer:
// the service builds a ChargeRequest, a Provider answers with an Outcome. The
// sandbox (package provider/sandbox) implements it without any network; a
// real acquirer adapter implements the same interface.
//
// Outcomes are expressed in the spec's terms (transaction status and the
// three-digit codes), so adapters translate their acquirer's vocabulary and
// the rest of the service never sees it.
package provider

import (
	"context"
	"errors"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
)

// Method is the family of a payment method; it decides which ChargeRequest
// fields the provider reads.
type Method string

const (
	MethodCard        Method = "card"        // Card and CVV
	MethodWallet      Method = "wallet"      // WalletToken
	MethodQR          Method = "qr"          // payer scans a QR code
	MethodUPI         Method = "upi"         // UPIID receives a collect request
	MethodAlternative Method = "alternative" // h2h selectors 27 and 43
)

// Status mirrors transactionStatusId.
type Status int

const (
	Waiting  Status = 0
	Approved Status = 1
	Declined Status = 2
	Pending  Status = 3
)

func (s Status) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Approved:
		return "approved"
	case Declined:
		return "declined"
	case Pending:
		return "pending"
	}
	return "unknown"
}

// Final reports whether s ends a transaction (approved or declined).
func (s Status) Final() bool { return s == Approved || s == Declined }

// Provider charges, completes 3-D Secure challenges and refunds.
// Implementations must be safe for concurrent use and must not keep state
// between calls that the service has not persisted: each Lambda invocation
// may run on a different instance, so anything needed later travels in
// Outcome.ProviderRef.
//
// A returned error means the provider could not give an answer (network,
// misuse); a decline is an Outcome, not an error.
//
// Every call that can move money is idempotent by reference: Charge by
// ChargeRequest.Reference and Refund by RefundRequest.RefundID. A second
// call with a reference the provider has seen answers with the first call's
// outcome and moves no money, so the service may repeat any call after a
// crash or a time-out.
type Provider interface {
	Charge(ctx context.Context, req ChargeRequest) (Outcome, error)
	CompleteChallenge(ctx context.Context, res ChallengeResult) (Outcome, error)
	Refund(ctx context.Context, req RefundRequest) (RefundOutcome, error)
	// Lookup reports the current outcome of the charge made with reference
	// (pending until its result is known). For a reference it never charged
	// it returns ErrUnknownReference and refuses every later Charge with
	// that reference, so the service can close an attempt left behind by a
	// crash without its charge arriving afterwards.
	Lookup(ctx context.Context, reference string) (Outcome, error)
}

// ChallengeAbandoner is a Provider that can close a pending 3-D Secure
// challenge before its window ends, when the payer left it and started a new
// attempt. AbandonChallenge settles the charge made with reference as an
// unanswered challenge (declined 013) unless it was answered meanwhile, and
// returns the charge's outcome, final either way. It moves no money; a later
// answer to the closed challenge gets the booked outcome. It returns
// ErrUnknownChallenge when no challenge is pending for that reference.
type ChallengeAbandoner interface {
	AbandonChallenge(ctx context.Context, reference string) (Outcome, error)
}

// LookupQuery is what the service stored of a charge, for ChargeLooker.
type LookupQuery struct {
	Reference string
	// ProviderRef is the acquirer's object id when the service stored one:
	// the charge is then read by id (one read, no search).
	ProviderRef string
	// Since is when the attempt began (its write-ahead record was written):
	// no charge with Reference can be older.
	Since time.Time
}

// ChargeLooker is a Provider that looks a charge up with everything the
// service stored of it, not only its reference. It keeps Lookup's contract
// (ErrUnknownReference only for a reference that never charged and never
// will while the acquirer remembers it).
type ChargeLooker interface {
	LookupCharge(ctx context.Context, q LookupQuery) (Outcome, error)
}

// PendingCloser is a Provider that can close a pending charge at the
// acquirer (a 3-D Secure challenge or a QR code nobody answered, an intent
// waiting for a step the service cannot show): afterwards it can never
// succeed. ClosePending returns the charge's outcome: declined 013 when it
// closed it, what the charge became meanwhile when it had already ended
// (approved included), or Pending when the acquirer cannot close it yet
// (it is processing). It moves no money.
type PendingCloser interface {
	ClosePending(ctx context.Context, reference, providerRef string) (Outcome, error)
}

// ReferenceCanceller is a Provider whose lookup cannot prove that it never
// charged a reference (Lookup answers ErrOutcomeUnknown while the acquirer
// keeps nothing it can show for it) but that can cancel a payment by the
// reference it was sent with (Adyen's technical cancel). CancelReference
// asks the acquirer to cancel the authorisation made with reference, if
// there is one; nil means the acquirer acknowledged the request (its
// result comes later, by the acquirer's own event). It is idempotent by
// reference (a lost answer is sent again and acknowledged once) and moves
// no money. A cancel cannot undo a captured payment: the acquirer's
// success event for it then arrives, and the service voids it as a late
// charge.
type ReferenceCanceller interface {
	CancelReference(ctx context.Context, reference string) error
}

// RefundReader reads a refund's current state at the acquirer, by the
// acquirer's refund id (no money moves).
type RefundReader interface {
	RefundStatus(ctx context.Context, providerRef string) (RefundOutcome, error)
}

// MethodServer is implemented by a provider that serves only some methods
// (a connector is tenant configuration: Stripe takes cards only). The
// service refuses the other methods with 400 045 before anything is
// written; a provider without it serves every method.
type MethodServer interface {
	Serves(Method) bool
}

// AmountChecker is a Provider that cannot charge every amount the service
// accepts (an acquirer with its own minor units and currency list). The
// service asks it before anything is written: at creation of a payment
// request and before every attempt. CheckAmount returns nil or an
// *AmountError.
type AmountChecker interface {
	CheckAmount(amount decimal.Decimal, unit string) error
}

// RouteChecker is a Provider that serves a method only in some currencies
// (an acquirer's payment method for UPI takes INR only). The service asks
// it before an attempt writes anything; CheckRoute returns nil or an
// *AmountError (020 on unit).
type RouteChecker interface {
	CheckRoute(m Method, selector int, unit string) error
}

// RefundChecker is a Provider that cannot refund every method it charges.
// CheckRefund returns nil, or an error whose text says why a payment of
// method m (selector, unit) cannot be refunded through the provider; the
// service then answers 409 before anything is written.
type RefundChecker interface {
	CheckRefund(m Method, selector int, unit string) error
}

// AmountError refuses an amount or a currency the provider cannot take:
// the spec's code (026 invalid total amount, 020 currency not allowed) on
// the field it concerns ("amount" or "unit"). It is also ErrInvalidRequest.
type AmountError struct {
	Field  string
	Code   codes.Code
	Detail string
}

func (e *AmountError) Error() string { return "provider: " + e.Detail }

// Is makes an AmountError an ErrInvalidRequest for callers that only ask
// whether the request could be sent.
func (e *AmountError) Is(target error) bool { return target == ErrInvalidRequest }

// Errors a Provider returns for requests the service should never send.
var (
	ErrInvalidRequest   = errors.New("provider: invalid request")
	ErrUnknownReference = errors.New("provider: no charge was made with this reference")
	ErrUnknownChallenge = errors.New("provider: no 3-D Secure challenge is pending for this transaction")
	// ErrOutcomeUnknown: the acquirer answered the lookup but has nothing
	// it can show for the reference (no stored answer): it may not have
	// received the charge, or may not have finished it. Unlike
	// ErrUnknownReference it proves nothing; a ReferenceCanceller can
	// close it.
	ErrOutcomeUnknown = errors.New("provider: the acquirer has no answer for this reference yet")
)

// ChargeRequest is one payment attempt. It carries card data, so it logs and
// prints redacted (see String).
type ChargeRequest struct {
	// Reference is the write-ahead reference of the attempt (stored with its
	// transaction before this call): the provider's idempotency key.
	Reference        string
	TransactionID    int64
	PaymentRequestID int64
	Amount           decimal.Decimal
	Unit             string
	Method           Method
	Selector         int // h2h method selector n, 0 for the walletA and QR operations

	Card *card.Details // MethodCard
	// HolderName is the cardholder's name as the payer typed it (or the
	// payer's name): some acquirers want it (Adyen's paymentMethod.holderName).
	HolderName string
	// CVV is passed for this call only: it must never be stored, queued or
	// logged, and a provider must not keep it after Charge returns.
	CVV         string
	WalletToken string // MethodWallet
	UPIID       string // MethodUPI

	// CardholderPresent is false when nobody can answer a 3-D Secure
	// challenge (batch files): an attempt that needs one is then declined
	// with 004 instead of returning a redirect.
	CardholderPresent bool
	Email             string
	ReturnURL         string // where the payer comes back after a redirect
	// AttemptStart is when the attempt's write-ahead record was written: no
	// charge with Reference is older (a provider that must find one by
	// listing looks from there).
	AttemptStart time.Time
}

// NextAction tells the payer what to do while the attempt is pending.
type NextAction struct {
	Type      string `json:"type"`
	URL       string `json:"url,omitempty"`
	QRPayload string `json:"qrPayload,omitempty"`
	Reference string `json:"reference,omitempty"`
}

// NextAction types.
const (
	ActionThreeDSRedirect = "threeds_redirect" // open URL, the issuer's challenge page
	ActionQR              = "qr"               // show QRPayload as a QR code
	ActionUPICollect      = "upi_collect"      // approve Reference in the UPI app
)

// Outcome is the provider's answer to a charge or a challenge.
type Outcome struct {
	Status      Status
	Code        codes.Code // spec code; "" when approved or pending
	Message     string     // lastLog.message
	ProviderRef string     // the provider's reference; persist it with the transaction
	NextAction  *NextAction
	// Window, when set, is how long the pending attempt may wait for the
	// payer (a QR code's validity); 0: the service's own window.
	Window time.Duration
	// Closable marks a pending charge that waits for a step (the payer's
	// challenge or QR code, or one the service cannot show): once its
	// window passed, a PendingCloser closes it (declined 013). A charge
	// the network is processing is not closable: it waits for its result.
	Closable bool
	// Facts, when set, are what the provider's own record says the charge
	// is (a charge it found rather than the answer to this service's own
	// call: a lookup, a 3-D Secure return, an event). The service applies
	// the outcome only to the transaction they match (payments.Bind).
	Facts *ChargeFacts
	// Async is set when the provider will report the final result later
	// through a signed callback. It is nil when the outcome is final now, and
	// when the result waits for the payer's 3-D Secure challenge instead.
	Async *AsyncResult
}

// ChargeFacts identify a charge as the provider recorded it: the
// reference and payment request the service gave it, and the amount and
// unit it is for (converted back with the provider's own minor units).
type ChargeFacts struct {
	Reference        string
	PaymentRequestID int64
	Amount           decimal.Decimal
	Unit             string
}

// AsyncResult is the final result a pending outcome will turn into. The
// sandbox uses it to schedule its own callback; a real provider leaves it nil
// and calls back on its own.
type AsyncResult struct {
	After  time.Duration
	Status Status
	Code   codes.Code
}

// ChallengeResult is the payer's answer on the 3-D Secure challenge page
// (the issuer's ACS, or the sandbox's approve/fail page), as reported to
// POST /callbacks/3ds.
type ChallengeResult struct {
	Reference     string // ChargeRequest.Reference of the pending charge
	TransactionID int64
	ProviderRef   string // Outcome.ProviderRef of the pending charge
	Approved      bool   // the payer authenticated successfully
	// Details is what the acquirer handed back through the payer's return
	// from its challenge page (Adyen's redirectResult), passed on unread:
	// the acquirer, not the payer's claim, decides. Empty for the sandbox.
	Details map[string]string
}

// RefundRequest returns money of an approved transaction.
type RefundRequest struct {
	RefundID string // the service's id for this refund; the idempotency key with the provider
	// ChargeReference is the ChargeRequest.Reference of the charge refunded.
	ChargeReference string
	// Void marks the return of a charge that could not pay its request.
	Void          bool
	TransactionID int64
	ProviderRef   string // Outcome.ProviderRef of the approved charge
	Amount        decimal.Decimal
	Unit          string
	Reason        string
}

// RefundOutcome is the provider's answer to a refund.
type RefundOutcome struct {
	Status      Status // Approved, Declined or Pending
	Code        codes.Code
	Message     string
	ProviderRef string
}

// Final builds an outcome that needs nothing more from the payer or the
// provider, with the message the spec gives to code.
func Final(s Status, c codes.Code, providerRef string) Outcome {
	return Outcome{Status: s, Code: c, Message: Message(s, c), ProviderRef: providerRef}
}

// Message is lastLog.message for a status and code: the spec's text for the
// code when there is one, else a word for the status.
func Message(s Status, c codes.Code) string {
	if m := c.Message(); m != "" {
		return m
	}
	switch s {
	case Approved:
		return "Approved"
	case Declined:
		return "Declined"
	case Pending:
		return "Pending"
	}
	return "Waiting"
}
