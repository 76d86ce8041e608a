// Package paycore is the core of payment attempts: it takes the attempt
// lease on a payment request, writes the transaction ahead of the charge,
// checks the merchant's limits, charges through a provider.Provider with the
// transaction's reference as idempotency key, and moves the request and the
// transaction through their states with conditional writes only. Every step
// may be repeated after a crash (pay.go, the normal path; complete.go; recover.go): see docs/payments.md for the
// state machine and what each crash point leaves behind. It is
// transport-independent (no HTTP import): the payments function's HTTP
// edge (internal/paymentsapi), the hosted checkout and the batch processor
// all call Service.
//
// States (spec "States and transitions"):
//
//	transaction  0 waiting → 3 pending → 1 approved | 2 declined   (or 0 → 1 | 2)
//	request      2 unpaid → 1 paid          (3 cancelled by the merchant API)
//
// The attempt lease: the request item names the transaction that may charge
// it (attemptTx). One conditional UpdateItem takes it, so a second
// concurrent attempt is refused (409); it is released only by the attempt's
// final commit, so an attempt a crash left behind blocks the request until
// it is driven to a final state (by the next attempt or the reconciler),
// never skipped. The transaction record (status 0 waiting, with its provider
// reference) is written before the provider is called. Every later write is
// guarded by the current state: the request is paid only by the transaction
// holding its lease and only while unpaid (so paying and cancelling exclude
// each other), a transaction leaves waiting or pending exactly once, and an
// approved transaction never changes status again. The request commit comes
// before the transaction's settle: the commit decides whether a charge pays
// the request; the settle then records that decision with its notification.
// A synchronous outcome makes both in one TransactWriteItems (all or
// nothing, each under its own guard), and an attempt that creates its
// request writes the leased request and the waiting transaction in one:
// fewer round trips, the same states and guards (docs/payments.md).
package paycore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// Sender queues a message (internal/queue).
type Sender interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// Defaults of Deps.
const (
	DefaultSyncLease       = 30 * time.Second
	DefaultChallengeWindow = 10 * time.Minute
	DefaultPendingGrace    = time.Minute
)

// Deps are the service's collaborators.
type Deps struct {
	// Store is every storage role (store.go); New gives each part its own.
	Store Store
	// Connectors are the stage's acquirer connections by name; Provider is
	// the default's provider (New fills it from Connectors when nil). Empty:
	// Provider alone, named connector.Sandbox when Sandbox, else
	// UnnamedConnector. Calls about a transaction go to the connector
	// recorded on it (connectors.go).
	Connectors connector.Set
	Provider   provider.Provider
	// Sandbox is true when Provider is the sandbox: its asynchronous results
	// are queued for the sandbox function (SandboxQueueURL).
	Sandbox         bool
	Queue           Sender
	SandboxQueueURL string
	// ThreeDSKey signs the 3-D Secure redirect URLs handed to payers;
	// CallbackKey signs provider callbacks (the sandbox challenge page's links).
	ThreeDSKey  []byte
	CallbackKey []byte
	Log         *slog.Logger
	Now         func() time.Time
	// NotificationsQueueURL receives the merchant notification of every
	// final commit (the commit also keeps it in the outbox, so a failed send
	// is recovered by the reconciler).
	NotificationsQueueURL string
	// BatchNotificationsQueueURL receives the notifications of batch rows
	// (payment.ChannelBatch); empty: they share NotificationsQueueURL.
	BatchNotificationsQueueURL string
	// SyncLease bounds a synchronous attempt (Lambda times out long before).
	SyncLease time.Duration
	// ChallengeWindow is how long a 3-D Secure challenge stays open.
	ChallengeWindow time.Duration
	// PendingGrace is added to a pending attempt's window before its lease
	// lets another attempt in.
	PendingGrace time.Duration
	// Breaker skips a connector that repeatedly did not process charges
	// (failover.go); nil: New gives one with the defaults.
	Breaker *connector.Breaker
	// Accounts resolves merchants' own acquirer accounts, which routing
	// names beside the stage's connectors (connectors.go); nil: none.
	Accounts AccountConnectors
}

// Service runs payment attempts.
type Service struct {
	Deps
	stores // Deps.Store by role (store.go)
}

