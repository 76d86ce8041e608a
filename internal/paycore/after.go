package paycore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
)

// After the first answer: what the acquirer reports about a charge later
// (refunds it settles by event, refunds made in its own dashboard,
// disputes, a charge that succeeded after its transaction was declined),
// the recovery of attempts that stay open, and the merchant notifications
// of refunds and disputes. The lifecycle and every event handled are in
// docs/stripe.md; the notifications in docs/notifications.md.
//
// Each change is a read of the transaction, a change in memory and a
// write guarded by the record's revision (AfterStore), repeated when
// another write came first: events about the same charge, delivered at
// once or in any order, are applied one after another. A change that needs
// more work afterwards (a notification to queue, a void to ask) opens the
// transaction for the reconciler in the same write, so a crash in between
// leaves it to Recover, which finishes it (finishAfter) and takes the
// transaction off the list when nothing is left.

// AfterStore is the storage of a transaction after its first answer
// (*dynamo.Store, memstore). Each write is safe to send twice.
type AfterStore interface {
	// WriteRefund replaces the service's refund of txID with r if its
	// revision is still rev (a Conflict error with the current
	// transaction otherwise); open, when set, opens the transaction for the
	// reconciler from then on.
	WriteRefund(ctx context.Context, txID int64, rev int64, r payment.Refund, open time.Time) (*payment.Transaction, error)
	// WriteAfter is WriteRefund for the after record (acquirer refunds,
	// dispute, late charge).
	WriteAfter(ctx context.Context, txID int64, rev int64, a payment.After, open time.Time) (*payment.Transaction, error)
	// DeferRecovery moves an open attempt's next recovery from prev to next
	// (a Conflict error when it changed meanwhile).
	DeferRecovery(ctx context.Context, txID int64, prev, next time.Time, tries int) error
	// CloseOpen takes a final transaction whose recovery time is still prev
	// off the reconciler's list.
	CloseOpen(ctx context.Context, txID int64, prev time.Time) error
	// PutDisputeEntry keeps the merchant's list of disputes.
	PutDisputeEntry(ctx context.Context, merchantID string, e payment.DisputeEntry) error
}

// ErrNoAfterStore: the configured store cannot record what happens after
// a charge's first answer.
var ErrNoAfterStore = errors.New("the store cannot record refunds by event, disputes or late charges")

func (s *Service) after() (AfterStore, error) {
	a, ok := s.Store.(AfterStore)
	if !ok {
		return nil, ErrNoAfterStore
	}
	return a, nil
}

// retryGrace: work a change left undone (a notification, a void) for
// longer than this was left by a process that died; a later delivery of
// the event does it. A younger one is still being done by the delivery
// that made the change (concurrent deliveries do it once).
const retryGrace = 15 * time.Second

// stale reports whether work owed since at is older than retryGrace.
func (s *Service) stale(at time.Time) bool { return !at.IsZero() && s.Now().Sub(at) >= retryGrace }

// AfterGrace is how long the work a change leaves (a notification to
// queue, a void to ask) may take before the reconciler does it instead.
const AfterGrace = 2 * time.Minute

// maxWriteTries bounds the read-change-write loop of one change; each lost
// round means another write about the same charge succeeded.
const maxWriteTries = 50

// changeAfter applies change to transaction id's after record until its
// guarded write succeeds. change returns false when nothing is to be
// written (a duplicate, or a refused change: err says why). It returns the
// transaction as written (or as read, when nothing changed) and whether
// this call wrote it.
func (s *Service) changeAfter(ctx context.Context, id int64, open bool, change func(tx *payment.Transaction, a *payment.After) (bool, error)) (*payment.Transaction, bool, error) {
	st, err := s.after()
	if err != nil {
		return nil, false, err
	}
	for try := 0; ; try++ {
		tx, err := s.loadTx(ctx, id)
		if err != nil {
			return nil, false, err
		}
		a := payment.After{}
		rev := int64(0)
		if tx.After != nil {
			a = cloneAfter(*tx.After)
			rev = tx.After.Rev
		}
		ok, err := change(tx, &a)
		if err != nil || !ok {
			return tx, false, err
		}
		var until time.Time
		if open {
			until = s.Now().Add(AfterGrace)
		}
		got, err := st.WriteAfter(ctx, id, rev, a, until)
		if errkind.Is(err, errkind.Conflict) && try < maxWriteTries {
			continue // another change came first: read it and decide again
		}
		if err != nil {
			return nil, false, fmt.Errorf("write after record of transaction %d: %w", id, err)
		}
		return got, true, nil
	}
}

