package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// ProviderResult is a provider's asynchronous final result for a pending
// transaction, as a callback reports it.
type ProviderResult struct {
	EventID          string // the provider's event id: duplicates are acknowledged without effect
	TransactionID    int64
	PaymentRequestID int64 // optional; saves a read when given
	Status           provider.Status
	Code             codes.Code
	Message          string
	ProviderRef      string
	ThreeDS          string // dynamo.ThreeDS* for 3-D Secure results
}

// Settled is what a callback did.
type Settled struct {
	Duplicate   bool                // the event was seen before; nothing changed
	Changed     bool                // this call moved the transaction out of pending
	Transaction *dynamo.Transaction // may be nil for duplicates
	Request     *payment.Request    // may be nil
}

// ErrMismatch: the callback's payment request is not the transaction's.
var ErrMismatch = errors.New("transaction does not belong to that payment request")

// Settle applies a provider result exactly once. The happy path is three
// writes: the event record (conditional put), the request commit guarded by
// the attempt lease, and the transaction's pending → final transition. A
// duplicate event, a result for a settled transaction and a result arriving
// out of order change nothing.
func (s *Service) Settle(ctx context.Context, r ProviderResult) (Settled, error) {
	if !r.Status.Final() || r.TransactionID <= 0 || r.EventID == "" {
		return Settled{}, fmt.Errorf("settle: invalid result %+v", r)
	}
	if err := s.Store.MarkCallbackEvent(ctx, r.EventID, s.Now(), CallbackEventTTL); errors.Is(err, dynamo.ErrExists) {
		return Settled{Duplicate: true}, nil
	} else if err != nil {
		return Settled{}, err
	}
	res, err := s.settle(ctx, r, nil)
	if err != nil {
		s.forget(r.EventID)
	}
	return res, err
}

// forget removes the event record of a failed processing, so that the
// provider's retry is processed.
func (s *Service) forget(eventID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Store.ForgetCallbackEvent(ctx, eventID); err != nil {
		s.Log.Error("forget callback event failed; its retries will be ignored", "event_id", eventID, "error", err.Error())
	}
}

func (s *Service) settle(ctx context.Context, r ProviderResult, tx *dynamo.Transaction) (Settled, error) {
	now := s.Now().UTC()
	if r.Message == "" {
		r.Message = provider.Message(r.Status, r.Code)
	}
	prID := r.PaymentRequestID
	if prID == 0 {
		if tx == nil {
			var err error
			if tx, err = s.loadTx(ctx, r.TransactionID); err != nil {
				return Settled{}, err
			}
		}
		prID = tx.PaymentRequestID
	}
	num := ""
	if tx != nil {
		num = tx.Number
	}
	status := payment.TransactionStatus(r.Status)
	req, err := s.commit(ctx, dynamo.AttemptCommit{RequestID: prID, TransactionID: r.TransactionID,
		TransactionNumber: num, Status: status, Code: r.Code, Message: r.Message, Now: now})
	if err == nil {
		st, err := s.Store.SettleTransaction(ctx, dynamo.Settlement{TransactionID: r.TransactionID, Status: status,
			Code: r.Code, Message: r.Message, ProviderRef: r.ProviderRef, ThreeDS: r.ThreeDS, Now: now})
		if errors.Is(err, dynamo.ErrConflict) {
			// Only a stalled call can get here: another result closed it.
			s.Log.Warn("transaction settled elsewhere after its request commit", "transaction_id", r.TransactionID)
			st, err = s.loadTx(ctx, r.TransactionID)
		}
		if err != nil {
			return Settled{}, err
		}
		s.release(ctx, st)
		return Settled{Changed: true, Transaction: st, Request: req}, nil
	}
	if !errors.Is(err, dynamo.ErrConflict) {
		return Settled{}, err
	}
	// The request is not waiting for this attempt any more.
	if tx == nil || tx.Status == payment.TxPending {
		if tx, err = s.loadTx(ctx, r.TransactionID); err != nil {
			return Settled{}, err
		}
	}
	if r.PaymentRequestID != 0 && tx.PaymentRequestID != r.PaymentRequestID {
		return Settled{}, ErrMismatch
	}
	if tx.Status != payment.TxPending {
		return Settled{Transaction: tx}, nil // already final: never regress
	}
	cur, _, err := s.Store.PaymentRequestLease(ctx, tx.PaymentRequestID)
	if err != nil {
		return Settled{}, err
	}
	if cur.TransactionID == tx.ID && cur.TransactionStatus != nil && *cur.TransactionStatus != payment.TxPending {
		// A concurrent result committed the request; its transaction write follows.
		return Settled{Transaction: tx, Request: cur}, nil
	}
	// The request was cancelled, or the attempt's lease lapsed and another
	// attempt took over: this attempt can no longer pay it.
	if r.Status == provider.Approved {
		s.void(ctx, tx)
	}
	cancelled := provider.Final(provider.Declined, codes.TransactionCancelled, "")
	st, err := s.Store.SettleTransaction(ctx, dynamo.Settlement{TransactionID: tx.ID, Status: payment.TxDeclined,
		Code: cancelled.Code, Message: cancelled.Message, ProviderRef: r.ProviderRef, ThreeDS: r.ThreeDS, Now: now})
	if errors.Is(err, dynamo.ErrConflict) {
		return Settled{Transaction: tx, Request: cur}, nil
	}
	if err != nil {
		return Settled{}, err
	}
	s.release(ctx, st)
	return Settled{Changed: true, Transaction: st, Request: cur}, nil
}

