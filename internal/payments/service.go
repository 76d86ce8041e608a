// Package payments is the core of payment attempts: it takes the attempt
// lease on a payment request, checks the merchant's limits, charges through
// a provider.Provider, records the transaction and moves the request and the
// transaction through their states with conditional writes only. It is
// transport-independent: the payments function's HTTP handler (this
// package's Handler), the hosted checkout and the batch processor all call
// Service.
//
// States (spec "States and transitions"):
//
//	transaction  0 waiting → 3 pending → 1 approved | 2 declined   (or 0 → 1 | 2)
//	request      2 unpaid → 1 paid          (3 cancelled by the merchant API)
//
// "Waiting" is the attempt lease: the request item names the transaction
// that may charge it (attemptTx) until leaseUntil. One conditional UpdateItem
// takes it, so a second concurrent attempt is refused (409). Every later
// write is guarded by the current state: the request is paid only by the
// transaction holding its lease and only while unpaid (so paying and
// cancelling exclude each other), a transaction leaves pending exactly once,
// and an approved transaction never changes status again.
package payments

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/problem"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/sandboxworker"
)

// Store is the persistence the service needs (*dynamo.Store).
type Store interface {
	LeasePaymentRequest(ctx context.Context, l dynamo.Lease) (*payment.Request, error)
	CreateLeasedPaymentRequest(ctx context.Context, r *payment.Request, txID int64, until time.Time) error
	PaymentRequestLease(ctx context.Context, id int64) (*payment.Request, dynamo.AttemptLease, error)
	CommitAttempt(ctx context.Context, c dynamo.AttemptCommit) (*payment.Request, error)
	ReleaseLease(ctx context.Context, requestID, txID int64) error
	CreateTransaction(ctx context.Context, t *dynamo.Transaction) error
	Transaction(ctx context.Context, id int64) (*dynamo.Transaction, error)
	TransactionByNumber(ctx context.Context, num string) (*dynamo.Transaction, error)
	SettleTransaction(ctx context.Context, s dynamo.Settlement) (*dynamo.Transaction, error)
	BeginRefund(ctx context.Context, txID int64, merchantID string, r dynamo.Refund) (*dynamo.Transaction, error)
	CompleteRefund(ctx context.Context, txID int64, refundID, status, providerRef string, code codes.Code, now time.Time) (*dynamo.Transaction, error)
	ReserveLimits(ctx context.Context, w dynamo.LimitWindow, amount decimal.Decimal, caps dynamo.LimitCaps) error
	ReleaseLimits(ctx context.Context, w dynamo.LimitWindow, amount decimal.Decimal) error
	LimitUsageOf(ctx context.Context, w dynamo.LimitWindow) (dynamo.LimitUsage, error)
	MarkCallbackEvent(ctx context.Context, eventID string, now time.Time, ttl time.Duration) error
	ForgetCallbackEvent(ctx context.Context, eventID string) error
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
}

// Sender queues a message (internal/queue).
type Sender interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// Defaults of Deps.
const (
	DefaultSyncLease       = 30 * time.Second
	DefaultChallengeWindow = 10 * time.Minute
	DefaultPendingGrace    = time.Minute
	// CallbackEventTTL is how long provider event ids are remembered.
	CallbackEventTTL = 7 * 24 * time.Hour
)

// Deps are the service's collaborators.
type Deps struct {
	Store    Store
	Provider provider.Provider
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
	// SyncLease bounds a synchronous attempt (Lambda times out long before).
	SyncLease time.Duration
	// ChallengeWindow is how long a 3-D Secure challenge stays open.
	ChallengeWindow time.Duration
	// PendingGrace is added to a pending attempt's window before its lease
	// lets another attempt in.
	PendingGrace time.Duration
}

// Service runs payment attempts.
type Service struct{ Deps }

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
	return &Service{d}
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

	// Amount and Unit, when set, must equal the request's (400 026 / 027).
	Amount *decimal.Decimal
	Unit   string

	// BaseURL is this service's public base URL, used in nextAction URLs.
	BaseURL string
	// ReturnTo is where the 3-D Secure page sends the payer afterwards: a
	// path on this service, or the request's successUrl/failureUrl.
	ReturnTo string
}

