package memstore

import (
	"context"
	"sort"
	"time"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// CreateMerchant stores a new merchant at version 1; a Exists error if
// the id is taken.
func (s *Store) CreateMerchant(_ context.Context, m *merchant.Merchant) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CreateMerchant")
	if before != nil {
		return before
	}
	if _, ok := s.merchants[m.ID]; ok {
		return exists()
	}
	m.Version = 1
	c := clone(*m)
	s.merchants[m.ID] = &c
	return after
}

// NotificationSubjects reads each event's transaction, payment request and
// merchant (nil when missing, or when the event names no merchant), keyed
// by transaction id, in one call, as the DynamoDB store's BatchGetItem.
func (s *Store) NotificationSubjects(_ context.Context, evs []payment.NotifyEvent) (map[int64]merchant.NotificationSubject, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("NotificationSubjects"); err != nil {
		return nil, err
	}
	out := make(map[int64]merchant.NotificationSubject, len(evs))
	for _, ev := range evs {
		var sub merchant.NotificationSubject
		if row, ok := s.txs[ev.TransactionID]; ok {
			sub.Transaction = s.txOut(row)
		}
		if row, ok := s.requests[ev.RequestID]; ok {
			sub.Request = row.out()
		}
		if m, ok := s.merchants[ev.MerchantID]; ok && ev.MerchantID != "" {
			c := clone(*m)
			sub.Merchant = &c
		}
		out[ev.TransactionID] = sub
	}
	return out, nil
}

// RecordDeliveries records each attempt and clears the outbox entry a write
// names when it is still that attempt's event's (a first attempt's); an
// entry already gone or another event's leaves the record alone, as the
// DynamoDB store's fallback does. One call: one fault for all the writes.
func (s *Store) RecordDeliveries(_ context.Context, ws []payment.DeliveryWrite) []error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(ws))
	before, after := s.begin("RecordDeliveries")
	if before != nil {
		for i := range errs {
			errs[i] = before
		}
		return errs
	}
	for i, w := range ws {
		a := w.Attempt
		s.deliveries[a.RequestID] = append(s.deliveries[a.RequestID], a)
		if row, ok := s.txs[w.ClearOutboxOf]; ok && w.ClearOutboxOf != 0 && row.outbox != nil && row.outbox.EventID == a.EventID {
			row.outbox, row.outboxDueAt = nil, ""
		}
		errs[i] = after
	}
	return errs
}

// Deliveries lists a request's recorded attempts, oldest first (by time,
// then event and attempt number, as the DynamoDB store's sort key).
func (s *Store) Deliveries(_ context.Context, requestID int64, _ time.Time) ([]payment.DeliveryAttempt, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("Deliveries"); err != nil {
		return nil, err
	}
	out := append([]payment.DeliveryAttempt(nil), s.deliveries[requestID]...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		if a.EventID != b.EventID {
			return a.EventID < b.EventID
		}
		return a.Attempt < b.Attempt
	})
	return out, nil
}
