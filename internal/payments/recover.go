package payments

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// complete drives transaction tx to the final outcome out, from any state a
// crash may have left: the request commit (which decides whether a charge
// pays the request), then the transaction's settle with its notification in
// the outbox, then the notification send. Each step is a guarded write that
// is a no-op when already done, so complete may run any number of times, in
// any process: the payment path, a callback, a retry, the reconciler.
//
// It returns the request and the final transaction.
func (s *Service) complete(ctx context.Context, tx *payment.Transaction, out provider.Outcome, threeDS string) (*payment.Request, *payment.Transaction, error) {
	req, st, _, err := s.completeOnce(ctx, tx, out, threeDS)
	return req, st, err
}

// completeOnce is complete, also telling whether this call settled the
// transaction (exactly one of concurrent calls does).
func (s *Service) completeOnce(ctx context.Context, tx *payment.Transaction, out provider.Outcome, threeDS string) (*payment.Request, *payment.Transaction, bool, error) {
	now := s.Now().UTC()
	status, code, msg := payment.TransactionStatus(out.Status), out.Code, out.Message
	if msg == "" {
		msg = provider.Message(out.Status, code)
	}
	if tx.Status.Final() {
		status, code, msg = tx.Status, tx.Code, tx.Message // the settle already decided
	}
	req, err := s.Store.CommitAttempt(ctx, payment.AttemptCommit{RequestID: tx.PaymentRequestID, TransactionID: tx.ID,
		TransactionNumber: tx.Number, Status: status, Code: code, Message: msg, Now: now})
	if errors.Is(err, payment.ErrConflict) {
		if req, err = s.Store.PaymentRequest(ctx, tx.PaymentRequestID); err != nil {
			return nil, nil, false, err
		}
		committed := req.TransactionID == tx.ID && req.TransactionStatus != nil && req.TransactionStatus.Final()
		switch {
		case committed:
			// An earlier run committed; its decision stands.
			status = *req.TransactionStatus
			if req.LastLog != nil {
				code, msg = req.LastLog.Code, req.LastLog.Message
			}
		case status == payment.TxApproved && !tx.Status.Final():
			// The request stopped waiting for this attempt (cancelled, or
			// paid by another): the charge cannot pay it and is voided.
			s.Log.Warn("charge cannot pay its request; voiding it", "transaction_id", tx.ID,
				"payment_request_id", tx.PaymentRequestID, "request_status", int(req.Status))
			if err := s.void(ctx, tx); err != nil {
				return nil, nil, false, err // the transaction stays open; retried
			}
			status, code, msg = payment.TxDeclined, codes.TransactionCancelled, codes.TransactionCancelled.Message()
		}
	} else if err != nil {
		return nil, nil, false, err
	}
	crashpoint.Hit(crashpoint.AfterRequestCommit)
	reqStatus := payment.RequestUnpaid
	if status == payment.TxApproved {
		reqStatus = payment.RequestPaid
	}
	ev, err := payment.NewNotifyEvent(&payment.Request{ID: tx.PaymentRequestID, MerchantID: tx.MerchantID}, tx.ID, status,
		payment.LastLog{TransactionStatusID: status, Message: msg, Code: code}, now)
	if err != nil {
		return nil, nil, false, err
	}
	ev.PaymentRequestStatusID, ev.Channel = reqStatus, tx.Channel
	st, err := s.Store.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: status, Code: code,
		Message: msg, ProviderRef: out.ProviderRef, ThreeDS: threeDS, Event: ev, Now: now})
	if errors.Is(err, payment.ErrConflict) {
		if st.Status != status {
			s.Log.Error("transaction final status differs from its request commit", "transaction_id", tx.ID,
				"transaction_status", int(st.Status), "commit_status", int(status))
		}
		return req, st, false, nil // settled by an earlier run; its notification is in the outbox
	}
	if err != nil {
		return nil, nil, false, err
	}
	crashpoint.Hit(crashpoint.AfterTxSettle)
	crashpoint.Hit(crashpoint.AfterOutboxWrite)
	if req.Status == payment.RequestCancelled && req.TransactionID == tx.ID {
		// Cancelled while this attempt was pending: the request shows how it
		// ended, not "pending" forever.
		if err := s.Store.RecordCancelledAttempt(ctx, req.ID, tx.ID, st.Status, st.Code, st.Message, now); err != nil && !errors.Is(err, payment.ErrConflict) {
			s.Log.Warn("recording the end of a cancelled request's attempt failed", "transaction_id", tx.ID, "error", err.Error())
		}
	}
	s.release(ctx, st)
	s.notify(ctx, ev)
	return req, st, true, nil
}

