package paycore

import (
	"context"
	"errors"
	"fmt"

	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/emf"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// A late charge: the acquirer reports a charge succeeded for a transaction
// that is already declined (an event or a 3-D Secure return after the
// attempt ended). The merchant was told "declined" and the request may be
// paid by another attempt: the money is returned at once (a void: a refund
// of the whole charge, under the acquirer idempotency key of the charge's
// reference, so repeating it refunds once) and reported (metric
// LateChargesVoided, an error log line, the transaction's lateCharge). It
// is never booked as a payment: the declined transaction stays declined.

// MetricLateVoided counts late charges voided (template.yaml alarms on it).
const MetricLateVoided = "LateChargesVoided"

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
	out, err := s.ProviderOf(got).Refund(ctx, provider.RefundRequest{RefundID: "void_" + got.Reference, TransactionID: got.ID,
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