// New returns a Service with defaults filled in.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.SyncLease <= 0 {
		d.SyncLease = DefaultSyncLease
	}
	if d.ChallengeWindow <= 0 {
		d.ChallengeWindow = DefaultChallengeWindow
	}
	if d.PendingGrace <= 0 {
		d.PendingGrace = DefaultPendingGrace
	}
	if d.Connectors.Empty() {
		d.Connectors = defaultConnectors(d)
	} else if d.Provider == nil {
		d.Provider, _ = d.Connectors.Get(d.Connectors.Default())
	}
	svc := &Service{Deps: d, stores: storesOf(d.Store)}
	if svc.Breaker == nil {
		svc.Breaker = connector.NewBreaker(nil)
	}
	if svc.Breaker.Changed == nil {
		svc.Breaker.Changed = svc.circuitChanged
	}
	return svc
}

// Attempt is one payment attempt as a caller describes it. Card data is
// used for the provider call only: the transaction keeps brand, first six
// and last four digits.
type Attempt struct {
	Method   provider.Method
	Selector int // h2h selector n; 0 for the walletA, QR and hosted-page operations

	// Payer is the spec's payer data; required for every method but card,
	// unless Hosted.
	Payer *payer.Data
	// Hosted marks an attempt from the hosted payment page, which collects
	// no payer data: Payer is optional for every method.
	Hosted bool
	// Card is required for MethodCard. Never persisted, queued or logged.
	Card *card.Input
	// WalletToken and UPIID default to Payer.Token and Payer.UPIID.
	WalletToken string
	UPIID       string
	// CardholderPresent is false for batch files: a 3-D Secure challenge
	// then declines with 004.
	CardholderPresent bool
	// Channel is kept with the transaction and routes its notification:
	// batch rows (payment.ChannelBatch) are notified through their own
	// queue, never ahead of, or in the way of, interactive payments.
	Channel payment.Channel

	// Amount and Unit, when set, must equal the request's (400 026 / 027).
	Amount *decimal.Decimal
	Unit   string

	// BaseURL is this service's public base URL, used in nextAction URLs.
	BaseURL string
	// ReturnTo is where the 3-D Secure page sends the payer afterwards: a
	// path on this service, or the request's successUrl/failureUrl.
	ReturnTo string

	// connector is the one the merchant's routing picked (routeAttempt),
	// before anything was written; "" until then.
	connector string
	// route is the connector the routing picked followed by its failover
	// list (failover.go).
	route []string
	// accounts are the providers of the merchant's own active accounts on
	// route, resolved by routeAttempt (the attempt's checks and failover
	// read them without another look-up).
	accounts map[string]provider.Provider
}

// Result is the response of a processed attempt (docs/payments.md).
type Result struct {
	PaymentRequestID       int64                     `json:"paymentRequestId"`
	TransactionID          int64                     `json:"transactionId"`
	PaymentID              string                    `json:"paymentId"`
	TransactionNumber      string                    `json:"transactionNumber"`
	TransactionStatusID    payment.TransactionStatus `json:"transactionStatusId"`
	PaymentRequestStatusID payment.RequestStatus     `json:"paymentRequestStatusId"`
	LastLog                payment.LastLog           `json:"lastLog"`
	NextAction             *provider.NextAction      `json:"nextAction,omitempty"`
}

// ErrUnknownTransaction: a callback names a transaction that does not exist.
var ErrUnknownTransaction = errors.New("unknown transaction")

// ---- validation ------------------------------------------------------------

// PayerKind is the payer-data rule set of a method.
func PayerKind(m provider.Method) payer.Kind {
	switch m {
	case provider.MethodWallet:
		return payer.Wallet
	case provider.MethodQR:
		return payer.QR
	case provider.MethodUPI:
		return payer.UPI
	}
	return payer.Other
}

// MethodOf maps an h2h selector to its method; ok is false for unknown
// selectors. Selector 1 (sandbox) is a card payment when card data is sent,
// else an alternative method.
func MethodOf(selector int, hasCard bool) (provider.Method, bool) {
	switch {
	case selector == merchant.SandboxSelector && hasCard:
		return provider.MethodCard, true
	case selector == merchant.SandboxSelector:
		return provider.MethodAlternative, true
	case slices.Contains(merchant.WalletASelectors, selector), slices.Contains(merchant.WalletBSelectors, selector):
		return provider.MethodWallet, true
	case slices.Contains(merchant.UPISelectors, selector):
		return provider.MethodUPI, true
	case slices.Contains(merchant.AlternativeSelectors, selector):
		return provider.MethodAlternative, true
	}
	return "", false
}