// completeSync is complete for the final outcome an attempt received from
// its own charge: the request commit and the transaction's settle (with its
// outbox entry) in one write, since both are known at the same moment. If
// either guard fails (the request was cancelled meanwhile, or another run
// finished the attempt) nothing was written, and complete's step-by-step
// path sorts it out (void, earlier decision). req is the request as the
// lease returned it; the result is computed from it, not read again.
func (s *Service) completeSync(ctx context.Context, req *payment.Request, tx *payment.Transaction, out provider.Outcome) (*payment.Request, *payment.Transaction, error) {
	if req == nil || tx.Status.Final() {
		return s.complete(ctx, tx, out, "")
	}
	now := s.Now().UTC()
	status, code, msg := payment.TransactionStatus(out.Status), out.Code, out.Message
	if msg == "" {
		msg = provider.Message(out.Status, code)
	}
	reqStatus := payment.RequestUnpaid
	if status == payment.TxApproved {
		reqStatus = payment.RequestPaid
	}
	ll := payment.LastLog{TransactionStatusID: status, Message: msg, Code: code}
	ev, err := payment.NewNotifyEvent(&payment.Request{ID: tx.PaymentRequestID, MerchantID: tx.MerchantID}, tx.ID, status, ll, now)
	if err != nil {
		return nil, nil, err
	}
	ev.PaymentRequestStatusID, ev.Channel = reqStatus, tx.Channel
	err = s.Store.CommitAndSettle(ctx,
		payment.AttemptCommit{RequestID: tx.PaymentRequestID, TransactionID: tx.ID, TransactionNumber: tx.Number,
			Status: status, Code: code, Message: msg, Now: now},
		payment.Settlement{TransactionID: tx.ID, Status: status, Code: code, Message: msg, ProviderRef: out.ProviderRef,
			Event: ev, Now: now})
	if errors.Is(err, payment.ErrConflict) {
		return s.complete(ctx, tx, out, "")
	}
	if err != nil {
		return nil, nil, err
	}
	// One write: these three points coincide on this path.
	crashpoint.Hit(crashpoint.AfterRequestCommit)
	crashpoint.Hit(crashpoint.AfterTxSettle)
	crashpoint.Hit(crashpoint.AfterOutboxWrite)
	committed := *req
	committed.Status, committed.TransactionID, committed.TransactionNumber = reqStatus, tx.ID, tx.Number
	committed.TransactionStatus, committed.LastLog, committed.UpdatedAt = &status, &ll, now
	committed.Version++
	settled := *tx
	settled.Status, settled.Code, settled.Message, settled.UpdatedAt, settled.SettledAt = status, code, msg, now, &now
	if out.ProviderRef != "" {
		settled.ProviderRef = out.ProviderRef
	}
	settled.NextAction, settled.PendingUntil, settled.RecoverAfter = nil, time.Time{}, time.Time{}
	s.release(ctx, &settled)
	s.notify(ctx, ev)
	return &committed, &settled, nil
}

