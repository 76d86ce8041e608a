package paycore

import (
	"context"
	"fmt"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
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
	req, err := s.commits.CommitAttempt(ctx, payment.AttemptCommit{RequestID: tx.PaymentRequestID, TransactionID: tx.ID,
		TransactionNumber: tx.Number, Status: status, Code: code, Message: msg, Now: now})
	if errkind.Is(err, errkind.Conflict) {
		if req, err = s.requests.PaymentRequest(ctx, tx.PaymentRequestID); err != nil {
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
	st, err := s.txs.SettleTransaction(ctx, payment.Settlement{TransactionID: tx.ID, Status: status, Code: code,
		Message: msg, ProviderRef: out.ProviderRef, ThreeDS: threeDS, Event: ev, Now: now})
	if errkind.Is(err, errkind.Conflict) {
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
		if err := s.commits.RecordCancelledAttempt(ctx, req.ID, tx.ID, st.Status, st.Code, st.Message, now); err != nil && !errkind.Is(err, errkind.Conflict) {
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
	err = s.commits.CommitAndSettle(ctx,
		payment.AttemptCommit{RequestID: tx.PaymentRequestID, TransactionID: tx.ID, TransactionNumber: tx.Number,
			Status: status, Code: code, Message: msg, Now: now},
		payment.Settlement{TransactionID: tx.ID, Status: status, Code: code, Message: msg, ProviderRef: out.ProviderRef,
			Event: ev, Now: now})
	if errkind.Is(err, errkind.Conflict) {
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
	tx, err := s.txs.Transaction(ctx, txID)
	if errkind.Is(err, errkind.NotFound) {
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
		if s.resendClosed(ctx, tx) {
			return s.recoverRetry(ctx, tx, a)
		}
		// The charge goes to the connector recorded on tx; its route says
		// where a failover may go next.
		a.route, _ = s.routeOf(m, a, det, req.Amount, req.Unit, tx.Reference)
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

// recoverRetry answers a retry of waiting attempt tx that must not send its
// charge again (resendClosed): the attempt is recovered as the reconciler
// would (its outcome looked up; cancelled and declined once nobody can be
// sending it), and the retry gets where it ended, or 503 while the
// acquirer cannot tell yet.
func (s *Service) recoverRetry(ctx context.Context, tx *payment.Transaction, a Attempt) (Result, error) {
	if err := s.Recover(ctx, tx); err != nil {
		s.Log.Warn("a retry's attempt has no known outcome yet; not sent again", "transaction_id", tx.ID, "error", err.Error())
		e := errkind.UnavailableErr("This payment attempt is still being confirmed with the payment provider; nothing more was charged. Try again later.")
		e.RetryAfter = RecoverBackoffBase
		return Result{}, e
	}
	tx, err := s.txs.Transaction(ctx, tx.ID)
	if err != nil {
		return Result{}, err
	}
	return s.resultOf(ctx, tx, a)
}

// ensurePendingCommit makes the request show a pending transaction (a crash
// may have come between the transaction's pending write and the request's).
func (s *Service) ensurePendingCommit(ctx context.Context, tx *payment.Transaction) (*payment.Request, error) {
	req, err := s.commits.CommitAttempt(ctx, payment.AttemptCommit{RequestID: tx.PaymentRequestID, TransactionID: tx.ID,
		TransactionNumber: tx.Number, Status: payment.TxPending, Message: tx.Message, Now: s.Now(), LeaseUntil: tx.RecoverAfter})
	if errkind.Is(err, errkind.Conflict) {
		return s.requests.PaymentRequest(ctx, tx.PaymentRequestID)
	}
	return req, err
}
