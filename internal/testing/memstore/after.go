package memstore

import (
	"context"
	"sort"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

// A transaction after its first answer (payments.AfterStore), as
// internal/dynamo/after.go keeps it: revision-guarded writes of the
// service's refund and of the after record, the back-off shards of open
// attempts, and the merchants' dispute lists.

func (s *Store) openAt(row *txRow, open time.Time) {
	if open.IsZero() {
		return
	}
	row.open, row.backoff, row.t.RecoverAfter = true, false, msTime(open)
}

// WriteRefund replaces the refund of txID with r (written as rev+1) if its
// revision is still rev; payment.ErrConflict with the current transaction
// otherwise.
func (s *Store) WriteRefund(_ context.Context, txID int64, rev int64, r payment.Refund, open time.Time) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("WriteRefund")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[txID]
	if !ok {
		return nil, payment.ErrNotFound
	}
	if row.t.Refund == nil || row.t.Refund.ID != r.ID || row.t.Refund.Rev != rev {
		return s.txOut(row), payment.ErrConflict
	}
	rc := clone(r)
	rc.Rev = rev + 1
	row.t.Refund, row.t.UpdatedAt = &rc, time.Now().UTC()
	s.openAt(row, open)
	return s.txOut(row), after
}

// WriteAfter replaces the after record of txID with a (written as rev+1)
// if its revision is still rev; payment.ErrConflict otherwise.
func (s *Store) WriteAfter(_ context.Context, txID int64, rev int64, a payment.After, open time.Time) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("WriteAfter")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[txID]
	if !ok {
		return nil, payment.ErrNotFound
	}
	cur := int64(0)
	if row.t.After != nil {
		cur = row.t.After.Rev
	}
	if cur != rev {
		return s.txOut(row), payment.ErrConflict
	}
	ac := clone(a)
	ac.Rev = rev + 1
	row.t.After, row.t.UpdatedAt = &ac, time.Now().UTC()
	s.openAt(row, open)
	return s.txOut(row), after
}

// DeferRecovery moves an open attempt's next look from prev to next and
// into its back-off shard; payment.ErrConflict when it changed meanwhile.
func (s *Store) DeferRecovery(_ context.Context, txID int64, prev, next time.Time, tries int) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("DeferRecovery")
	if before != nil {
		return before
	}
	row, ok := s.txs[txID]
	if !ok || !row.open {
		return payment.ErrConflict
	}
	at := row.t.RecoverAfter.UnixMilli()
	if at != prev.UnixMilli() && (at != next.UnixMilli() || row.t.RecoverTries != tries) {
		return payment.ErrConflict
	}
	row.t.RecoverAfter, row.t.RecoverTries, row.backoff = msTime(next), tries, true
	return after
}

// CloseOpen takes a final transaction whose recovery time is still prev
// off the open list (nothing to do when it is off already).
func (s *Store) CloseOpen(_ context.Context, txID int64, prev time.Time) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CloseOpen")
	if before != nil {
		return before
	}
	row, ok := s.txs[txID]
	if !ok || !row.open {
		return after
	}
	if row.t.RecoverAfter.UnixMilli() != prev.UnixMilli() || !row.t.Status.Final() {
		return payment.ErrConflict
	}
	row.open, row.backoff, row.t.RecoverAfter, row.t.RecoverTries = false, false, time.Time{}, 0
	return after
}

// PutDisputeEntry keeps merchantID's list of disputes (a later revision
// wins).
func (s *Store) PutDisputeEntry(_ context.Context, merchantID string, e payment.DisputeEntry) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("PutDisputeEntry")
	if before != nil {
		return before
	}
	m := s.disputes[merchantID]
	if m == nil {
		m = map[int64]payment.DisputeEntry{}
		s.disputes[merchantID] = m
	}
	if cur, ok := m[e.TransactionID]; !ok || cur.Rev <= e.Rev {
		m[e.TransactionID] = clone(e)
	}
	return after
}

// Disputes lists merchantID's disputes by transaction id.
func (s *Store) Disputes(_ context.Context, merchantID string, _ time.Time) ([]payment.DisputeEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []payment.DisputeEntry
	for _, e := range s.disputes[merchantID] {
		out = append(out, clone(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionID < out[j].TransactionID })
	return out, nil
}
