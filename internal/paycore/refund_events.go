package paycore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// Refunds after the first answer. Stripe may answer a refund pending and
// settle it hours or days later; it reports each change by event
// (refund.updated, charge.refund.updated, refund.failed), and a refund that
// succeeded may still fail later (its money comes back to the merchant's
// balance). So:
//
//   - a refund the acquirer answered (it has the acquirer's refund id) is
//     never asked for again: its events settle it, and the reconciler reads
//     it (a GET, no money moves) only as a fallback, hours apart;
//   - an event binds to its refund and transaction as a payment event does:
//     the charge (intent) id stored on the transaction, its currency, an
//     amount no larger than the charge;
//   - processing → refunded | failed, refunded → failed (a late failure);
//     a failed refund never changes again, and a stale event never moves a
//     refund back;
//   - each final status is notified to the merchant once, in its own words
//     (refund.succeeded, refund.failed), never as a payment's status;
//   - a refund made outside the service (Stripe's Dashboard) is recorded
//     when its event arrives (After.Refunds) and notified the same way.
//
// The service refunds in full only: a partial refund through the API is
// refused (docs/payments.md); one made in Stripe's Dashboard is recorded
// with its amount.

// PendingRefundCheck is how long the reconciler waits before reading a
// refund the acquirer answered pending (its events normally settle it
// first); later reads back off to RefundCheckCap.
const (
	PendingRefundCheck = time.Hour
	RefundCheckCap     = 24 * time.Hour
)

// RefundResult is what an acquirer's event says of one refund.
type RefundResult struct {
	EventID string
	// Connector names the connector whose event this is
	// (internal/connector); it changes only a transaction that connector
	// charged. "": not checked.
	Connector string
	// RefundRef is the acquirer's refund id, ChargeRef the charge (intent)
	// it refunds.
	RefundRef string
	ChargeRef string
	// RefundID and TransactionID are the service's, from the refund's
	// metadata: empty for a refund made outside the service.
	RefundID      string
	TransactionID int64
	// Status is the acquirer's (Stripe: pending, requires_action,
	// succeeded, failed, canceled).
	Status        string
	FailureReason string
	Amount        decimal.Decimal
	Unit          string
	// Action is how the acquirer returned a void's money, when it says
	// (Adyen's reversal: "cancel" or "refund").
	Action string
}

// refundStatusOf maps an acquirer's refund status to the service's.
func refundStatusOf(acq string) string {
	switch acq {
	case "succeeded":
		return payment.RefundRefunded
	case "failed", "canceled":
		return payment.RefundFailed
	}
	return payment.RefundProcessing
}

// moveRefund applies an acquirer status to r; false when nothing changes
// (a duplicate, or a move the rules above refuse).
func moveRefund(r *payment.Refund, acq, refundRef, failure string, code codes.Code, now time.Time) bool {
	next := refundStatusOf(acq)
	switch {
	case r.Status == payment.RefundFailed:
		return false // final
	case r.Status == payment.RefundRefunded && next != payment.RefundFailed:
		return false // only a late failure moves a refunded refund
	case next == payment.RefundProcessing && r.AcquirerStatus == acq && (refundRef == "" || r.ProviderRef == refundRef):
		return false // still the same pending state
	}
	if r.ProviderRef == "" {
		r.ProviderRef = refundRef
	}
	r.AcquirerStatus = acq
	if next == payment.RefundProcessing {
		return true
	}
	r.Status, r.CompletedAt = next, &now
	if next == payment.RefundFailed {
		r.FailureReason = failure
		if code == "" {
			code = codes.BankSystemError
		}
		r.Code = string(code)
	}
	return true
}

// acquirerStatusOf names an outcome of the connector's Refund in the
// acquirer's words (the connector maps them to provider statuses).
func acquirerStatusOf(out provider.RefundOutcome) string {
	switch out.Status {
	case provider.Approved:
		return "succeeded"
	case provider.Declined:
		return "failed"
	}
	return "pending"
}

// finishRefund asks the acquirer for tx's processing refund — once: a
// refund it answered (it has the acquirer's id) is only read, never asked
// for again — and records the answer.
func (s *Service) finishRefund(ctx context.Context, tx *payment.Transaction) (*payment.Transaction, error) {
	r := tx.Refund
	var (
		out provider.RefundOutcome
		err error
	)
	if r.ProviderRef != "" {
		rr, ok := s.ProviderOf(ctx, tx).(provider.RefundReader)
		if !ok {
			return tx, nil // settled by its events
		}
		out, err = rr.RefundStatus(ctx, r.ProviderRef)
	} else {
		out, err = s.ProviderOf(ctx, tx).Refund(ctx, provider.RefundRequest{RefundID: r.ID, TransactionID: tx.ID,
			ChargeReference: tx.Reference, ProviderRef: tx.ProviderRef, Amount: r.Amount, Unit: r.Unit,
			Reason: "merchant refund"})
	}
	if err != nil {
		return nil, fmt.Errorf("refund transaction %d: %w", tx.ID, err)
	}
	if out.ProviderRef == "" && out.Status == provider.Pending {
		return tx, nil
	}
	got, _, err := s.applyRefund(ctx, tx.ID, r.ID, acquirerStatusOf(out), out.ProviderRef, out.Message, out.Code)
	return got, err
}