func (s *Service) loadTx(ctx context.Context, id int64) (*dynamo.Transaction, error) {
	tx, err := s.Store.Transaction(ctx, id)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, ErrUnknownTransaction
	}
	return tx, err
}

// CompleteChallenge applies the payer's answer on the 3-D Secure challenge
// page (approve or fail) through the provider, exactly once per eventID.
func (s *Service) CompleteChallenge(ctx context.Context, eventID string, txID, requestID int64, approved bool) (Settled, error) {
	if err := s.Store.MarkCallbackEvent(ctx, eventID, s.Now(), CallbackEventTTL); errors.Is(err, dynamo.ErrExists) {
		tx, err := s.loadTx(ctx, txID)
		return Settled{Duplicate: true, Transaction: tx}, err
	} else if err != nil {
		return Settled{}, err
	}
	res, err := s.completeChallenge(ctx, eventID, txID, requestID, approved)
	if err != nil {
		s.forget(eventID)
	}
	return res, err
}

func (s *Service) completeChallenge(ctx context.Context, eventID string, txID, requestID int64, approved bool) (Settled, error) {
	tx, err := s.loadTx(ctx, txID)
	if err != nil {
		return Settled{}, err
	}
	if requestID != 0 && tx.PaymentRequestID != requestID {
		return Settled{}, ErrMismatch
	}
	if tx.Status != payment.TxPending || tx.ThreeDS != dynamo.ThreeDSChallenge {
		return Settled{Transaction: tx}, nil
	}
	out, err := s.Provider.CompleteChallenge(ctx, provider.ChallengeResult{TransactionID: txID, ProviderRef: tx.ProviderRef, Approved: approved})
	if err != nil {
		return Settled{}, fmt.Errorf("complete 3-D Secure challenge of transaction %d: %w", txID, err)
	}
	tds := dynamo.ThreeDSFailed
	if out.Status == provider.Approved {
		tds = dynamo.ThreeDSAuthenticated
	}
	return s.settle(ctx, ProviderResult{EventID: eventID, TransactionID: txID, PaymentRequestID: tx.PaymentRequestID,
		Status: out.Status, Code: out.Code, Message: out.Message, ProviderRef: out.ProviderRef, ThreeDS: tds}, tx)
}

// ExpireChallenge declines a 3-D Secure attempt whose challenge was never
// answered (013), unless it was settled meanwhile.
func (s *Service) ExpireChallenge(ctx context.Context, eventID string, txID, requestID int64) (Settled, error) {
	return s.Settle(ctx, ProviderResult{EventID: eventID, TransactionID: txID, PaymentRequestID: requestID,
		Status: provider.Declined, Code: codes.AuthenticationTimeout, ThreeDS: dynamo.ThreeDSTimedOut})
}
