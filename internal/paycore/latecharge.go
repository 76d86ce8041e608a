package paycore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/emf"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// A late charge: the acquirer reports a charge succeeded for a transaction
// that is already declined (an event or a 3-D Secure return after the
// attempt ended). The merchant was told "declined" and the request may be
// paid by another attempt: the money is returned at once (a void of the
// whole charge, provider.RefundRequest.Void, under the refund id
// VoidPrefix+reference, so repeating it voids once: a refund at Stripe, a
// reversal at Adyen) and reported (metric LateChargesVoided, an error log
// line, the transaction's lateCharge). It is never booked as a payment:
// the declined transaction stays declined.
//
// The late charge's states: voiding (recorded; the void is asked, or must
// be after a crash) → voided (the acquirer took the void; ConfirmedAt once
// its event says the money was returned) or failed (the acquirer refused
// it, or its event says it failed: an operator refunds it by hand). A
// failed void never changes again; a confirmed one only fails.

// MetricLateVoided counts late charges voided (template.yaml alarms on it).
const MetricLateVoided = "LateChargesVoided"

// VoidPrefix begins the refund id of a void: VoidPrefix + the charge's
// reference. An acquirer's event about a refund with such an id is the
// void's result (voidEvent), never a merchant's refund.
const VoidPrefix = "void_"

