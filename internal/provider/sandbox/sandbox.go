// Package sandbox is the simulated provider of the test environment. The
// outcome of an attempt is chosen by the input — card number, wallet token,
// UPI id or payer e-mail — from the published test data (TestData,
// docs/sandbox.md). Like a real acquirer it books every charge and refund in
// its own ledger (ledger.go), keyed by the caller's reference, so a repeated
// call never charges twice and Lookup can tell what happened to a reference.
// Results that come later are described in Outcome.Async for the service's
// sandbox function to deliver through the signed /callbacks endpoints.
package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

// Default delays; deployments may shorten them, tests usually do.
const (
	DefaultQRDelay          = 5 * time.Second
	DefaultUPIDelay         = 5 * time.Second
	DefaultUPICollectWindow = 60 * time.Second
	// DefaultPendingHold is how long pending@upi stays pending: longer than
	// the embedded checkout page waits (120 s) before payment.pending, so a
	// merchant can see onPending in the sandbox.
	DefaultPendingHold = 5 * time.Minute
)

// Options configures a Sandbox. Zero values select the defaults.
type Options struct {
	// ChallengeURL is the address of the sandbox 3-D Secure challenge page
	// for a transaction. Default: /payments/threeds/redirect/{transactionId}.
	ChallengeURL func(transactionID int64) string
	// QRDelay is how long after a QR attempt the "payer" pays it.
	QRDelay time.Duration
	// UPIDelay is how long after a UPI attempt the "payer" answers the
	// collect request.
	UPIDelay time.Duration
	// UPICollectWindow is how long a collect request stays open; timeout@upi
	// is declined with 013 when it closes.
	UPICollectWindow time.Duration
	// PendingHold is how long pending@upi stays pending before it is
	// approved.
	PendingHold time.Duration
	// ChallengeWindow is how long a 3-D Secure challenge stays open; Lookup
	// declines an unanswered one with 013 afterwards.
	ChallengeWindow time.Duration
	// Ledger books charges and refunds (required in deployments; a
	// MemoryLedger when nil, for unit tests).
	Ledger ledger.Store
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultChallengeWindow matches the service's challenge window.
const DefaultChallengeWindow = 10 * time.Minute

// Sandbox implements provider.Provider. It is safe for concurrent use.
type Sandbox struct{ opts Options }

var _ provider.Provider = (*Sandbox)(nil)

// New returns a sandbox provider with opts' zero values replaced by defaults.
func New(opts Options) *Sandbox {
	if opts.ChallengeURL == nil {
		opts.ChallengeURL = func(id int64) string { return "/payments/threeds/redirect/" + strconv.FormatInt(id, 10) }
	}
	if opts.QRDelay <= 0 {
		opts.QRDelay = DefaultQRDelay
	}
	if opts.UPIDelay <= 0 {
		opts.UPIDelay = DefaultUPIDelay
	}
	if opts.UPICollectWindow <= 0 {
		opts.UPICollectWindow = DefaultUPICollectWindow
	}
	if opts.ChallengeWindow <= 0 {
		opts.ChallengeWindow = DefaultChallengeWindow
	}
	if opts.PendingHold <= 0 {
		opts.PendingHold = DefaultPendingHold
	}
	if opts.Ledger == nil {
		opts.Ledger = NewMemoryLedger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Sandbox{opts: opts}
}

// Charge decides the attempt's outcome from its test input.
func (s *Sandbox) Charge(ctx context.Context, req provider.ChargeRequest) (provider.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.Outcome{}, err
	}
	if !req.Amount.IsPositive() {
		return provider.Outcome{}, fmt.Errorf("%w: amount must be positive", provider.ErrInvalidRequest)
	}
	if req.Reference == "" {
		return provider.Outcome{}, fmt.Errorf("%w: charge without a reference", provider.ErrInvalidRequest)
	}
	e, err := effectOf(req)
	if err != nil {
		return provider.Outcome{}, err
	}
	now := s.opts.Now().UTC()
	out := s.apply(req, e)
	entry := ledger.Entry{
		Reference: req.Reference, Kind: ledger.KindCharge, TransactionID: req.TransactionID, Method: req.Method,
		Amount: req.Amount.String(), Unit: req.Unit, Status: out.Status, Code: out.Code, Message: out.Message,
		ProviderRef: out.ProviderRef, NextAction: out.NextAction, AlwaysFails: e.alwaysFails,
		CreatedAt: now, UpdatedAt: now,
	}
	if out.Async != nil {
		entry.AsyncStatus, entry.AsyncCode, entry.DueAt = out.Async.Status, out.Async.Code, now.Add(out.Async.After)
	} else if out.Status == provider.Pending {
		entry.DueAt = now.Add(s.opts.ChallengeWindow)
	}
	stored, created, err := s.opts.Ledger.PutLedgerEntry(ctx, entry)
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	if created {
		return out, nil
	}
	// A reference seen before: the first call's outcome, no second charge.
	return outcomeOf(stored, now), nil
}

// Lookup reports the outcome booked for reference. An asynchronous result
// whose time has come, and a challenge left unanswered past its window,
// become final here. A reference never charged is closed (abandoned), so a
// late Charge with it is declined without moving money.
func (s *Sandbox) Lookup(ctx context.Context, reference string) (provider.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.Outcome{}, err
	}
	now := s.opts.Now().UTC()
	e, err := s.opts.Ledger.LedgerEntry(ctx, reference)
	if errkind.Is(err, errkind.NotFound) {
		stored, created, perr := s.opts.Ledger.PutLedgerEntry(ctx, ledger.Entry{Reference: reference, Kind: ledger.KindCharge,
			Status: provider.Declined, Code: codes.TransactionCancelled, Abandoned: true, CreatedAt: now, UpdatedAt: now})
		if perr != nil {
			return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", perr)
		}
		if created {
			return provider.Outcome{}, provider.ErrUnknownReference
		}
		e = stored // charged meanwhile
	} else if err != nil {
		return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	if e.Abandoned {
		return provider.Outcome{}, provider.ErrUnknownReference
	}
	if e.Status == provider.Pending && !e.DueAt.IsZero() && !now.Before(e.DueAt) {
		st, code := e.AsyncStatus, e.AsyncCode
		if e.NextAction != nil && e.NextAction.Type == provider.ActionThreeDSRedirect {
			st, code = provider.Declined, codes.AuthenticationTimeout
		}
		if e, err = s.opts.Ledger.SettleLedgerEntry(ctx, reference, st, code, provider.Message(st, code), now); err != nil {
			return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
		}
	}
	return outcomeOf(e, now), nil
}

// effectOf looks the request's test input up in the method's table.
func effectOf(req provider.ChargeRequest) (effect, error) {
	switch req.Method {
	case provider.MethodCard:
		if req.Card == nil {
			return effect{}, fmt.Errorf("%w: card method without card details", provider.ErrInvalidRequest)
		}
		if r, ok := cardsByDigits[card.Normalize(req.Card.Digits)]; ok {
			return r.effect, nil
		}
		return approve(), nil
	case provider.MethodWallet:
		if r, ok := walletsByToken[strings.TrimSpace(req.WalletToken)]; ok {
			return r.effect, nil
		}
		if googlePayTestToken(req.WalletToken) {
			return approve(), nil
		}
		return decline(codes.InvalidToken), nil
	case provider.MethodUPI:
		id := strings.ToLower(strings.TrimSpace(req.UPIID))
		if r, ok := upiByID[id]; ok {
			return r.effect, nil
		}
		if !payer.ValidUPI(id) {
			return decline(codes.InvalidUPI), nil
		}
		return later(provider.Approved, ""), nil
	case provider.MethodQR:
		if declineEmail(req.Email) {
			return later(provider.Declined, codes.DeclinedContactIssuer), nil
		}
		return later(provider.Approved, ""), nil
	case provider.MethodAlternative:
		if declineEmail(req.Email) {
			return decline(codes.DeclinedContactIssuer), nil
		}
		return approve(), nil
	}
	return effect{}, fmt.Errorf("%w: unknown method %q", provider.ErrInvalidRequest, req.Method)
}

func declineEmail(email string) bool {
	return strings.EqualFold(strings.TrimSpace(email), DeclineEmail)
}

// apply turns an effect into the outcome the service records.
func (s *Sandbox) apply(req provider.ChargeRequest, e effect) provider.Outcome {
	ref := "sbx_" + string(req.Method) + "_" + strconv.FormatInt(req.TransactionID, 10)
	switch e.flow {
	case Challenge:
		if !req.CardholderPresent {
			return provider.Final(provider.Declined, codes.ThreeDSDecline, ref)
		}
		ref = challengeRef(req.TransactionID, e.alwaysFails)
		o := provider.Final(provider.Pending, "", ref)
		o.Message = "Pending: 3-D Secure authentication required"
		o.NextAction = &provider.NextAction{
			Type:      provider.ActionThreeDSRedirect,
			URL:       s.opts.ChallengeURL(req.TransactionID),
			Reference: ref,
		}
		return o
	case Callback:
		o := provider.Final(provider.Pending, "", ref)
		o.Async = &provider.AsyncResult{Status: e.status, Code: e.code}
		switch req.Method {
		case provider.MethodQR:
			o.Message = "Pending: waiting for the QR code to be paid"
			o.Async.After = s.opts.QRDelay
			o.NextAction = &provider.NextAction{Type: provider.ActionQR, QRPayload: qrPayload(req, ref), Reference: ref}
		default:
			o.Message = "Pending: waiting for the payer to approve the UPI collect request"
			o.Async.After = s.opts.UPIDelay
			if e.collectTimeout {
				o.Async.After = s.opts.UPICollectWindow
			}
			if e.held {
				o.Async.After = s.opts.PendingHold
			}
			o.NextAction = &provider.NextAction{Type: provider.ActionUPICollect, Reference: ref}
		}
		return o
	}
	return provider.Final(e.status, e.code, ref)
}

// qrPayload is what the payer's app would scan. It names the sandbox so it
// can never be mistaken for a real payment code.
func qrPayload(req provider.ChargeRequest, ref string) string {
	q := url.Values{"ref": {ref}, "amount": {req.Amount.String()}, "unit": {req.Unit}}
	return "payreq-sandbox:qr?" + q.Encode()
}

// Challenge references carry whether the challenge can succeed, because the
// sandbox has no memory of the card between Charge and CompleteChallenge.
// They are stored server-side only, so the payer cannot alter them.
const (
	challengePrefix        = "sbx_3ds_"
	failingChallengePrefix = "sbx_3dsfail_"
)

func challengeRef(txID int64, alwaysFails bool) string {
	prefix := challengePrefix
	if alwaysFails {
		prefix = failingChallengePrefix
	}
	return prefix + strconv.FormatInt(txID, 10)
}

// CompleteChallenge maps the button pressed on the sandbox challenge page to
// the final outcome: approve → approved, fail → declined 004. The
// "3-D Secure failed" test inputs decline with 004 whatever was pressed. The
// first answer is booked; later answers get the booked outcome.
func (s *Sandbox) CompleteChallenge(ctx context.Context, res provider.ChallengeResult) (provider.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.Outcome{}, err
	}
	e, err := s.opts.Ledger.LedgerEntry(ctx, res.Reference)
	if errkind.Is(err, errkind.NotFound) || (err == nil && (e.Abandoned || e.NextAction == nil && e.Status == provider.Pending)) {
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	now := s.opts.Now().UTC()
	if !strings.HasPrefix(e.ProviderRef, challengePrefix) && !strings.HasPrefix(e.ProviderRef, failingChallengePrefix) {
		return provider.Outcome{}, provider.ErrUnknownChallenge // no challenge was ever opened
	}
	if e.Status != provider.Pending {
		return outcomeOf(e, now), nil
	}
	st, code := provider.Declined, codes.ThreeDSDecline
	if res.Approved && !e.AlwaysFails {
		st, code = provider.Approved, ""
	}
	e, err = s.opts.Ledger.SettleLedgerEntry(ctx, res.Reference, st, code, provider.Message(st, code), now)
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	return outcomeOf(e, now), nil
}

var _ provider.ChallengeAbandoner = (*Sandbox)(nil)

// AbandonChallenge closes an open challenge as if its window had ended
// (declined 013). The ledger settles it conditionally (pending only), so a
// payer's answer that wins the race is the booked outcome instead.
func (s *Sandbox) AbandonChallenge(ctx context.Context, reference string) (provider.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.Outcome{}, err
	}
	e, err := s.opts.Ledger.LedgerEntry(ctx, reference)
	if errkind.Is(err, errkind.NotFound) || (err == nil && (e.Abandoned || !strings.HasPrefix(e.ProviderRef, challengePrefix) &&
		!strings.HasPrefix(e.ProviderRef, failingChallengePrefix))) {
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	if err != nil {
		return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	now := s.opts.Now().UTC()
	if e.Status == provider.Pending {
		st, code := provider.Declined, codes.AuthenticationTimeout
		if e, err = s.opts.Ledger.SettleLedgerEntry(ctx, reference, st, code, provider.Message(st, code), now); err != nil {
			return provider.Outcome{}, fmt.Errorf("sandbox ledger: %w", err)
		}
	}
	return outcomeOf(e, now), nil
}

// Refund approves every well-formed refund: the sandbox has no balance to
// run out of. Checking the amount against the charge is the service's job.
// The refund id is booked, so a repeated refund returns money once; a void
// also marks its charge voided.
func (s *Sandbox) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.RefundOutcome{}, err
	}
	if !req.Amount.IsPositive() || req.RefundID == "" {
		return provider.RefundOutcome{}, fmt.Errorf("%w: a refund needs an id and a positive amount", provider.ErrInvalidRequest)
	}
	now := s.opts.Now().UTC()
	ref := "sbx_rf_" + strconv.FormatInt(req.TransactionID, 10) + "_" + req.RefundID
	stored, _, err := s.opts.Ledger.PutLedgerEntry(ctx, ledger.Entry{Reference: "refund#" + req.RefundID, Kind: ledger.KindRefund,
		TransactionID: req.TransactionID, Amount: req.Amount.String(), Unit: req.Unit, Status: provider.Approved,
		Message: "Refunded", ProviderRef: ref, ChargeRef: req.ChargeReference, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return provider.RefundOutcome{}, fmt.Errorf("sandbox ledger: %w", err)
	}
	if req.Void && req.ChargeReference != "" {
		if err := s.opts.Ledger.VoidLedgerEntry(ctx, req.ChargeReference, now); err != nil && !errkind.Is(err, errkind.NotFound) {
			return provider.RefundOutcome{}, fmt.Errorf("sandbox ledger: %w", err)
		}
	}
	return provider.RefundOutcome{Status: stored.Status, Message: stored.Message, ProviderRef: stored.ProviderRef}, nil
}

// googlePayTestToken reports whether token is what Google Pay's TEST
// environment hands the hosted page's button: a payment token (JSON with
// protocolVersion and signedMessage) whose payload is the same whatever card
// the payer picks, so the sandbox approves it like tok_success. The other
// outcomes are reached by sending the tok_… tokens.
func googlePayTestToken(token string) bool {
	var t struct {
		ProtocolVersion string `json:"protocolVersion"`
		SignedMessage   string `json:"signedMessage"`
	}
	return json.Unmarshal([]byte(token), &t) == nil && t.ProtocolVersion != "" && t.SignedMessage != ""
}