// applyRefund moves the service's refund refundID of transaction txID by
// the acquirer's status and, when it reaches a final status, notifies the
// merchant. The write opens the transaction for the reconciler: until the
// notification is queued (a final status), or until the next read of a
// refund the acquirer is still processing. changed reports that this call
// moved it (exactly one of concurrent calls does).
func (s *Service) applyRefund(ctx context.Context, txID int64, refundID, acq, refundRef, failure string, code codes.Code) (*payment.Transaction, bool, error) {
	now := s.Now().UTC()
	open := AfterGrace
	if refundStatusOf(acq) == payment.RefundProcessing {
		open = PendingRefundCheck
	}
	tx, changed, err := s.changeRefund(ctx, txID, open, func(_ *payment.Transaction, r *payment.Refund) (bool, error) {
		if r.ID != refundID {
			return false, nil
		}
		return moveRefund(r, acq, refundRef, failure, code, now), nil
	})
	if errors.Is(err, ErrNoAfterStore) {
		// A store without revisions: the refund's first final answer only.
		got, err := s.completeRefundOnce(ctx, txID, refundID, acq, refundRef, code)
		return got, err == nil, err
	}
	if err != nil {
		return nil, false, err
	}
	if !changed || tx.Refund == nil || tx.Refund.Status == payment.RefundProcessing {
		return tx, changed, nil
	}
	s.aggregateRefund(ctx, tx)
	crashpoint.Hit(crashpoint.InRefundEvent)
	if err := s.notifyRefund(ctx, tx); err != nil {
		s.Log.Warn("refund notification not queued; the reconciler sends it", "transaction_id", tx.ID, "error", err.Error())
	}
	got, err := s.loadTx(ctx, txID)
	return got, true, err
}

// completeRefundOnce is the refund's completion on a store without
// AfterStore: the first final answer, no events.
func (s *Service) completeRefundOnce(ctx context.Context, txID int64, refundID, acq, refundRef string, code codes.Code) (*payment.Transaction, error) {
	status := refundStatusOf(acq)
	if status == payment.RefundProcessing {
		return s.loadTx(ctx, txID)
	}
	got, err := s.refunds.CompleteRefund(ctx, txID, refundID, status, refundRef, code, s.Now())
	if errkind.Is(err, errkind.Conflict) {
		return s.txs.Transaction(ctx, txID)
	}
	if err == nil {
		s.aggregateRefund(ctx, got)
	}
	return got, err
}