// voidLate records the late charge providerRef of declined transaction tx
// (opening it for the reconciler), asks the acquirer to void it and records
// the answer. Only the call that recorded it asks (concurrent deliveries of
// one event ask once), or the reconciler (force): a failure or a crash
// leaves it voiding, and the reconciler asks again.
func (s *Service) voidLate(ctx context.Context, tx *payment.Transaction, providerRef string, force bool) (*payment.Transaction, error) {
	now := s.Now().UTC()
	got, recorded, err := s.changeAfter(ctx, tx.ID, true, func(cur *payment.Transaction, a *payment.After) (bool, error) {
		if cur.Status != payment.TxDeclined {
			return false, fmt.Errorf("transaction %d is not declined: no late charge to void", cur.ID)
		}
		if a.LateCharge != nil {
			return false, nil // recorded (by this or a concurrent delivery)
		}
		a.LateCharge = &payment.LateCharge{ProviderRef: providerRef, Status: payment.LateVoiding,
			Amount: cur.Amount, Unit: cur.Unit, SeenAt: now}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	l := lateOf(got)
	if l == nil || l.Status != payment.LateVoiding {
		return got, nil // voided already
	}
	if !recorded && !force && !s.stale(l.SeenAt) {
		return got, nil // being voided by the delivery that recorded it
	}
	if l.ProviderRef != providerRef {
		// A second charge for one declined reference cannot happen (one key,
		// one intent); refuse to guess.
		return got, fmt.Errorf("transaction %d: late charge %s differs from the recorded %s", tx.ID, providerRef, l.ProviderRef)
	}
	crashpoint.Hit(crashpoint.InLateVoid)
	out, err := s.ProviderOf(ctx, got).Refund(ctx, provider.RefundRequest{RefundID: VoidPrefix + got.Reference, TransactionID: got.ID,
		ChargeReference: got.Reference, Void: true, ProviderRef: l.ProviderRef, Amount: l.Amount, Unit: l.Unit,
		Reason: "charge succeeded after its transaction was declined"})
	if err != nil {
		s.Log.Error("voiding a late charge failed; the reconciler asks again", "transaction_id", got.ID, "provider_ref", l.ProviderRef, "error", err.Error())
		return got, fmt.Errorf("void late charge of transaction %d: %w", got.ID, err)
	}
	status := payment.LateVoided
	if out.Status == provider.Declined {
		status = payment.LateFailed
	}
	got, _, err = s.changeAfter(ctx, got.ID, false, func(_ *payment.Transaction, a *payment.After) (bool, error) {
		if a.LateCharge == nil || a.LateCharge.Status != payment.LateVoiding {
			return false, nil
		}
		a.LateCharge.Status, a.LateCharge.RefundRef, a.LateCharge.VoidedAt = status, out.ProviderRef, &now
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	attrs := []any{"transaction_id", got.ID, "payment_request_id", got.PaymentRequestID, "provider_ref", l.ProviderRef,
		"refund_ref", out.ProviderRef, "status", status}
	if status == payment.LateFailed {
		s.Log.Error("a charge succeeded after its transaction was declined and the acquirer refused to void it: refund it by hand", attrs...)
	} else {
		s.Log.Error("a charge succeeded after its transaction was declined; voided", append(attrs, emf.Attrs(MetricLateVoided, 1, s.Now())...)...)
	}
	return got, nil
}

// lateSuccess handles an acquirer's approved result for a transaction that
// is already declined: the charge is voided (voidLate) and the answer says
// nothing changed (the transaction stays declined). ok is false when the
// result is not such a case.
func (s *Service) lateSuccess(ctx context.Context, tx *payment.Transaction, status provider.Status, providerRef string) (Settled, bool, error) {
	if tx.Status != payment.TxDeclined || status != provider.Approved || providerRef == "" {
		return Settled{}, false, nil
	}
	got, err := s.voidLate(ctx, tx, providerRef, false)
	if errors.Is(err, ErrNoAfterStore) {
		s.Log.Error("a charge succeeded after its transaction was declined and cannot be recorded", "transaction_id", tx.ID)
	}
	if err != nil {
		return Settled{}, true, err
	}
	return Settled{Duplicate: true, Transaction: got}, true, nil
}

// voidEvent applies an acquirer's event about a void (RefundEvent, a
// refund id with VoidPrefix): a final result settles the transaction's late
// charge. It binds when the event's charge is the late charge's (its
// acquirer id), in its currency, for no more than it; the void of a charge
// that could not pay its request (complete.go) has no late charge and is
// acknowledged with nothing to settle. Repeated and concurrent deliveries
// change it once (one conditional write of the after record).
func (s *Service) voidEvent(ctx context.Context, r RefundResult) (Settled, error) {
	tx, err := s.loadTx(ctx, r.TransactionID)
	if err != nil {
		return Settled{}, err
	}
	if err := s.bindConnector(tx, r.Connector, "void event "+r.EventID); err != nil {
		return Settled{Transaction: tx}, err
	}
	if r.RefundID != VoidPrefix+tx.Reference {
		return Settled{Transaction: tx}, s.logUnbound(tx, &UnboundError{TransactionID: tx.ID,
			Reason: fmt.Sprintf("void %s is not the transaction's", r.RefundID)}, "void event "+r.EventID)
	}
	next := refundStatusOf(r.Status)
	l := lateOf(tx)
	if l == nil || next == payment.RefundProcessing {
		return Settled{Duplicate: true, Transaction: tx}, nil
	}
	switch {
	case r.ChargeRef != l.ProviderRef:
		return Settled{Transaction: tx}, s.logUnbound(tx, &UnboundError{TransactionID: tx.ID,
			Reason: fmt.Sprintf("void of charge %q, not the late charge %q", r.ChargeRef, l.ProviderRef)}, "void event "+r.EventID)
	case r.Unit != "" && !strings.EqualFold(r.Unit, l.Unit), r.Amount.GreaterThan(l.Amount):
		return Settled{Transaction: tx}, s.logUnbound(tx, &UnboundError{TransactionID: tx.ID,
			Reason: fmt.Sprintf("void of %s %s, the late charge is %s %s", r.Amount, r.Unit, l.Amount, l.Unit)}, "void event "+r.EventID)
	}
	now := s.Now().UTC()
	got, changed, err := s.changeAfter(ctx, tx.ID, false, func(_ *payment.Transaction, a *payment.After) (bool, error) {
		c := a.LateCharge
		switch {
		case c == nil:
			return false, nil
		case c.RefundRef != "" && r.RefundRef != "" && c.RefundRef != r.RefundRef:
			return false, &UnboundError{TransactionID: tx.ID, Reason: fmt.Sprintf("void %s, the late charge's is %s", r.RefundRef, c.RefundRef)}
		case c.Status == payment.LateFailed:
			return false, nil // final
		case next == payment.RefundRefunded && c.ConfirmedAt != nil:
			return false, nil // confirmed already
		}
		if c.RefundRef == "" {
			c.RefundRef = r.RefundRef
		}
		if c.VoidedAt == nil {
			c.VoidedAt = &now
		}
		c.Action = r.Action
		if next == payment.RefundFailed {
			c.Status = payment.LateFailed
		} else {
			c.Status, c.ConfirmedAt = payment.LateVoided, &now
		}
		return true, nil
	})
	if errors.Is(err, ErrNoAfterStore) {
		return Settled{Duplicate: true, Transaction: tx}, nil // no late charge is recorded there either
	}
	if err != nil {
		return Settled{Transaction: tx}, s.logUnbound(tx, err, "void event "+r.EventID)
	}
	if changed {
		attrs := []any{"transaction_id", got.ID, "payment_request_id", got.PaymentRequestID, "provider_ref", r.ChargeRef,
			"refund_ref", r.RefundRef, "action", r.Action}
		if next == payment.RefundFailed {
			s.Log.Error("the acquirer failed to void a late charge: refund it by hand", append(attrs, "reason", r.FailureReason)...)
		} else {
			s.Log.Info("a late charge's void confirmed: the money is returned", attrs...)
		}
	}
	return Settled{Changed: changed, Duplicate: !changed, Transaction: got}, nil
}