// notify sends the event the settle put in the outbox to its channel's
// queue. A failure is only logged: the reconciler enqueues what stays in the
// outbox.
func (s *Service) notify(ctx context.Context, ev payment.NotifyEvent) {
	url := s.NotificationsQueueURL
	if ev.Channel.Batch() && s.BatchNotificationsQueueURL != "" {
		url = s.BatchNotificationsQueueURL
	}
	if url == "" || s.Queue == nil {
		return
	}
	if err := s.Queue.Send(ctx, url, ev, 0); err != nil {
		s.Log.Warn("notification not enqueued; the reconciler will send it", "transaction_id", ev.TransactionID, "error", err.Error())
		if m, ok := s.Store.(outboxMarker); ok {
			// Not in flight: the reconciler may send it even while its
			// queue is busy (its in-flight rule would otherwise wait).
			if err := m.MarkOutboxUnsent(ctx, ev.TransactionID, ev.EventID); err != nil {
				s.Log.Warn("marking the notification unsent failed; the reconciler sends it later", "transaction_id", ev.TransactionID, "error", err.Error())
			}
		}
		return
	}
	crashpoint.Hit(crashpoint.AfterQueueSend)
}

// outboxMarker is the optional store method notify uses after a failed send
// (*dynamo.Store).
type outboxMarker interface {
	MarkOutboxUnsent(ctx context.Context, txID int64, eventID string) error
}

// resume continues attempt txID of a retried request (same Idempotency-Key):
// nothing written yet → run it; waiting → charge again with the same
// reference (the provider answers with the first outcome, charging once);
// pending or final → finish what is left and answer with it.
func (s *Service) resume(ctx context.Context, m *merchant.Merchant, req *payment.Request, txID int64, a Attempt, det *card.Details) (Result, error) {
	tx, err := s.Store.Transaction(ctx, txID)
	if errors.Is(err, payment.ErrNotFound) {
		return s.run(ctx, m, req, txID, a, det)
	}
	if err != nil {
		return Result{}, err
	}
	if tx.PaymentRequestID != req.ID || tx.MerchantID != m.ID {
		return Result{}, fmt.Errorf("resume: transaction %d belongs to another payment request", txID)
	}
	switch tx.Status {
	case payment.TxWaiting:
		return s.charge(ctx, req, tx, a, det)
	case payment.TxPending:
		if _, err := s.ensurePendingCommit(ctx, tx); err != nil {
			return Result{}, err
		}
		return s.resultOf(ctx, tx, a)
	}
	if _, tx, err = s.complete(ctx, tx, provider.Outcome{Status: provider.Status(tx.Status), Code: tx.Code, Message: tx.Message}, ""); err != nil {
		return Result{}, err
	}
	return s.resultOf(ctx, tx, a)
}

// ensurePendingCommit makes the request show a pending transaction (a crash
// may have come between the transaction's pending write and the request's).
func (s *Service) ensurePendingCommit(ctx context.Context, tx *payment.Transaction) (*payment.Request, error) {
	req, err := s.Store.CommitAttempt(ctx, payment.AttemptCommit{RequestID: tx.PaymentRequestID, TransactionID: tx.ID,
		TransactionNumber: tx.Number, Status: payment.TxPending, Message: tx.Message, Now: s.Now(), LeaseUntil: tx.RecoverAfter})
	if errors.Is(err, payment.ErrConflict) {
		return s.Store.PaymentRequest(ctx, tx.PaymentRequestID)
	}
	return req, err
}

// Recover drives one transaction a crash may have left open to a final,
// consistent state by asking the provider what became of its reference —
// never by charging again. An attempt still pending at the provider within
// its window is left alone; past its window, one that waits for a step
// (a challenge, a QR code) is closed at the acquirer and declined 013. A
// final transaction gets what it still owes after its first answer (a
// refund asked or read, a late charge voided, notifications queued;
// finishAfter).
func (s *Service) Recover(ctx context.Context, tx *payment.Transaction) error {
	_, err := s.recoverOne(ctx, tx)
	return err
}

