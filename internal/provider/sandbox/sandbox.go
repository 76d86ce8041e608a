// Package sandbox is the simulated provider of the test environment. The
// outcome of an attempt is chosen by the input — card number, wallet token,
// UPI id or payer e-mail — from the published test data (TestData,
// docs/sandbox.md, DESIGN §4). It never touches the network and keeps no
// state: results that come later are described in Outcome.Async for the
// service's sandbox function to deliver through the signed /callbacks
// endpoints, and challenge state travels in Outcome.ProviderRef.
package sandbox

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/provider"
)

// Default delays; deployments may shorten them, tests usually do.
const (
	DefaultQRDelay          = 5 * time.Second
	DefaultUPIDelay         = 5 * time.Second
	DefaultUPICollectWindow = 60 * time.Second
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
}

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
	e, err := effectOf(req)
	if err != nil {
		return provider.Outcome{}, err
	}
	return s.apply(req, e), nil
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
// "3-D Secure failed" test inputs decline with 004 whatever was pressed.
func (s *Sandbox) CompleteChallenge(ctx context.Context, res provider.ChallengeResult) (provider.Outcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.Outcome{}, err
	}
	id := strconv.FormatInt(res.TransactionID, 10)
	var alwaysFails bool
	switch res.ProviderRef {
	case challengePrefix + id:
	case failingChallengePrefix + id:
		alwaysFails = true
	default:
		return provider.Outcome{}, provider.ErrUnknownChallenge
	}
	if res.Approved && !alwaysFails {
		return provider.Final(provider.Approved, "", res.ProviderRef), nil
	}
	return provider.Final(provider.Declined, codes.ThreeDSDecline, res.ProviderRef), nil
}

// Refund approves every well-formed refund: the sandbox has no balance to
// run out of. Checking the amount against the charge is the service's job.
func (s *Sandbox) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	if err := ctx.Err(); err != nil {
		return provider.RefundOutcome{}, err
	}
	if !req.Amount.IsPositive() {
		return provider.RefundOutcome{}, fmt.Errorf("%w: refund amount must be positive", provider.ErrInvalidRequest)
	}
	ref := "sbx_rf_" + strconv.FormatInt(req.TransactionID, 10)
	if req.RefundID != "" {
		ref += "_" + req.RefundID
	}
	return provider.RefundOutcome{Status: provider.Approved, Message: "Refunded", ProviderRef: ref}, nil
}