// changeRefund is changeAfter for the service's refund slot.
func (s *Service) changeRefund(ctx context.Context, id int64, open time.Duration, change func(tx *payment.Transaction, r *payment.Refund) (bool, error)) (*payment.Transaction, bool, error) {
	st, err := s.after()
	if err != nil {
		return nil, false, err
	}
	for try := 0; ; try++ {
		tx, err := s.loadTx(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if tx.Refund == nil {
			return tx, false, nil
		}
		r := *tx.Refund
		ok, err := change(tx, &r)
		if err != nil || !ok {
			return tx, false, err
		}
		var until time.Time
		if open > 0 {
			until = s.Now().Add(open)
		}
		got, err := st.WriteRefund(ctx, id, tx.Refund.Rev, r, until)
		if errkind.Is(err, errkind.Conflict) && try < maxWriteTries {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("write refund of transaction %d: %w", id, err)
		}
		return got, true, nil
	}
}

func cloneAfter(a payment.After) payment.After {
	c := a
	c.Refunds = append([]payment.Refund(nil), a.Refunds...)
	if a.Dispute != nil {
		d := *a.Dispute
		c.Dispute = &d
	}
	if a.LateCharge != nil {
		l := *a.LateCharge
		c.LateCharge = &l
	}
	return c
}

// ---- merchant notifications of refunds and disputes ---------------------

// refundEvent is the merchant notification of a refund that reached its
// final status (refund.succeeded or refund.failed); ok is false while it
// is processing.
func refundEvent(tx *payment.Transaction, r *payment.Refund, now time.Time) (payment.NotifyEvent, bool) {
	typ := ""
	switch r.Status {
	case payment.RefundRefunded:
		typ = payment.EventRefundSucceeded
	case payment.RefundFailed:
		typ = payment.EventRefundFailed
	default:
		return payment.NotifyEvent{}, false
	}
	id := r.ID
	if id == "" {
		id = r.ProviderRef
	}
	return payment.NotifyEvent{
		EventID:   fmt.Sprintf("evt_%d_rf_%s_%s", tx.ID, safeID(id), r.Status),
		RequestID: tx.PaymentRequestID, MerchantID: tx.MerchantID, TransactionID: tx.ID,
		TransactionStatusID: tx.Status, PaymentRequestStatusID: payment.RequestPaid,
		Type: typ, ObjectID: id, OccurredAt: now.UTC(), Channel: tx.Channel,
	}, true
}

// disputeEvent is the merchant notification of a dispute's last change.
func disputeEvent(tx *payment.Transaction, d *payment.Dispute, now time.Time) payment.NotifyEvent {
	return payment.NotifyEvent{
		EventID:   fmt.Sprintf("evt_%d_dp_%s", tx.ID, safeID(strings.TrimPrefix(d.LastEventID, "evt_"))),
		RequestID: tx.PaymentRequestID, MerchantID: tx.MerchantID, TransactionID: tx.ID,
		TransactionStatusID: tx.Status, PaymentRequestStatusID: payment.RequestPaid,
		Type: d.LastEvent, ObjectID: d.ID, OccurredAt: now.UTC(), Channel: tx.Channel,
	}
}

// safeID keeps what a notification's event id may hold (webhook-id).
func safeID(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
	}
	if b.Len() > 80 {
		return b.String()[:80]
	}
	return b.String()
}

// sendEvent queues a merchant event's notification (its channel's queue).
// A refund or dispute notification is never a payment's: it carries its
// own type, and the notifier builds it from the stored record.
func (s *Service) sendEvent(ctx context.Context, ev payment.NotifyEvent) error {
	url := s.NotificationsQueueURL
	if ev.Channel.Batch() && s.BatchNotificationsQueueURL != "" {
		url = s.BatchNotificationsQueueURL
	}
	if url == "" || s.Queue == nil {
		return nil
	}
	if err := s.Queue.Send(ctx, url, ev, 0); err != nil {
		return fmt.Errorf("queue %s notification of transaction %d: %w", ev.Type, ev.TransactionID, err)
	}
	return nil
}

