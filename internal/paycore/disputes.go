package paycore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

// Disputes. A cardholder disputes a paid charge weeks later; the acquirer
// reports it by event (Stripe: charge.dispute.created, .updated, .closed,
// .funds_withdrawn, .funds_reinstated), in any order and possibly more
// than once. The dispute is recorded on its transaction (GET
// /transactions/{id} shows it), listed on the merchant's dashboard with its
// evidence deadline, and notified to the merchant in its own words
// (dispute.created, …): the transaction stays approved and the request
// paid. Evidence is submitted in the acquirer's dashboard (DashboardURL).
//
// Order: a closed dispute never reopens; otherwise the event the acquirer
// made last (its created time) decides the status, reason, amount and
// deadline, and an older one only adds what it alone says (funds withdrawn
// or reinstated). An event already applied changes nothing.

// DisputeResult is what an acquirer's dispute event says.
type DisputeResult struct {
	EventID string
	// Connector names the connector whose event this is
	// (internal/connector); it changes only a transaction that connector
	// charged. "": not checked (the sandbox's own callbacks).
	Connector string
	// EventType is the merchant event it maps to (payment.EventDispute…).
	EventType string
	EventAt   time.Time
	Live      bool
	DisputeID string
	ChargeRef string // the disputed charge's intent id
	// TransactionID, when the acquirer object carries it; 0: read the charge.
	TransactionID int64
	Status        string
	Reason        string
	Amount        decimal.Decimal
	Unit          string
	EvidenceDueBy time.Time
}

// DisputeEvent records an acquirer's dispute event on its transaction,
// lists it for the merchant and notifies the merchant once per change.
// Errors as RefundEvent's.
func (s *Service) DisputeEvent(ctx context.Context, r DisputeResult) (Settled, error) {
	tx, err := s.chargeTransaction(ctx, r.Connector, r.TransactionID, r.ChargeRef)
	if err != nil {
		return Settled{}, err
	}
	if err := s.bindConnector(tx, r.Connector, "dispute event "+r.EventID); err != nil {
		return Settled{Transaction: tx}, err
	}
	if err := s.bindDispute(tx, r); err != nil {
		return Settled{Transaction: tx}, err
	}
	now := s.Now().UTC()
	got, changed, err := s.changeAfter(ctx, tx.ID, true, func(_ *payment.Transaction, a *payment.After) (bool, error) {
		if a.Dispute == nil {
			a.Dispute = &payment.Dispute{ID: r.DisputeID, CreatedAt: now}
		}
		return moveDispute(a.Dispute, r, now), nil
	})
	if err != nil {
		return Settled{}, err
	}
	if !changed {
		// A retry of an event whose processing a crash cut short finishes
		// what it owes (nothing is written when nothing is).
		if got.After == nil || got.After.Dispute == nil || !s.stale(got.After.Dispute.UpdatedAt) {
			return Settled{Duplicate: true, Transaction: got}, nil
		}
		if err := s.putDispute(ctx, got); err != nil {
			return Settled{}, err
		}
		if err := s.notifyAfter(ctx, got); err != nil {
			return Settled{}, err
		}
		return Settled{Duplicate: true, Transaction: got}, nil
	}
	if err := s.putDispute(ctx, got); err != nil {
		s.Log.Warn("listing a dispute for the dashboard failed; the reconciler lists it", "transaction_id", got.ID, "error", err.Error())
	}
	if err := s.notifyAfter(ctx, got); err != nil {
		s.Log.Warn("dispute notification not queued; the reconciler sends it", "transaction_id", got.ID, "error", err.Error())
	}
	if got, err = s.loadTx(ctx, got.ID); err != nil {
		return Settled{}, err
	}
	s.Log.Warn("dispute recorded", "transaction_id", got.ID, "dispute_id", r.DisputeID, "event", r.EventType, "status", got.After.Dispute.Status)
	return Settled{Changed: true, Transaction: got}, nil
}

