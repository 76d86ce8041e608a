package paycore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// Recover drives one transaction a crash may have left open to a final,
// consistent state by asking the provider what became of its reference —
// never by charging again. An attempt still pending at the provider within
// its window is left alone; past its window, one that waits for a step
// (a challenge, a QR code) is closed at the acquirer and declined 013. A
// waiting one whose acquirer cannot tell (Adyen without a stored answer)
// is cancelled there by its reference once its sender is gone, and
// declined 001 (cancelUnknown). A final transaction gets what it still owes after its first answer (a
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
		cancelled, cerr := s.cancelUnknown(ctx, tx, err)
		if cerr != nil || !cancelled {
			return true, errors.Join(fmt.Errorf("look up transaction %d: %w", tx.ID, err), cerr)
		}
		out = provider.Final(provider.Declined, codes.BankSystemError, "")
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

// cancelUnknown closes waiting attempt tx whose lookup could not tell what
// became of its charge (lookupErr is provider.ErrOutcomeUnknown: Adyen
// keeps no answer for the reference) once the process that sent the charge
// is gone (senderGone), at a connector that can cancel by reference
// (provider.ReferenceCanceller). It sends the cancel and reports whether
// the acquirer acknowledged it; the caller then declines the attempt 001,
// the decline of a reference never charged, through the same final commit
// (so the request is payable again). No second charge can come of it:
//
//   - nobody sends the charge again: the process that sent it is gone and
//     card data is not persisted (a retry of this very attempt carries it,
//     but past the sender's lease recovers the attempt instead of sending
//     it: resendClosed);
//   - an authorisation that did reach the acquirer is cancelled;
//   - one the acquirer could not cancel (captured already, or arriving
//     after the cancel) brings its own success event for a declined
//     transaction, which is voided as a late charge (latecharge.go).
//
// The attempt does not fail over after a cancel: an acknowledged cancel
// does not prove the charge was never processed (the cancel's own result
// comes later), so it ends as a decline and the payer's next attempt is
// routed afresh. Nothing new is written: a lost answer of the cancel is
// sent again under the same idempotency key, and the decline is the
// guarded final commit every outcome uses.
func (s *Service) cancelUnknown(ctx context.Context, tx *payment.Transaction, lookupErr error) (bool, error) {
	rc, ok := s.ProviderOf(ctx, tx).(provider.ReferenceCanceller)
	if !ok || tx.Status != payment.TxWaiting || !errors.Is(lookupErr, provider.ErrOutcomeUnknown) || !s.senderGone(tx) {
		return false, nil
	}
	if err := rc.CancelReference(ctx, tx.Reference); err != nil {
		return false, fmt.Errorf("cancel transaction %d by its reference: %w", tx.ID, err)
	}
	crashpoint.Hit(crashpoint.AfterTechnicalCancel)
	s.Log.Warn("a charge without answer outlived its attempt; cancelled at the acquirer by its reference and declined",
		"transaction_id", tx.ID, "payment_request_id", tx.PaymentRequestID, "connector", s.ConnectorOf(tx))
	return true, nil
}

// senderGone reports whether no process can be sending waiting tx's
// charge any more, so its reference may be cancelled: a synchronous attempt
// holds its request for SyncLease from its write-ahead record (the
// function times out long before), a retry of the same attempt re-sends
// the charge only within that lease (resendClosed), and a re-send begun
// there ends within one more SyncLease. Only the first deadline counts (a
// back-off of the reconciler moves RecoverAfter later, not the sender's
// end).
func (s *Service) senderGone(tx *payment.Transaction) bool {
	return s.Now().After(tx.CreatedAt.Add(2 * s.SyncLease))
}

// resendClosed reports whether a retry of waiting attempt tx (same
// Idempotency-Key: a batch line re-charged, an API client's retry) must not
// send its charge again but recover it as the reconciler does: past the
// sender's lease, at a connector that cancels by reference. A charge
// re-sent while the reconciler cancels the reference could be authorised
// and booked before Adyen processes the cancel, leaving the request paid
// with its authorisation released; with no re-send after the lease and no
// cancel before senderGone, the two never overlap.
func (s *Service) resendClosed(ctx context.Context, tx *payment.Transaction) bool {
	_, ok := s.ProviderOf(ctx, tx).(provider.ReferenceCanceller)
	return ok && s.Now().After(tx.CreatedAt.Add(s.SyncLease))
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
	pc, ok := s.ProviderOf(ctx, tx).(provider.PendingCloser)
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
	tx, err := s.txs.Transaction(ctx, txID)
	if errkind.Is(err, errkind.NotFound) {
		if err := s.leases.ReleaseLease(ctx, requestID, txID); err != nil && !errkind.Is(err, errkind.Conflict) {
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
		txs, err := s.open.OpenAttempts(ctx, shard, now, 200)
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
		if !errkind.Is(err, errkind.Conflict) {
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