// Result is the response of a processed attempt (DESIGN §3).
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

// payerKind is the payer-data rule set of a method.
func payerKind(m provider.Method) payer.Kind {
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

// SelectorEnabled reports whether merchant m may use selector n.
func (s *Service) SelectorEnabled(m *merchant.Merchant, n int) bool {
	if !merchant.KnownSelector(n) || !slices.Contains(m.Methods, n) {
		return false
	}
	return n != merchant.SandboxSelector || (m.Sandbox && s.Sandbox)
}

// SelectorProblem is the 400 045 of a selector the merchant cannot use.
func SelectorProblem(n int) *problem.Problem {
	return problem.BadRequest(fmt.Sprintf("Payment method selector %d is not enabled for this merchant.", n), codes.InvalidPaymentMethod)
}

// validate checks an attempt before anything is written.
func (s *Service) validate(m *merchant.Merchant, a *Attempt, now time.Time) (*card.Details, error) {
	if a.Selector != 0 && !s.SelectorEnabled(m, a.Selector) {
		return nil, SelectorProblem(a.Selector)
	}
	var errs []problem.FieldError
	switch a.Method {
	case provider.MethodCard, provider.MethodWallet, provider.MethodQR, provider.MethodUPI, provider.MethodAlternative:
	default:
		return nil, problem.BadRequest("Unknown payment method "+strconv.Quote(string(a.Method))+".", codes.InvalidPaymentMethod)
	}
	if a.Payer != nil {
		errs = append(errs, a.Payer.Validate(payerKind(a.Method))...)
		if a.WalletToken == "" && a.Payer.Token != nil {
			a.WalletToken = *a.Payer.Token
		}
		if a.UPIID == "" {
			a.UPIID = a.Payer.UPIID
		}
	} else if a.Method != provider.MethodCard && !a.Hosted {
		errs = append(errs, problem.FieldError{Field: payer.FieldName, Code: codes.InvalidName, Detail: "payer data is required"})
	}
	var det *card.Details
	if a.Method == provider.MethodCard {
		if a.Card == nil {
			errs = append(errs, problem.FieldError{Field: "card", Code: codes.InvalidCardNumber, Detail: "card is required"})
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
		errs = append(errs, problem.FieldError{Field: payer.FieldToken, Code: codes.InvalidToken, Detail: "token is required"})
	}
	if a.Method == provider.MethodUPI && a.Payer == nil && !payer.ValidUPI(a.UPIID) {
		errs = append(errs, problem.FieldError{Field: payer.FieldUPIID, Code: codes.InvalidUPI, Detail: "upiId must be a UPI address such as name@bank"})
	}
	if len(errs) > 0 {
		return nil, problem.Validation(errs)
	}
	return det, nil
}

// ---- attempts --------------------------------------------------------------

// Pay runs attempt a on payment request requestID of merchant m. A processed
// attempt (approved, declined — limits included — or pending) is a Result;
// invalid input, an unknown request, a paid or cancelled request and a
// concurrent attempt are *problem.Problem errors (400, 404, 409).
func (s *Service) Pay(ctx context.Context, m *merchant.Merchant, requestID int64, a Attempt) (Result, error) {
	now := s.Now()
	det, err := s.validate(m, &a, now)
	if err != nil {
		return Result{}, err
	}
	txID := ids.New(now)
	req, err := s.Store.LeasePaymentRequest(ctx, dynamo.Lease{RequestID: requestID, MerchantID: m.ID, TransactionID: txID,
		Now: now, Until: now.Add(s.SyncLease), Amount: a.Amount, Unit: a.Unit})
	if errors.Is(err, dynamo.ErrConflict) {
		return Result{}, s.leaseRefused(ctx, m, requestID, a, now)
	}
	if err != nil {
		return Result{}, err
	}
	return s.run(ctx, m, req, txID, a, det)
}

// CreateAndPay stores the validated request r (no id yet) for merchant m
// with the attempt lease already taken, then runs a on it: the
// "amount + unit" form of POST /payments/h2h/{n}.
func (s *Service) CreateAndPay(ctx context.Context, m *merchant.Merchant, r payment.Request, a Attempt) (Result, error) {
	now := s.Now()
	det, err := s.validate(m, &a, now)
	if err != nil {
		return Result{}, err
	}
	txID := ids.New(now)
	r.MerchantID, r.Status, r.CreatedAt, r.UpdatedAt = m.ID, payment.RequestUnpaid, now.UTC(), now.UTC()
	for try := 0; ; try++ {
		r.ID = ids.New(now)
		err = s.Store.CreateLeasedPaymentRequest(ctx, &r, txID, now.Add(s.SyncLease))
		if !errors.Is(err, dynamo.ErrExists) || try == 2 {
			break
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("create payment request for merchant %s: %w", m.ID, err)
	}
	return s.run(ctx, m, &r, txID, a, det)
}

// leaseRefused explains a failed lease (one extra read, off the happy path).
func (s *Service) leaseRefused(ctx context.Context, m *merchant.Merchant, id int64, a Attempt, now time.Time) error {
	req, lease, err := s.Store.PaymentRequestLease(ctx, id)
	if errors.Is(err, dynamo.ErrNotFound) || (err == nil && req.MerchantID != m.ID) {
		return problem.NotFound(fmt.Sprintf("Payment request %d does not exist.", id))
	}
	if err != nil {
		return err
	}
	switch {
	case req.Status == payment.RequestPaid:
		return problem.Conflict(fmt.Sprintf("Payment request %d is already paid.", id), "")
	case req.Status == payment.RequestCancelled:
		return problem.Conflict(fmt.Sprintf("Payment request %d is cancelled.", id), codes.TransactionCancelled)
	case a.Amount != nil && !a.Amount.Equal(req.Amount):
		return problem.Validation([]problem.FieldError{{Field: "amount", Code: codes.InvalidAmount,
			Detail: "amount does not match the payment request's amount " + req.Amount.String()}})
	case a.Unit != "" && a.Unit != req.Unit:
		return problem.Validation([]problem.FieldError{{Field: "unit", Code: codes.InvalidCurrency,
			Detail: "unit does not match the payment request's unit " + req.Unit}})
	case lease.Active(now):
		p := problem.Conflict(fmt.Sprintf("Another payment attempt on payment request %d is in progress.", id), "")
		p.Headers = map[string][]string{"Retry-After": {"1"}}
		return p
	}
	p := problem.Conflict(fmt.Sprintf("Payment request %d changed during the attempt; retry.", id), "")
	p.Headers = map[string][]string{"Retry-After": {"1"}}
	return p
}

// NewTransactionNumber returns a public transaction number: "TX" and 16
// base32 characters of 80 random bits, unrelated to the internal id.
func NewTransactionNumber() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "TX" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}

func (s *Service) run(ctx context.Context, m *merchant.Merchant, req *payment.Request, txID int64, a Attempt, det *card.Details) (Result, error) {
	now := s.Now()
	tx := &dynamo.Transaction{
		ID: txID, Number: NewTransactionNumber(), PaymentRequestID: req.ID, MerchantID: m.ID,
		Method: string(a.Method), Selector: a.Selector, Amount: req.Amount, Unit: req.Unit,
		UPIID: a.UPIID, CreatedAt: now.UTC(), UpdatedAt: now.UTC(),
	}
	if a.Method != provider.MethodUPI {
		tx.UPIID = ""
	}
	if det != nil {
		masked := det.Masked
		tx.Card = &masked
	}
	country := ""
	if a.Payer != nil {
		tx.Payer = &dynamo.TxPayer{Name: a.Payer.Name, Email: a.Payer.Email, Phone: a.Payer.PhoneNumber, Country: a.Payer.Country}
		country = a.Payer.Country
	}
	if code := StaticLimitCode(m.Limits, req.Amount, req.Unit, country); code != "" {
		return s.finish(ctx, req, tx, provider.Final(provider.Declined, code, ""), a)
	}
	if caps := Caps(m.Limits); caps.Any() {
		w := dynamo.WindowAt(m.ID, req.Unit, now)
		code, err := s.reserve(ctx, w, req.Amount, caps)
		if err != nil {
			s.giveUp(req.ID, txID)
			return Result{}, err
		}
		if code != "" {
			return s.finish(ctx, req, tx, provider.Final(provider.Declined, code, ""), a)
		}
		tx.Limits = dynamo.NewLimitHold(w.Month, w.Day, w.Unit, req.Amount)
	}
	email := ""
	if a.Payer != nil {
		email = a.Payer.Email
	}
	out, err := s.Provider.Charge(ctx, provider.ChargeRequest{
		TransactionID: txID, PaymentRequestID: req.ID, Amount: req.Amount, Unit: req.Unit,
		Method: a.Method, Selector: a.Selector, Card: det, CVV: cvvOf(a), WalletToken: a.WalletToken, UPIID: a.UPIID,
		CardholderPresent: a.CardholderPresent, Email: email, ReturnURL: a.ReturnTo,
	})
	if err != nil {
		// No answer from the provider: the attempt fails like a bank error.
		s.Log.Error("provider charge failed", "transaction_id", txID, "error", err.Error())
		out = provider.Final(provider.Declined, codes.BankSystemError, "")
	}
	return s.finish(ctx, req, tx, out, a)
}

func cvvOf(a Attempt) string {
	if a.Card == nil {
		return ""
	}
	return a.Card.CVV
}

// giveUp releases the lease of an attempt that failed before charging, so
// the payer can retry at once (best effort: the lease expires anyway).
func (s *Service) giveUp(requestID, txID int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Store.ReleaseLease(ctx, requestID, txID); err != nil && !errors.Is(err, dynamo.ErrConflict) {
		s.Log.Warn("release attempt lease failed", "payment_request_id", requestID, "error", err.Error())
	}
}

// finish records the provider's outcome: the request commit first for a
// final outcome (the commit decides whether this attempt pays the request),
// the transaction first for a pending one (so its callback finds it).
func (s *Service) finish(ctx context.Context, req *payment.Request, tx *dynamo.Transaction, out provider.Outcome, a Attempt) (Result, error) {
	now := s.Now()
	tx.Status, tx.Code, tx.ProviderRef = payment.TransactionStatus(out.Status), out.Code, out.ProviderRef
	tx.Message = out.Message
	if tx.Message == "" {
		tx.Message = provider.Message(out.Status, out.Code)
	}
	if out.Status == provider.Pending {
		return s.finishPending(ctx, req, tx, out, a, now)
	}
	cur, err := s.commit(ctx, dynamo.AttemptCommit{RequestID: req.ID, TransactionID: tx.ID,
		TransactionNumber: tx.Number, Status: tx.Status, Code: tx.Code, Message: tx.Message, Now: now})
	if errors.Is(err, dynamo.ErrConflict) {
		return s.lostRace(ctx, tx, out, false)
	}
	if err != nil {
		return Result{}, err
	}
	settled := now.UTC()
	tx.SettledAt, tx.UpdatedAt = &settled, settled
	if err := s.createTx(ctx, tx); err != nil {
		return Result{}, err
	}
	if tx.Status == payment.TxDeclined {
		s.release(ctx, tx)
	}
	return resultOf(cur, tx, nil), nil
}

// createTx writes the transaction, once more on a transient failure: the
// request already names it.
func (s *Service) createTx(ctx context.Context, tx *dynamo.Transaction) error {
	err := s.Store.CreateTransaction(ctx, tx)
	if err != nil && !errors.Is(err, dynamo.ErrExists) {
		err = s.Store.CreateTransaction(ctx, tx)
	}
	if errors.Is(err, dynamo.ErrExists) {
		return nil
	}
	if err != nil {
		s.Log.Error("transaction record not written", "transaction_id", tx.ID, "payment_request_id", tx.PaymentRequestID, "error", err.Error())
	}
	return err
}

func (s *Service) finishPending(ctx context.Context, req *payment.Request, tx *dynamo.Transaction, out provider.Outcome, a Attempt, now time.Time) (Result, error) {
	window := s.ChallengeWindow
	if out.Async != nil {
		window = out.Async.After
	}
	tx.PendingUntil = now.Add(window)
	threeDS := out.NextAction != nil && out.NextAction.Type == provider.ActionThreeDSRedirect
	if threeDS {
		tx.ThreeDS = dynamo.ThreeDSChallenge
	}
	if out.NextAction != nil {
		tx.NextAction = &dynamo.TxNextAction{Type: out.NextAction.Type, QRPayload: out.NextAction.QRPayload, Reference: out.NextAction.Reference}
		if threeDS {
			tx.NextAction.Reference = ThreeDSID(tx.ID)
		}
	}
	if err := s.Store.CreateTransaction(ctx, tx); err != nil {
		return Result{}, err // the lease expires; nothing was committed
	}
	cur, err := s.commit(ctx, dynamo.AttemptCommit{RequestID: req.ID, TransactionID: tx.ID,
		TransactionNumber: tx.Number, Status: payment.TxPending, Message: tx.Message, Now: now,
		LeaseUntil: tx.PendingUntil.Add(s.PendingGrace)})
	if errors.Is(err, dynamo.ErrConflict) {
		return s.lostRace(ctx, tx, out, true)
	}
	if err != nil {
		return Result{}, err
	}
	s.schedule(ctx, tx, out, now)
	return resultOf(cur, tx, s.nextAction(tx, a.BaseURL, a.ReturnTo)), nil
}

// schedule queues the sandbox's asynchronous side of a pending attempt: its
// result (UPI, QR) or the expiry of an unanswered 3-D Secure challenge.
func (s *Service) schedule(ctx context.Context, tx *dynamo.Transaction, out provider.Outcome, now time.Time) {
	if !s.Sandbox || s.Queue == nil {
		return
	}
	job := sandboxworker.Job{TransactionID: tx.ID, PaymentRequestID: tx.PaymentRequestID, ProviderRef: tx.ProviderRef}
	after := s.ChallengeWindow
	if out.Async != nil {
		after = out.Async.After
		job.Kind, job.Status, job.Code = sandboxworker.KindResult, int(out.Async.Status), string(out.Async.Code)
	} else {
		job.Kind = sandboxworker.KindThreeDSTimeout
	}
	job.EventID = sandboxworker.EventIDFor(job.Kind, tx.ID)
	job.DueAt = now.Add(after).UTC()
	if err := s.Queue.Send(ctx, s.SandboxQueueURL, job, after); err != nil {
		// The attempt stays pending until its lease expires.
		s.Log.Error("queue sandbox result failed", "transaction_id", tx.ID, "error", err.Error())
	}
}

// lostRace handles an attempt whose request commit was refused: the request
// was cancelled or its lease lapsed during the attempt — or, for a pending
// attempt, its callback already settled it. A charge that can no longer pay
// the request is voided and the transaction recorded as declined 012.
func (s *Service) lostRace(ctx context.Context, tx *dynamo.Transaction, out provider.Outcome, created bool) (Result, error) {
	cur, _, err := s.Store.PaymentRequestLease(ctx, tx.PaymentRequestID)
	if err != nil {
		return Result{}, err
	}
	if created && cur.TransactionID == tx.ID && cur.TransactionStatus != nil && *cur.TransactionStatus != payment.TxPending {
		// Settled by its callback before this call returned.
		if got, err := s.Store.Transaction(ctx, tx.ID); err == nil {
			tx = got
		}
		if tx.Status == payment.TxPending {
			tx.Status = *cur.TransactionStatus
			if cur.LastLog != nil {
				tx.Code, tx.Message = cur.LastLog.Code, cur.LastLog.Message
			}
		}
		return resultOf(cur, tx, nil), nil
	}
	s.Log.Warn("attempt lost its payment request", "transaction_id", tx.ID, "payment_request_id", tx.PaymentRequestID,
		"request_status", int(cur.Status), "outcome", out.Status.String())
	if out.Status == provider.Approved {
		s.void(ctx, tx)
	}
	now := s.Now().UTC()
	cancelled := provider.Final(provider.Declined, codes.TransactionCancelled, tx.ProviderRef)
	if created {
		st, err := s.Store.SettleTransaction(ctx, dynamo.Settlement{TransactionID: tx.ID, Status: payment.TxDeclined,
			Code: cancelled.Code, Message: cancelled.Message, Now: now})
		if err == nil {
			tx = st
			s.release(ctx, tx)
		} else if !errors.Is(err, dynamo.ErrConflict) {
			return Result{}, err
		}
	} else {
		if tx.Status == payment.TxApproved {
			tx.Code, tx.Message = cancelled.Code, cancelled.Message
		}
		tx.Status, tx.SettledAt, tx.UpdatedAt = payment.TxDeclined, &now, now
		if err := s.createTx(ctx, tx); err != nil {
			return Result{}, err
		}
		s.release(ctx, tx)
	}
	return resultOf(cur, tx, nil), nil
}

// void returns the money of a charge that cannot pay its request.
func (s *Service) void(ctx context.Context, tx *dynamo.Transaction) {
	_, err := s.Provider.Refund(ctx, provider.RefundRequest{RefundID: "void_" + tx.Number, TransactionID: tx.ID,
		ProviderRef: tx.ProviderRef, Amount: tx.Amount, Unit: tx.Unit, Reason: "payment request no longer payable"})
	if err != nil {
		s.Log.Error("void of an orphan charge failed; refund it manually", "transaction_id", tx.ID, "error", err.Error())
	}
}

// release gives back the limit counters of a declined transaction.
func (s *Service) release(ctx context.Context, tx *dynamo.Transaction) {
	if tx.Limits == nil || tx.Status != payment.TxDeclined {
		return
	}
	w := dynamo.LimitWindow{MerchantID: tx.MerchantID, Month: tx.Limits.Month, Day: tx.Limits.Day, Unit: tx.Limits.Unit}
	if err := s.Store.ReleaseLimits(ctx, w, tx.Limits.AmountDecimal()); err != nil {
		s.Log.Error("release limit counters failed", "transaction_id", tx.ID, "error", err.Error())
	}
}

func resultOf(req *payment.Request, tx *dynamo.Transaction, next *provider.NextAction) Result {
	return Result{
		PaymentRequestID: req.ID, TransactionID: tx.ID, PaymentID: strconv.FormatInt(tx.ID, 10),
		TransactionNumber: tx.Number, TransactionStatusID: tx.Status, PaymentRequestStatusID: req.Status,
		LastLog:    payment.LastLog{TransactionStatusID: tx.Status, Message: tx.Message, Code: tx.Code},
		NextAction: next,
	}
}

// nextAction is what a pending transaction asks of the payer; the 3-D
// Secure URL is signed afresh on every call.
func (s *Service) nextAction(tx *dynamo.Transaction, baseURL, returnTo string) *provider.NextAction {
	if tx.Status != payment.TxPending || tx.NextAction == nil {
		return nil
	}
	na := &provider.NextAction{Type: tx.NextAction.Type, QRPayload: tx.NextAction.QRPayload, Reference: tx.NextAction.Reference}
	if na.Type == provider.ActionThreeDSRedirect {
		na.URL = s.ChallengeURL(baseURL, tx.ID, returnTo)
	}
	return na
}

// commit writes an attempt's state transition and, for a final status, sends
// the notification event the same write put in the request's outbox. A send
// failure is only logged: the outbox keeps the event and the reconciler
// enqueues it, so nothing is lost.
func (s *Service) commit(ctx context.Context, c dynamo.AttemptCommit) (*payment.Request, error) {
	req, err := s.Store.CommitAttempt(ctx, c)
	if err != nil || (c.Status != payment.TxApproved && c.Status != payment.TxDeclined) || s.NotificationsQueueURL == "" {
		return req, err
	}
	ev, evErr := c.NotifyEvent()
	if evErr == nil {
		evErr = s.Queue.Send(ctx, s.NotificationsQueueURL, ev, 0)
	}
	if evErr != nil {
		s.Log.Warn("notification not enqueued; the reconciler will send it", "payment_request_id", c.RequestID, "error", evErr.Error())
	}
	return req, nil
}