// SelectorEnabled reports whether merchant m may use selector n: the
// merchant has it, and outside the sandbox a connector m's routing can
// reach serves its method (a wallet or UPI selector stays disabled until
// one does).
func (s *Service) SelectorEnabled(m *merchant.Merchant, n int) bool {
	if !merchant.KnownSelector(n) || !slices.Contains(m.Methods, n) {
		return false
	}
	if n == merchant.SandboxSelector {
		return m.Sandbox && s.Sandbox
	}
	method, _ := MethodOf(n, false)
	return s.Serves(m, method)
}

// reachable is the configured connectors merchant m's routing can send an
// attempt to: those its rules name and its default (the stage's default
// when the rules name none). Creation, selectors, methods and the hosted
// page's offer are checked against them, since which one an attempt goes
// to is known only with the attempt (its method, card and amount); the
// attempt itself is checked against its routed connector (checkAttempt).
func (s *Service) reachable(m *merchant.Merchant) []provider.Provider {
	names := m.Routing.Connectors()
	if m.Routing.Default == "" {
		names = append(names, s.Connectors.Default())
	}
	var out []provider.Provider
	for _, n := range names {
		if s.Connectors.Has(n) || n == s.Connectors.Default() {
			out = append(out, s.connector(n))
		}
	}
	if len(out) == 0 { // every connector the rules name is missing: the attempt answers 046
		out = append(out, s.Provider)
	}
	return out
}

// Serves reports whether a connector merchant m's routing can reach takes
// method (always in the sandbox, which simulates them all).
func (s *Service) Serves(m *merchant.Merchant, method provider.Method) bool {
	if s.Sandbox {
		return true
	}
	for _, p := range s.reachable(m) {
		if ms, ok := p.(provider.MethodServer); !ok || ms.Serves(method) {
			return true
		}
	}
	return false
}