// recoverOne is Recover, also telling whether the transaction is left open
// without this call having moved its recovery time (the reconciler then
// backs it off).
func (s *Service) recoverOne(ctx context.Context, tx *payment.Transaction) (stillOpen bool, err error) {
	if tx.Status.Final() {
		if _, _, err := s.complete(ctx, tx, provider.Outcome{Status: provider.Status(tx.Status), Code: tx.Code, Message: tx.Message}, ""); err != nil {
			return true, err
		}
		return s.finishAfter(ctx, tx)
	}
	out, err := s.lookup(ctx, tx)
	if err != nil {
		return true, fmt.Errorf("look up transaction %d: %w", tx.ID, err)
	}
	if out.Status == provider.Pending && out.Closable && tx.Status == payment.TxPending && s.windowPassed(tx) {
		if out, err = s.closePending(ctx, tx, out); err != nil {
			return true, err
		}
	}
	if out.Status == provider.Pending {
		if tx.Status == payment.TxWaiting {
			_, _, err := s.markPending(ctx, tx, out) // a new window: moves its recovery time
			return false, err
		}
		_, err := s.ensurePendingCommit(ctx, tx)
		return true, err
	}
	tds := ""
	if tx.ThreeDS == payment.ThreeDSChallenge {
		tds = payment.ThreeDSFailed
		if out.Status == provider.Approved {
			tds = payment.ThreeDSAuthenticated
		} else if out.Code == codes.AuthenticationTimeout {
			tds = payment.ThreeDSTimedOut
		}
	}
	_, _, err = s.complete(ctx, tx, out, tds)
	return err != nil, err
}

// windowPassed reports whether a pending attempt's window (its challenge
// or QR code's validity) is over.
func (s *Service) windowPassed(tx *payment.Transaction) bool {
	return !tx.PendingUntil.IsZero() && s.Now().After(tx.PendingUntil)
}

// closePending closes a pending charge past its window at the acquirer
// (provider.PendingCloser): a 3-D Secure challenge or a QR code nobody
// answered becomes declined 013, as the sandbox's do; a charge that ended
// meanwhile answers with how it ended. Without a closer it stays pending.
func (s *Service) closePending(ctx context.Context, tx *payment.Transaction, out provider.Outcome) (provider.Outcome, error) {
	pc, ok := s.Provider.(provider.PendingCloser)
	if !ok {
		return out, nil
	}
	ref := out.ProviderRef
	if ref == "" {
		ref = tx.ProviderRef
	}
	closed, err := pc.ClosePending(ctx, tx.Reference, ref)
	if err != nil {
		return out, fmt.Errorf("close pending transaction %d: %w", tx.ID, err)
	}
	if err := s.bind(tx, closed.ProviderRef, closed.Facts, false, "close"); err != nil {
		return out, err
	}
	if closed.Status == provider.Declined && closed.Code == codes.AuthenticationTimeout {
		s.Log.Info("pending attempt closed at the acquirer after its window", "transaction_id", tx.ID, "provider_ref", closed.ProviderRef)
	}
	return closed, nil
}