// moveDispute applies r to d (the rules above); false when nothing changes.
func moveDispute(d *payment.Dispute, r DisputeResult, now time.Time) bool {
	if d.LastEventID == r.EventID && r.EventID != "" {
		return false
	}
	changed := false
	newer := d.EventAt.IsZero() || !r.EventAt.Before(d.EventAt)
	if !payment.DisputeClosed(d.Status) && newer {
		if d.Status != r.Status || d.Reason != r.Reason || !d.Amount.Equal(r.Amount) || d.Unit != r.Unit || !d.EvidenceDueBy.Equal(r.EvidenceDueBy) {
			d.Status, d.Reason, d.Amount, d.Unit, d.EvidenceDueBy = r.Status, r.Reason, r.Amount, r.Unit, r.EvidenceDueBy
			changed = true
		}
		d.EventAt = r.EventAt
	}
	if d.Unit == "" {
		d.Unit = r.Unit
	}
	switch r.EventType {
	case payment.EventDisputeFundsWithdrawn:
		if !d.FundsWithdrawn {
			d.FundsWithdrawn, changed = true, true
		}
	case payment.EventDisputeFundsReinstated:
		if !d.FundsReinstated {
			d.FundsReinstated, changed = true, true
		}
	case payment.EventDisputeCreated:
		if d.LastEvent == "" {
			changed = true // the first event: always notified
		}
	}
	if d.Live != r.Live {
		d.Live, changed = r.Live, true
	}
	if !changed {
		return false
	}
	typ := r.EventType
	if d.LastEvent == "" {
		typ = payment.EventDisputeCreated // the merchant hears of it first as created, whatever came first
	} else if typ == payment.EventDisputeUpdated && payment.DisputeClosed(d.Status) {
		typ = payment.EventDisputeClosed
	}
	d.LastEvent, d.LastEventID, d.UpdatedAt = typ, r.EventID, now
	return true
}

// bindDispute is Bind for a dispute event: the disputed charge is the
// transaction's, in its currency, for no more than was charged.
func (s *Service) bindDispute(tx *payment.Transaction, r DisputeResult) error {
	refuse := func(later bool, format string, args ...any) error {
		err := &UnboundError{TransactionID: tx.ID, Reason: fmt.Sprintf(format, args...), Later: later}
		return s.logUnbound(tx, err, "dispute event "+r.EventID)
	}
	switch {
	case tx.ProviderRef == "":
		return refuse(!tx.Status.Final(), "the transaction has no acquirer object id yet")
	case r.ChargeRef != tx.ProviderRef:
		return refuse(false, "dispute %s is of charge %q, not the transaction's %q", r.DisputeID, r.ChargeRef, tx.ProviderRef)
	case tx.Status != payment.TxApproved:
		return refuse(false, "the transaction is not approved (status %d)", tx.Status)
	case r.Unit != "" && !strings.EqualFold(r.Unit, tx.Unit):
		return refuse(false, "dispute in %s of a charge in %s", r.Unit, tx.Unit)
	case r.Amount.IsNegative() || r.Amount.GreaterThan(tx.Amount):
		return refuse(false, "dispute amount %s is not within the charge's %s", r.Amount, tx.Amount)
	case tx.After != nil && tx.After.Dispute != nil && tx.After.Dispute.ID != r.DisputeID:
		return refuse(false, "the charge's dispute is %s, not %s", tx.After.Dispute.ID, r.DisputeID)
	}
	return nil
}

// putDispute lists tx's dispute for its merchant (idempotent, by revision).
func (s *Service) putDispute(ctx context.Context, tx *payment.Transaction) error {
	if tx.After == nil || tx.After.Dispute == nil {
		return nil
	}
	st, err := s.after()
	if err != nil {
		return err
	}
	d := tx.After.Dispute
	return st.PutDisputeEntry(ctx, tx.MerchantID, payment.DisputeEntry{TransactionID: tx.ID, PaymentRequestID: tx.PaymentRequestID,
		DisputeID: d.ID, Status: d.Status, Reason: d.Reason, Amount: d.Amount, Unit: d.Unit, EvidenceDueBy: d.EvidenceDueBy,
		UpdatedAt: d.UpdatedAt, Rev: tx.After.Rev, Live: d.Live})
}