// CheckAmount refuses, before anything is written, an amount or a unit
// that no acquirer merchant m's routing can reach can take (their own
// minor units and currency lists): 400 with the spec's code (026 invalid
// total amount, 020 currency not allowed) on the field concerned, the
// first connector's answer. The sandbox takes every amount the service
// accepts.
func (s *Service) CheckAmount(m *merchant.Merchant, amount decimal.Decimal, unit string) error {
	var first error
	for _, p := range s.reachable(m) {
		err := s.checkAmountAt(p, amount, unit)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (s *Service) checkAmountAt(p provider.Provider, amount decimal.Decimal, unit string) error {
	ac, ok := p.(provider.AmountChecker)
	if s.Sandbox || !ok {
		return nil
	}
	return acquirerProblem(ac.CheckAmount(amount, unit))
}

// acquirerProblem is the 400 of an acquirer's *provider.AmountError, on its
// field with its code; other errors pass through.
func acquirerProblem(err error) error {
	var ae *provider.AmountError
	if errors.As(err, &ae) {
		return errkind.Validation([]errkind.FieldError{{Field: ae.Field, Code: ae.Code, Detail: ae.Detail}})
	}
	return err
}

// checkAttempt is CheckAmount, and the acquirer's routing of a's method in
// unit (a method served in some currencies only: 400 020 on unit).
func (s *Service) checkAttempt(a Attempt, amount decimal.Decimal, unit string) error {
	p := s.Provider
	if a.connector != "" {
		p, _ = s.attemptProvider(a, a.connector) // the routed connector's rules
	}
	if ms, ok := p.(provider.MethodServer); ok && !s.Sandbox && !ms.Serves(a.Method) {
		return MethodProblem(a.Method) // the routed connector's own methods
	}
	if err := s.checkAmountAt(p, amount, unit); err != nil {
		return err
	}
	rc, ok := p.(provider.RouteChecker)
	if s.Sandbox || !ok {
		return nil
	}
	err := acquirerProblem(rc.CheckRoute(a.Method, a.Selector, unit))
	if err != nil && errors.Is(err, provider.ErrInvalidRequest) {
		return MethodProblem(a.Method) // no route serves the method at all
	}
	return err
}

// Offers reports whether merchant m can make an attempt of method (no
// selector: the hosted page's) in unit: a connector its routing can reach
// serves the method in that currency.
func (s *Service) Offers(m *merchant.Merchant, method provider.Method, unit string) bool {
	if s.Sandbox {
		return true
	}
	for _, p := range s.reachable(m) {
		if s.offersAt(p, method, unit) {
			return true
		}
	}
	return false
}

// offersAt: provider p serves method in unit.
func (s *Service) offersAt(p provider.Provider, method provider.Method, unit string) bool {
	if ms, ok := p.(provider.MethodServer); ok && !ms.Serves(method) {
		return false
	}
	if s.checkAmountAt(p, decimal.NewFromInt(1), unit) != nil {
		return false
	}
	rc, ok := p.(provider.RouteChecker)
	return !ok || rc.CheckRoute(method, 0, unit) == nil
}

// MethodProblem is the 400 045 of a method no configured connector serves.
func MethodProblem(method provider.Method) *errkind.Error {
	return errkind.BadInput("Payment method "+strconv.Quote(string(method))+" is not enabled for this merchant.", codes.InvalidPaymentMethod)
}

// SelectorProblem is the 400 045 of a selector the merchant cannot use.
func SelectorProblem(n int) *errkind.Error {
	return errkind.BadInput(fmt.Sprintf("Payment method selector %d is not enabled for this merchant.", n), codes.InvalidPaymentMethod)
}

// validate checks an attempt before anything is written.
func (s *Service) validate(m *merchant.Merchant, a *Attempt, now time.Time) (*card.Details, error) {
	if a.Selector != 0 && !s.SelectorEnabled(m, a.Selector) {
		return nil, SelectorProblem(a.Selector)
	}
	var errs []errkind.FieldError
	switch a.Method {
	case provider.MethodCard, provider.MethodWallet, provider.MethodQR, provider.MethodUPI, provider.MethodAlternative:
	default:
		return nil, errkind.BadInput("Unknown payment method "+strconv.Quote(string(a.Method))+".", codes.InvalidPaymentMethod)
	}
	if !s.Serves(m, a.Method) {
		return nil, MethodProblem(a.Method)
	}
	if a.Payer != nil {
		a.Payer.Normalize()
		errs = append(errs, a.Payer.Validate(PayerKind(a.Method))...)
		if a.WalletToken == "" && a.Payer.Token != nil {
			a.WalletToken = *a.Payer.Token
		}
		if a.UPIID == "" {
			a.UPIID = a.Payer.UPIID
		}
	} else if a.Method != provider.MethodCard && !a.Hosted {
		errs = append(errs, errkind.FieldError{Field: payer.FieldName, Code: codes.InvalidName, Detail: "payer data is required"})
	}
	var det *card.Details
	if a.Method == provider.MethodCard {
		if a.Card == nil {
			errs = append(errs, errkind.FieldError{Field: "card", Code: codes.InvalidCardNumber, Detail: "card is required"})
		} else {
			in := *a.Card
			if in.Holder == "" && a.Payer != nil {
				in.Holder = a.Payer.Name
			}
			d, cerrs := in.Validate(now)
			for _, e := range cerrs {
				e.Field = "card." + e.Field
				errs = append(errs, e)
			}
			if cerrs == nil {
				det = &d
			}
		}
	}
	if a.Method == provider.MethodWallet && a.Payer == nil && a.WalletToken == "" {
		errs = append(errs, errkind.FieldError{Field: payer.FieldToken, Code: codes.InvalidToken, Detail: "token is required"})
	}
	if a.Method == provider.MethodUPI && a.Payer == nil && !payer.ValidUPI(a.UPIID) {
		errs = append(errs, errkind.FieldError{Field: payer.FieldUPIID, Code: codes.InvalidUPI, Detail: "upiId must be a UPI address such as name@bank"})
	}
	if len(errs) > 0 {
		return nil, errkind.Validation(errs)
	}
	return det, nil
}

func resultOf(req *payment.Request, tx *payment.Transaction, next *provider.NextAction) Result {
	return Result{
		PaymentRequestID: req.ID, TransactionID: tx.ID, PaymentID: strconv.FormatInt(tx.ID, 10),
		TransactionNumber: tx.Number, TransactionStatusID: tx.Status, PaymentRequestStatusID: req.Status,
		LastLog:    payment.LastLog{TransactionStatusID: tx.Status, Message: tx.Message, Code: tx.Code},
		NextAction: next,
	}
}

// nextAction is what a pending transaction asks of the payer; the 3-D
// Secure URL is signed afresh on every call.
func (s *Service) nextAction(tx *payment.Transaction, baseURL, returnTo string) *provider.NextAction {
	if tx.Status != payment.TxPending || tx.NextAction == nil {
		return nil
	}
	na := &provider.NextAction{Type: ActionTypeOf(tx.Method, tx.NextAction.Type), QRPayload: tx.NextAction.QRPayload, Reference: tx.NextAction.Reference}
	if na.Type == provider.ActionThreeDSRedirect {
		na.URL = s.ChallengeURL(baseURL, tx.ID, returnTo)
	}
	return na
}