// RecoverTransactionOf finishes attempt txID that holds request requestID's
// expired lease. An attempt with no transaction record never reached the
// provider (the record is written first): its lease is simply released.
func (s *Service) RecoverTransactionOf(ctx context.Context, requestID, txID int64) error {
	tx, err := s.Store.Transaction(ctx, txID)
	if errors.Is(err, payment.ErrNotFound) {
		if err := s.Store.ReleaseLease(ctx, requestID, txID); err != nil && !errors.Is(err, payment.ErrConflict) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	return s.Recover(ctx, tx)
}

// RecoverOpen runs Recover on every open attempt whose recovery time has
// passed (the reconciler's schedule), those nobody looked at yet (a fresh
// crash) first, then those it is backing off from; each that stays open
// waits longer before its next look (DeferRecovery). It stops starting
// recoveries when the pass's context has less than RecoverReserve left.
// It returns how many it finished.
func (s *Service) RecoverOpen(ctx context.Context, now time.Time) (int, error) {
	n, _, err := s.RecoverOpenStats(ctx, now)
	return n, err
}

// RecoverReserve is the part of the reconciler's deadline kept for the
// write of the last recovery and the outbox pass.
const RecoverReserve = 10 * time.Second

// RecoverStats counts one recovery pass.
type RecoverStats struct {
	Fresh     int // attempts looked at for the first time
	BackedOff int // attempts looked at again after a back-off
	Finished  int // left nothing to do
	Deferred  int // left open, next look moved back
}

// RecoverOpenStats is RecoverOpen with the pass's counts.
func (s *Service) RecoverOpenStats(ctx context.Context, now time.Time) (int, RecoverStats, error) {
	var st RecoverStats
	var errs []error
	_, backoff := s.Store.(AfterStore)
	shards := payment.OpenShards
	if backoff {
		shards *= 2 // the back-off shards come after the fresh ones
	}
	for shard := 0; shard < shards; shard++ {
		txs, err := s.Store.OpenAttempts(ctx, shard, now, 200)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, tx := range txs {
			if d, ok := ctx.Deadline(); ok && time.Until(d) < RecoverReserve {
				return st.Finished, st, errors.Join(errs...)
			}
			if shard < payment.OpenShards {
				st.Fresh++
			} else {
				st.BackedOff++
			}
			open, err := s.recoverOne(ctx, tx)
			if err != nil {
				s.Log.Error("recovering an attempt failed; it is looked at again later", "transaction_id", tx.ID, "error", err.Error())
				errs = append(errs, err)
			}
			if open || err != nil {
				if s.deferRecovery(ctx, tx, now) {
					st.Deferred++
				}
				continue
			}
			st.Finished++
		}
	}
	return st.Finished, st, errors.Join(errs...)
}

// Back-off of an attempt that stays open: RecoverBackoffBase doubling up
// to RecoverBackoffCap (a refund the acquirer processes: from
// PendingRefundCheck up to RefundCheckCap), with a tenth of jitter.
const (
	RecoverBackoffBase = time.Minute
	RecoverBackoffCap  = time.Hour
)

// deferRecovery moves tx's next look back (reporting whether it did); a
// change of the attempt meanwhile wins.
func (s *Service) deferRecovery(ctx context.Context, tx *payment.Transaction, now time.Time) bool {
	st, ok := s.Store.(AfterStore)
	if !ok || tx.RecoverAfter.IsZero() {
		return false
	}
	tries := tx.RecoverTries + 1
	base, ceil := RecoverBackoffBase, RecoverBackoffCap
	if tx.Refund != nil && tx.Refund.Status == payment.RefundProcessing && tx.Refund.ProviderRef != "" {
		base, ceil = PendingRefundCheck, RefundCheckCap
	}
	d := ceil
	if tries < 30 && base<<(tries-1) < ceil {
		d = base << (tries - 1)
	}
	d += time.Duration(rand.Int64N(int64(d/10) + 1))
	if err := st.DeferRecovery(ctx, tx.ID, tx.RecoverAfter, now.Add(d), tries); err != nil {
		if !errors.Is(err, payment.ErrConflict) {
			s.Log.Warn("backing off an open attempt failed", "transaction_id", tx.ID, "error", err.Error())
		}
		return false
	}
	return true
}

// supersedeAtAcquirer closes tx's 3-D Secure challenge at the acquirer
// (a new attempt of the payer supersedes it) and books what the charge
// became: declined 013 (timed out) when closed, or its own end when the
// payer answered meanwhile. The booking's final commit releases the lease.
// closed is false when the acquirer cannot close it yet (it is processing
// the payer's answer).
func (s *Service) supersedeAtAcquirer(ctx context.Context, pc provider.PendingCloser, tx *payment.Transaction) (closed bool, err error) {
	out, err := pc.ClosePending(ctx, tx.Reference, tx.ProviderRef)
	if err != nil {
		return false, fmt.Errorf("close challenge of transaction %d: %w", tx.ID, err)
	}
	if err := s.bind(tx, out.ProviderRef, out.Facts, false, "superseded challenge"); err != nil {
		return false, err
	}
	if out.Status == provider.Pending {
		return false, nil
	}
	tds := payment.ThreeDSFailed
	switch {
	case out.Status == provider.Approved:
		tds = payment.ThreeDSAuthenticated
	case out.Code == codes.AuthenticationTimeout:
		tds = payment.ThreeDSTimedOut
	}
	_, _, err = s.complete(ctx, tx, out, tds)
	return err == nil, err
}
