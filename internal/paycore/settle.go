package paycore

import (
	"context"
	"errors"
	"fmt"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// ProviderResult is a provider's asynchronous final result for a pending
// transaction, as a callback reports it.
type ProviderResult struct {
	EventID string // the provider's event id (logged; processing is idempotent without it)
	// Connector names the connector whose event this is
	// (internal/connector); it changes only a transaction that connector
	// charged. "": not checked (the sandbox's own callbacks).
	Connector        string
	TransactionID    int64
	PaymentRequestID int64 // optional; checked against the transaction when given
	Status           provider.Status
	Code             codes.Code
	Message          string
	ProviderRef      string
	ThreeDS          string // payment.ThreeDS* for 3-D Secure results
	// Facts are what an acquirer's event says of its charge. When set, the
	// result is an acquirer event and changes the transaction only if it
	// is bound to it (Bind, with event rules); otherwise ErrUnbound.
	Facts *provider.ChargeFacts
}

// Event is an acquirer's event as the service reads it (provider/stripe
// reads Stripe's): Payment, Refund or Dispute is the result to apply; none
// is set when there is nothing to settle, and Ignored marks an event the
// service does not act on (acknowledged all the same).
type Event struct {
	ID, Type string
	Ignored  bool
	Payment  *ProviderResult
	Refund   *RefundResult
	Dispute  *DisputeResult
}

// Settled is what a callback did.
type Settled struct {
	Duplicate   bool                 // the transaction was already final; nothing changed
	Changed     bool                 // this call moved the transaction out of waiting or pending
	Transaction *payment.Transaction // the transaction as it is now
	Request     *payment.Request     // may be nil
}

// ErrMismatch: the callback's payment request is not the transaction's.
var ErrMismatch = errors.New("transaction does not belong to that payment request")

// Settle applies a provider result. It is an idempotent state transition,
// not a "seen this event" check: the request commit and the transaction's
// settle are guarded writes that do nothing when already done, so the
// provider's retry of a callback whose processing a crash cut short
// completes the work, and a duplicate changes nothing.
func (s *Service) Settle(ctx context.Context, r ProviderResult) (Settled, error) {
	if !r.Status.Final() || r.TransactionID <= 0 {
		return Settled{}, fmt.Errorf("settle: invalid result %+v", r)
	}
	tx, err := s.loadTx(ctx, r.TransactionID)
	if err != nil {
		return Settled{}, err
	}
	if err := s.bindConnector(tx, r.Connector, "event "+r.EventID); err != nil {
		return Settled{Transaction: tx}, err
	}
	if r.Facts != nil && !s.lateAfterCancel(ctx, tx, r) {
		if err := s.bind(tx, r.ProviderRef, r.Facts, true, "event "+r.EventID); err != nil {
			return Settled{Transaction: tx}, err
		}
	}
	if r.PaymentRequestID != 0 && tx.PaymentRequestID != r.PaymentRequestID {
		return Settled{}, ErrMismatch
	}
	if tx.Status.Final() {
		if r.Facts != nil {
			// An acquirer's success for a declined transaction: voided.
			if st, ok, err := s.lateSuccess(ctx, tx, r.Status, r.ProviderRef); ok {
				return st, err
			}
		}
		// The request commit always precedes the settle, so nothing is left
		// to do: a duplicate (or a result for an attempt already closed).
		return Settled{Duplicate: true, Transaction: tx}, nil
	}
	crashpoint.Hit(crashpoint.InCallback)
	return s.settleWith(ctx, tx, provider.Outcome{Status: r.Status, Code: r.Code, Message: r.Message, ProviderRef: r.ProviderRef}, r.ThreeDS)
}

// lateAfterCancel reports whether r is the success of a charge that a
// technical cancel could not stop (cancelUnknown): an approved result, with
// the acquirer's object id and charge facts matching declined transaction
// tx, which has no object id (its charge never answered), at a connector
// that cancels by reference. Such an event binds on its facts alone (an
// event otherwise needs the stored id) and only to be voided (lateSuccess):
// it can return money, never book a payment.
func (s *Service) lateAfterCancel(ctx context.Context, tx *payment.Transaction, r ProviderResult) bool {
	if tx.Status != payment.TxDeclined || tx.ProviderRef != "" || r.Status != provider.Approved || r.ProviderRef == "" || r.Facts == nil {
		return false
	}
	if _, ok := s.ProviderOf(ctx, tx).(provider.ReferenceCanceller); !ok {
		return false
	}
	return s.bind(tx, "", r.Facts, false, "late charge after a technical cancel, event "+r.EventID) == nil
}

func (s *Service) settleWith(ctx context.Context, tx *payment.Transaction, out provider.Outcome, threeDS string) (Settled, error) {
	req, st, changed, err := s.completeOnce(ctx, tx, out, threeDS)
	if err != nil {
		return Settled{}, err
	}
	return Settled{Duplicate: !changed, Changed: changed, Transaction: st, Request: req}, nil
}

func (s *Service) loadTx(ctx context.Context, id int64) (*payment.Transaction, error) {
	tx, err := s.txs.Transaction(ctx, id)
	if errkind.Is(err, errkind.NotFound) {
		return nil, ErrUnknownTransaction
	}
	return tx, err
}

// CompleteChallenge applies the payer's answer on the 3-D Secure challenge
// page (approve or fail) through the provider. The provider books the first
// answer, so repeating the call (a retry, a double click) yields the same
// outcome.
func (s *Service) CompleteChallenge(ctx context.Context, eventID string, txID, requestID int64, approved bool) (Settled, error) {
	tx, err := s.loadTx(ctx, txID)
	if err != nil {
		return Settled{}, err
	}
	if requestID != 0 && tx.PaymentRequestID != requestID {
		return Settled{}, ErrMismatch
	}
	if tx.Status.Final() {
		return s.settleWith(ctx, tx, provider.Outcome{Status: provider.Status(tx.Status), Code: tx.Code, Message: tx.Message}, "")
	}
	if tx.ThreeDS != payment.ThreeDSChallenge {
		return Settled{Transaction: tx}, nil
	}
	out, err := s.ProviderOf(ctx, tx).CompleteChallenge(ctx, provider.ChallengeResult{Reference: tx.Reference, TransactionID: txID,
		ProviderRef: tx.ProviderRef, Approved: approved})
	if err != nil {
		return Settled{}, fmt.Errorf("complete 3-D Secure challenge of transaction %d: %w", txID, err)
	}
	if err := s.bind(tx, out.ProviderRef, out.Facts, false, "3-D Secure completion"); err != nil {
		return Settled{Transaction: tx}, err
	}
	tds := payment.ThreeDSFailed
	if out.Status == provider.Approved {
		tds = payment.ThreeDSAuthenticated
	}
	crashpoint.Hit(crashpoint.InCallback)
	return s.settleWith(ctx, tx, out, tds)
}

// ExpireChallenge ends a 3-D Secure attempt whose challenge window has
// passed: the provider says what became of it (an unanswered challenge is
// declined 013), unless it was settled meanwhile.
func (s *Service) ExpireChallenge(ctx context.Context, eventID string, txID, requestID int64) (Settled, error) {
	tx, err := s.loadTx(ctx, txID)
	if err != nil {
		return Settled{}, err
	}
	if requestID != 0 && tx.PaymentRequestID != requestID {
		return Settled{}, ErrMismatch
	}
	if tx.Status.Final() {
		return Settled{Duplicate: true, Transaction: tx}, nil
	}
	if err := s.Recover(ctx, tx); err != nil {
		return Settled{}, err
	}
	st, err := s.loadTx(ctx, txID)
	if err != nil {
		return Settled{}, err
	}
	return Settled{Changed: st.Status.Final(), Transaction: st}, nil
}