// notifyRefund queues the notification of tx's service refund when its
// final status is not notified yet, then marks it notified. A failure
// leaves it to the reconciler (the write that finished the refund opened
// the transaction).
func (s *Service) notifyRefund(ctx context.Context, tx *payment.Transaction) error {
	r := tx.Refund
	if r == nil || r.Notified == r.Status {
		return nil
	}
	ev, ok := refundEvent(tx, r, s.Now())
	if !ok {
		return nil
	}
	if err := s.sendEvent(ctx, ev); err != nil {
		return err
	}
	status := r.Status
	_, _, err := s.changeRefund(ctx, tx.ID, 0, func(_ *payment.Transaction, r *payment.Refund) (bool, error) {
		if r.Status != status || r.Notified == status {
			return false, nil
		}
		r.Notified = status
		return true, nil
	})
	return err
}

// notifyAfter queues the notifications the after record still owes
// (acquirer refunds, the dispute's last change) and marks each.
func (s *Service) notifyAfter(ctx context.Context, tx *payment.Transaction) error {
	a := tx.After
	if a == nil {
		return nil
	}
	var evs []payment.NotifyEvent
	for i := range a.Refunds {
		r := &a.Refunds[i]
		if r.Notified == r.Status {
			continue
		}
		if ev, ok := refundEvent(tx, r, s.Now()); ok {
			evs = append(evs, ev)
		}
	}
	if d := a.Dispute; d != nil && d.LastEventID != "" && d.Notified != d.LastEventID {
		evs = append(evs, disputeEvent(tx, d, s.Now()))
	}
	if len(evs) == 0 {
		return nil
	}
	for _, ev := range evs {
		if err := s.sendEvent(ctx, ev); err != nil {
			return err
		}
	}
	sent := map[string]bool{}
	for _, ev := range evs {
		sent[ev.EventID] = true
	}
	_, _, err := s.changeAfter(ctx, tx.ID, false, func(tx *payment.Transaction, a *payment.After) (bool, error) {
		changed := false
		for i := range a.Refunds {
			r := &a.Refunds[i]
			if ev, ok := refundEvent(tx, r, s.Now()); ok && sent[ev.EventID] && r.Notified != r.Status {
				r.Notified, changed = r.Status, true
			}
		}
		if d := a.Dispute; d != nil && d.LastEventID != "" && d.Notified != d.LastEventID && sent[disputeEvent(tx, d, s.Now()).EventID] {
			d.Notified, changed = d.LastEventID, true
		}
		return changed, nil
	})
	return err
}

// finishAfter does what a final transaction still owes after its first
// answer — a refund to ask or read, a late charge to void, notifications to
// queue — and takes it off the reconciler's list when nothing is left. open
// reports that something is still waiting (a refund the acquirer is
// processing): the reconciler looks again later.
func (s *Service) finishAfter(ctx context.Context, tx *payment.Transaction) (open bool, err error) {
	if tx.Refund != nil && tx.Refund.Status == payment.RefundProcessing && tx.Status == payment.TxApproved {
		if tx, err = s.finishRefund(ctx, tx); err != nil {
			return true, err
		}
		// Still processing at the acquirer: the rest is done, the
		// transaction stays open for the next read.
		open = tx.Refund.Status == payment.RefundProcessing
	}
	if l := lateOf(tx); l != nil && l.Status == payment.LateVoiding {
		if tx, err = s.voidLate(ctx, tx, l.ProviderRef, true); err != nil {
			return true, err
		}
	}
	if err := s.notifyRefund(ctx, tx); err != nil {
		return true, err
	}
	if err := s.notifyAfter(ctx, tx); err != nil {
		return true, err
	}
	if err := s.putDispute(ctx, tx); err != nil {
		return true, err
	}
	if open || tx.RecoverAfter.IsZero() {
		return open, nil
	}
	st, err := s.after()
	if err != nil {
		return false, nil
	}
	if err := st.CloseOpen(ctx, tx.ID, tx.RecoverAfter); err != nil && !errkind.Is(err, errkind.Conflict) {
		return false, err
	}
	return false, nil
}

func lateOf(tx *payment.Transaction) *payment.LateCharge {
	if tx.After == nil {
		return nil
	}
	return tx.After.LateCharge
}

// parseChargeReference reads the transaction id of a write-ahead reference
// (payment.ChargeReference).
func parseChargeReference(ref string) int64 {
	id, _ := strconv.ParseInt(strings.TrimPrefix(ref, "ptx_"), 10, 64)
	if !strings.HasPrefix(ref, "ptx_") || id <= 0 {
		return 0
	}
	return id
}