// RefundEvent applies an acquirer's event about one refund (docs above). A
// refund the service made moves its refund; one made outside it is
// recorded. It answers like Settle: Changed when this call moved or
// recorded the refund, Duplicate when nothing changed; ErrUnknownTransaction,
// ErrUnbound (not this transaction's charge) or ErrBindLater (the charge's
// id is not stored yet: the acquirer sends it again).
func (s *Service) RefundEvent(ctx context.Context, r RefundResult) (Settled, error) {
	if strings.HasPrefix(r.RefundID, VoidPrefix) && r.TransactionID > 0 {
		return s.voidEvent(ctx, r) // not a merchant's refund: a late charge's void
	}
	tx, err := s.chargeTransaction(ctx, r.Connector, r.TransactionID, r.ChargeRef)
	if err != nil {
		return Settled{}, err
	}
	if err := s.bindConnector(tx, r.Connector, "refund event "+r.EventID); err != nil {
		return Settled{Transaction: tx}, err
	}
	if err := s.bindRefund(tx, r); err != nil {
		return Settled{Transaction: tx}, err
	}
	now := s.Now().UTC()
	ours := tx.Refund != nil && ((r.RefundID != "" && tx.Refund.ID == r.RefundID) || (r.RefundRef != "" && tx.Refund.ProviderRef == r.RefundRef))
	if ours {
		got, changed, err := s.applyRefund(ctx, tx.ID, tx.Refund.ID, r.Status, r.RefundRef, r.FailureReason, "")
		if err != nil {
			return Settled{}, err
		}
		if rf := got.Refund; !changed && rf != nil && rf.CompletedAt != nil && s.stale(*rf.CompletedAt) {
			// Stripe's retry of an event whose processing a crash cut short
			// finishes what it owes (no write when nothing is).
			if err := s.notifyRefund(ctx, got); err != nil {
				return Settled{}, err
			}
		}
		return Settled{Changed: changed, Duplicate: !changed, Transaction: got}, nil
	}
	if r.RefundID != "" {
		// The service's metadata names a refund this transaction does not
		// hold: not this transaction's.
		return Settled{Transaction: tx}, s.logUnbound(tx, &UnboundError{TransactionID: tx.ID,
			Reason: fmt.Sprintf("refund %s of the service is not the transaction's", r.RefundID)}, "refund event "+r.EventID)
	}
	// Made outside the service (Stripe's Dashboard): recorded by its id.
	got, changed, err := s.changeAfter(ctx, tx.ID, true, func(cur *payment.Transaction, a *payment.After) (bool, error) {
		for i := range a.Refunds {
			if a.Refunds[i].ProviderRef == r.RefundRef {
				return moveRefund(&a.Refunds[i], r.Status, r.RefundRef, r.FailureReason, "", now), nil
			}
		}
		rf := payment.NewRefund("", r.Amount, cur.Unit, now)
		rf.Origin = payment.RefundByAcquirer
		moveRefund(&rf, r.Status, r.RefundRef, r.FailureReason, "", now)
		a.Refunds = append(a.Refunds, rf)
		return true, nil
	})
	if err != nil {
		return Settled{}, err
	}
	if changed {
		crashpoint.Hit(crashpoint.InRefundEvent)
		if err := s.notifyAfter(ctx, got); err != nil {
			s.Log.Warn("refund notification not queued; the reconciler sends it", "transaction_id", got.ID, "error", err.Error())
		}
	} else if rf := got.RefundByID(r.RefundRef); rf != nil && rf.CompletedAt != nil && s.stale(*rf.CompletedAt) {
		// A retry finishing what a dead delivery owed.
		if err := s.notifyAfter(ctx, got); err != nil {
			return Settled{}, err
		}
	}
	if got, err = s.loadTx(ctx, got.ID); err != nil {
		return Settled{}, err
	}
	return Settled{Changed: changed, Duplicate: !changed, Transaction: got}, nil
}

// chargeTransaction finds the transaction an acquirer object is about: by
// the id its metadata carries, else by reading the charge (intent) at the
// acquirer, whose metadata carries the transaction's reference (a refund
// or dispute made in the acquirer's dashboard has no metadata of ours).
func (s *Service) chargeTransaction(ctx context.Context, conn string, txID int64, chargeRef string) (*payment.Transaction, error) {
	if txID <= 0 && chargeRef != "" {
		cr, ok := s.eventProvider(ctx, conn).(ChallengeReader) // the object is the event's connector's
		if !ok {
			return nil, ErrUnknownTransaction
		}
		out, err := cr.ChallengeStatus(ctx, chargeRef)
		if err != nil {
			return nil, fmt.Errorf("read charge %s: %w", chargeRef, err)
		}
		if out.Facts != nil {
			txID = parseChargeReference(out.Facts.Reference)
		}
	}
	if txID <= 0 {
		return nil, ErrUnknownTransaction
	}
	return s.loadTx(ctx, txID)
}

// bindRefund is Bind for a refund event: the charge it refunds is the
// transaction's (its stored acquirer id), in its currency, for no more than
// was charged, and the transaction was approved.
func (s *Service) bindRefund(tx *payment.Transaction, r RefundResult) error {
	refuse := func(later bool, format string, args ...any) error {
		err := &UnboundError{TransactionID: tx.ID, Reason: fmt.Sprintf(format, args...), Later: later}
		return s.logUnbound(tx, err, "refund event "+r.EventID)
	}
	switch {
	case tx.ProviderRef == "":
		return refuse(!tx.Status.Final(), "the transaction has no acquirer object id yet")
	case r.ChargeRef != tx.ProviderRef:
		return refuse(false, "refund %s is of charge %q, not the transaction's %q", r.RefundRef, r.ChargeRef, tx.ProviderRef)
	case tx.Status != payment.TxApproved:
		return refuse(false, "the transaction is not approved (status %d)", tx.Status)
	case r.Unit != "" && !strings.EqualFold(r.Unit, tx.Unit):
		return refuse(false, "refund in %s of a charge in %s", r.Unit, tx.Unit)
	case !r.Amount.IsPositive() || r.Amount.GreaterThan(tx.Amount):
		return refuse(false, "refund amount %s is not within the charge's %s", r.Amount, tx.Amount)
	}
	return nil
}

// acquirerRefunded counts the refunds made at the acquirer that did not
// fail, and their total.
func acquirerRefunded(tx *payment.Transaction) (int, decimal.Decimal) {
	n, total := 0, decimal.Zero
	if tx.After == nil {
		return 0, total
	}
	for _, r := range tx.After.Refunds {
		if r.Status != payment.RefundFailed {
			n++
			total = total.Add(r.Amount)
		}
	}
	return n, total
}
