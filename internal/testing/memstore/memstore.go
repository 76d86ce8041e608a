// Package memstore is an in-memory payments.Store, plus the notifier's
// stores (notifier.Store, notifier.OutboxStore) and the batch processor's
// batchproc.Store (batch.go), for fast tests: the payment state machine,
// the notification outbox and deliveries, and the batch processor without
// emulators. It keeps the DynamoDB store's
// semantics that callers depend on, each write under the same condition as
// internal/dynamo's (a Conflict error exactly where the condition fails,
// a NotFound error for a missing item, transactions all-or-nothing,
// copies in and out), and the contract test in this package runs the same
// assertions against both so the two cannot drift. It can also fail on
// purpose (Fail, CrashAfter) to reach paths the emulators never take.
package memstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testing/faults"
)

type requestRow struct {
	r     payment.Request
	lease payment.AttemptLease // zero: no attemptTx
}

type txRow struct {
	t payment.Transaction
	// open: the transaction carries openShard (is in the reconciler's index).
	open bool
	// outbox is the notification written with the settlement, if any, and
	// its due time as DynamoDB keeps it (RFC 3339 text: the reconciler's
	// lease compares it exactly).
	outbox      *payment.NotifyEvent
	outboxDueAt string
	// backoff: the attempt sits in its back-off shard (after.go).
	backoff bool
}

// Store is an in-memory payments.Store. The zero value is not usable: New.
type Store struct {
	mu        sync.Mutex
	requests  map[int64]*requestRow
	txs       map[int64]*txRow
	limits    map[string]map[string]decimal.Decimal // merchant#month → counter → value
	merchants map[string]*merchant.Merchant
	// deliveries are the recorded notification attempts by request, in
	// the order recorded (notify.go).
	deliveries map[int64][]payment.DeliveryAttempt
	faults     faults.Plan

	// The batch processor's records (batch.go).
	jobs map[string]*jobRow          // merchantId#jobId
	rows map[string]*batch.RowRecord // merchantId#key
	open map[string]int64            // open-job markers: merchantId#jobId → since (unix ms)
	// disputes are the merchants' dispute lists (after.go).
	disputes map[string]map[int64]payment.DisputeEntry
	latency  atomic.Int64 // ns each call waits before it runs
}

// New returns an empty store.
func New() *Store {
	return &Store{requests: map[int64]*requestRow{}, txs: map[int64]*txRow{},
		limits: map[string]map[string]decimal.Decimal{}, merchants: map[string]*merchant.Merchant{},
		deliveries: map[int64][]payment.DeliveryAttempt{},
		jobs:       map[string]*jobRow{}, rows: map[string]*batch.RowRecord{}, open: map[string]int64{},
		disputes: map[string]map[int64]payment.DisputeEntry{}}
}

// Fail makes the next n-th call of method (1: the next one) return err
// without writing anything, as a store call that timed out before DynamoDB
// applied it.
func (s *Store) Fail(method string, n int, err error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Fail(method, n, err)
}

// CrashAfter makes the next n-th call of method apply its write and then
// return err: the write happened, the caller never learnt it (a Lambda
// killed, or a response lost, after DynamoDB committed).
func (s *Store) CrashAfter(method string, n int, err error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.CrashAfter(method, n, err)
}

// SetLatency makes every call wait d before it runs, outside the lock, as
// a call to DynamoDB does: concurrent callers then interleave between
// their calls instead of each running its whole sequence at once, so a
// race the conditional writes must settle really happens.
func (s *Store) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// Calls returns how many times method was called.
func (s *Store) Calls(method string) int {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Calls(method)
}

func (s *Store) wait() {
	if d := time.Duration(s.latency.Load()); d > 0 {
		time.Sleep(d)
	}
}

// begin counts a call of method (s.mu held) and returns the fault that
// fires before it, or the one to fire after its write.
func (s *Store) begin(method string) (before, after error) { return s.faults.Begin(method) }

// PutMerchant stores (a copy of) m.
func (s *Store) PutMerchant(m *merchant.Merchant) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := clone(*m)
	s.merchants[m.ID] = &c
}

// Merchant loads a merchant by id; a NotFound error when missing.
func (s *Store) Merchant(_ context.Context, id string) (*merchant.Merchant, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("Merchant"); err != nil {
		return nil, err
	}
	m, ok := s.merchants[id]
	if !ok {
		return nil, notFound()
	}
	c := clone(*m)
	return &c, nil
}

// Outbox returns transaction id's outbox entry: the notification written
// with its settlement until the notifier clears it (nil when none).
func (s *Store) Outbox(id int64) *payment.NotifyEvent {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.txs[id]
	if !ok || row.outbox == nil {
		return nil
	}
	ev := clone(*row.outbox)
	return &ev
}

// RequestsOf lists merchantID's payment requests, by id (a test's look:
// no call is counted).
func (s *Store) RequestsOf(merchantID string) []*payment.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*payment.Request
	for _, row := range s.requests {
		if row.r.MerchantID == merchantID {
			out = append(out, row.out())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// TransactionsOfRequest lists a request's transactions, oldest first.
func (s *Store) TransactionsOfRequest(_ context.Context, requestID int64) ([]*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("TransactionsOfRequest"); err != nil {
		return nil, err
	}
	var out []*payment.Transaction
	for _, row := range s.txs {
		if row.t.PaymentRequestID == requestID {
			out = append(out, s.txOut(row))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// ---- payment requests --------------------------------------------------

func storedRequest(r *payment.Request) payment.Request {
	c := clone(*r)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c
}

func (row *requestRow) out() *payment.Request {
	c := clone(row.r)
	return &c
}

// CreatePaymentRequest stores a new request (version 1); a Exists error
// when the id is taken.
func (s *Store) CreatePaymentRequest(_ context.Context, r *payment.Request) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CreatePaymentRequest")
	if before != nil {
		return before
	}
	r.Version = 1
	if _, ok := s.requests[r.ID]; ok {
		return exists()
	}
	s.requests[r.ID] = &requestRow{r: storedRequest(r)}
	return after
}

// PaymentRequest loads a request; a NotFound error when missing.
func (s *Store) PaymentRequest(_ context.Context, id int64) (*payment.Request, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("PaymentRequest"); err != nil {
		return nil, err
	}
	row, ok := s.requests[id]
	if !ok {
		return nil, notFound()
	}
	return row.out(), nil
}

// PaymentRequestLease loads a request with its attempt lease.
func (s *Store) PaymentRequestLease(_ context.Context, id int64) (*payment.Request, payment.AttemptLease, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("PaymentRequestLease"); err != nil {
		return nil, payment.AttemptLease{}, err
	}
	row, ok := s.requests[id]
	if !ok {
		return nil, payment.AttemptLease{}, notFound()
	}
	return row.out(), row.lease, nil
}

// LeasePaymentRequest takes the attempt lease under the DynamoDB store's
// condition: the merchant's, unpaid, no attemptTx, and amount and unit
// equal when given. a Conflict error otherwise (a missing request too).
func (s *Store) LeasePaymentRequest(_ context.Context, l payment.Lease) (*payment.Request, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("LeasePaymentRequest")
	if before != nil {
		return nil, before
	}
	row, ok := s.requests[l.RequestID]
	if !ok || row.r.MerchantID != l.MerchantID || row.r.Status != payment.RequestUnpaid || row.lease.TransactionID != 0 ||
		(l.Amount != nil && !row.r.Amount.Equal(*l.Amount)) || (l.Unit != "" && row.r.Unit != l.Unit) {
		return nil, conflict()
	}
	row.lease = payment.AttemptLease{TransactionID: l.TransactionID, Until: l.Until.UnixMilli()}
	row.r.UpdatedAt = l.Now.UTC()
	row.r.Version++
	return row.out(), after
}

// CreateLeasedPaymentRequest stores a new request whose lease txID holds;
// a Exists error when the id is taken.
func (s *Store) CreateLeasedPaymentRequest(_ context.Context, r *payment.Request, txID int64, until time.Time) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CreateLeasedPaymentRequest")
	if before != nil {
		return before
	}
	r.Version = 1
	if _, ok := s.requests[r.ID]; ok {
		return exists()
	}
	s.requests[r.ID] = &requestRow{r: storedRequest(r), lease: payment.AttemptLease{TransactionID: txID, Until: until.UnixMilli()}}
	return after
}

// CreateLeasedRequestWithTransaction writes the leased request and t
// together or not at all: a Exists error when the request id is taken,
// a Conflict error when only t's is.
func (s *Store) CreateLeasedRequestWithTransaction(_ context.Context, r *payment.Request, t *payment.Transaction, until time.Time) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CreateLeasedRequestWithTransaction")
	if before != nil {
		return before
	}
	r.Version = 1
	if _, ok := s.requests[r.ID]; ok {
		return exists()
	}
	if _, ok := s.txs[t.ID]; ok {
		return conflict()
	}
	s.requests[r.ID] = &requestRow{r: storedRequest(r), lease: payment.AttemptLease{TransactionID: t.ID, Until: until.UnixMilli()}}
	s.txs[t.ID] = storedTx(t)
	return after
}

// commitOK is CommitAttempt's condition: unpaid and txID holds the lease.
func commitOK(row *requestRow, ok bool, txID int64) bool {
	return ok && row.r.Status == payment.RequestUnpaid && row.lease.TransactionID == txID
}

func applyCommit(row *requestRow, c payment.AttemptCommit) {
	st := c.Status
	row.r.TransactionID = c.TransactionID
	row.r.TransactionStatus = &st
	row.r.LastLog = &payment.LastLog{TransactionStatusID: c.Status, Message: c.Message, Code: c.Code}
	row.r.UpdatedAt = c.Now.UTC()
	if c.TransactionNumber != "" {
		row.r.TransactionNumber = c.TransactionNumber
	}
	if c.Status == payment.TxPending {
		row.lease.Until = c.LeaseUntil.UnixMilli()
	} else {
		if c.Status == payment.TxApproved {
			row.r.Status = payment.RequestPaid
		}
		row.lease = payment.AttemptLease{}
	}
	row.r.Version++
}

func validCommit(c payment.AttemptCommit) error {
	switch c.Status {
	case payment.TxApproved, payment.TxDeclined, payment.TxPending:
		return nil
	}
	return fmt.Errorf("commit attempt: status %d is not 1, 2 or 3", c.Status)
}

// CommitAttempt records the attempt holding the lease (see the DynamoDB
// store's): a Conflict error unless the request is unpaid and
// c.TransactionID holds its lease.
func (s *Store) CommitAttempt(_ context.Context, c payment.AttemptCommit) (*payment.Request, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CommitAttempt")
	if before != nil {
		return nil, before
	}
	if err := validCommit(c); err != nil {
		return nil, err
	}
	row, ok := s.requests[c.RequestID]
	if !commitOK(row, ok, c.TransactionID) {
		return nil, conflict()
	}
	applyCommit(row, c)
	return row.out(), after
}

// CommitAndSettle is CommitAttempt and SettleTransaction in one
// transaction: both guards hold and both writes happen, or nothing is
// written and the answer is a Conflict error.
func (s *Store) CommitAndSettle(_ context.Context, c payment.AttemptCommit, st payment.Settlement) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CommitAndSettle")
	if before != nil {
		return before
	}
	if !c.Status.Final() || c.Status != st.Status || c.TransactionID != st.TransactionID {
		return fmt.Errorf("commit and settle: transaction %d status %d/%d is not one final outcome", c.TransactionID, c.Status, st.Status)
	}
	row, ok := s.requests[c.RequestID]
	tx, txOK := s.txs[st.TransactionID]
	if !commitOK(row, ok, c.TransactionID) || !settleOK(tx, txOK) {
		return conflict()
	}
	applyCommit(row, c)
	applySettle(tx, st)
	return after
}

// ReleaseLease gives up txID's lease; a Conflict error when txID does
// not hold it.
func (s *Store) ReleaseLease(_ context.Context, requestID, txID int64) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ReleaseLease")
	if before != nil {
		return before
	}
	row, ok := s.requests[requestID]
	if !ok || row.lease.TransactionID != txID {
		return conflict()
	}
	row.lease = payment.AttemptLease{}
	return after
}

// DiscardAttempt deletes waiting transaction txID (no provider reference)
// and releases its lease, together or not at all (a Conflict error).
func (s *Store) DiscardAttempt(_ context.Context, requestID, txID int64) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("DiscardAttempt")
	if before != nil {
		return before
	}
	tx, txOK := s.txs[txID]
	row, ok := s.requests[requestID]
	if !txOK || tx.t.Status != payment.TxWaiting || tx.t.ProviderRef != "" || !ok || row.lease.TransactionID != txID {
		return conflict()
	}
	delete(s.txs, txID)
	row.lease = payment.AttemptLease{}
	return after
}

// RecordCancelledAttempt shows attempt txID's final state on a cancelled
// request; a Conflict error unless cancelled with transactionId txID.
func (s *Store) RecordCancelledAttempt(_ context.Context, requestID, txID int64, st payment.TransactionStatus, code codes.Code, message string, now time.Time) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("RecordCancelledAttempt")
	if before != nil {
		return before
	}
	row, ok := s.requests[requestID]
	if !ok || row.r.Status != payment.RequestCancelled || row.r.TransactionID != txID {
		return conflict()
	}
	row.r.TransactionStatus = &st
	row.r.LastLog = &payment.LastLog{TransactionStatusID: st, Message: message, Code: code}
	row.r.UpdatedAt = now.UTC()
	row.lease = payment.AttemptLease{}
	return after
}

// CancelPaymentRequest cancels an unpaid request of merchantID:
// a NotFound error when missing or another merchant's, a Conflict error
// (with the current request) when no longer unpaid.
func (s *Store) CancelPaymentRequest(_ context.Context, id int64, merchantID string, now time.Time) (*payment.Request, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CancelPaymentRequest")
	if before != nil {
		return nil, before
	}
	row, ok := s.requests[id]
	if !ok || row.r.MerchantID != merchantID {
		return nil, notFound()
	}
	if row.r.Status != payment.RequestUnpaid {
		return row.out(), conflict()
	}
	row.r.Status, row.r.UpdatedAt = payment.RequestCancelled, now.UTC()
	row.r.Version++
	return row.out(), after
}

// ---- transactions ------------------------------------------------------

// storedTx is t as the DynamoDB store keeps it: times in UTC, the
// millisecond fields truncated, RecoverAfter only while not final.
func storedTx(t *payment.Transaction) *txRow {
	c := clone(*t)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	c.PendingUntil = msTime(c.PendingUntil)
	open := !c.RecoverAfter.IsZero() && !c.Status.Final()
	if open {
		c.RecoverAfter = msTime(c.RecoverAfter)
	} else {
		c.RecoverAfter = time.Time{}
	}
	return &txRow{t: c, open: open}
}

func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

func (s *Store) txOut(row *txRow) *payment.Transaction {
	c := clone(row.t)
	return &c
}

// CreateTransaction stores a new transaction; a Exists error when the
// id is taken.
func (s *Store) CreateTransaction(_ context.Context, t *payment.Transaction) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CreateTransaction")
	if before != nil {
		return before
	}
	if _, ok := s.txs[t.ID]; ok {
		return exists()
	}
	s.txs[t.ID] = storedTx(t)
	return after
}

// Transaction loads a transaction; a NotFound error when missing.
func (s *Store) Transaction(_ context.Context, id int64) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("Transaction"); err != nil {
		return nil, err
	}
	row, ok := s.txs[id]
	if !ok {
		return nil, notFound()
	}
	return s.txOut(row), nil
}

// TransactionByNumber finds the one transaction with number num;
// a NotFound error when there is none (or more than one).
func (s *Store) TransactionByNumber(_ context.Context, num string) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("TransactionByNumber"); err != nil {
		return nil, err
	}
	var found *txRow
	for _, row := range s.txs {
		if row.t.Number == num {
			if found != nil {
				return nil, notFound()
			}
			found = row
		}
	}
	if found == nil {
		return nil, notFound()
	}
	return s.txOut(found), nil
}

// MarkPending applies p if the transaction is still waiting;
// a Conflict error with the current transaction otherwise,
// a NotFound error when missing.
// FailOver moves a transaction waiting on connector f.From to f.To;
// Conflict with the current transaction otherwise.
func (s *Store) FailOver(_ context.Context, f payment.Failover) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("FailOver")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[f.TransactionID]
	if !ok {
		return nil, notFound()
	}
	if row.t.Status != payment.TxWaiting || row.t.Connector != f.From {
		return s.txOut(row), conflict()
	}
	t := &row.t
	t.Connector, t.FailedOver, t.UpdatedAt = f.To, append([]string(nil), f.FailedOver...), f.Now.UTC()
	return s.txOut(row), after
}

func (s *Store) MarkPending(_ context.Context, p payment.Pending) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("MarkPending")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[p.TransactionID]
	if !ok {
		return nil, notFound()
	}
	if row.t.Status != payment.TxWaiting {
		return s.txOut(row), conflict()
	}
	t := &row.t
	t.Status, t.Message, t.UpdatedAt = payment.TxPending, p.Message, p.Now.UTC()
	t.PendingUntil, t.RecoverAfter = msTime(p.PendingUntil), msTime(p.RecoverAfter)
	if p.ProviderRef != "" && t.ProviderRef == "" {
		t.ProviderRef = p.ProviderRef
	}
	if p.ThreeDS != "" {
		t.ThreeDS = p.ThreeDS
	}
	if p.NextAction != nil {
		na := *p.NextAction
		t.NextAction = &na
	}
	return s.txOut(row), after
}

func settleOK(row *txRow, ok bool) bool {
	return ok && (row.t.Status == payment.TxWaiting || row.t.Status == payment.TxPending)
}

func applySettle(row *txRow, st payment.Settlement) {
	t := &row.t
	now := st.Now.UTC()
	t.Status, t.Message, t.UpdatedAt, t.SettledAt = st.Status, st.Message, now, &now
	t.NextAction, t.PendingUntil, t.RecoverAfter, row.open = nil, time.Time{}, time.Time{}, false
	row.backoff = false
	if st.Code != "" {
		t.Code = st.Code
	}
	if st.ProviderRef != "" && t.ProviderRef == "" {
		t.ProviderRef = st.ProviderRef
	}
	if st.ThreeDS != "" {
		t.ThreeDS = st.ThreeDS
	}
	if st.Event.EventID != "" {
		ev := clone(st.Event)
		row.outbox, row.outboxDueAt = &ev, dueText(st.Now)
	}
}

// SettleTransaction moves a waiting or pending transaction to its final
// state with its outbox entry; a Conflict error with the stored
// transaction when it is already final, a NotFound error when missing.
func (s *Store) SettleTransaction(_ context.Context, st payment.Settlement) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("SettleTransaction")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[st.TransactionID]
	if !ok {
		return nil, notFound()
	}
	if !settleOK(row, ok) {
		return s.txOut(row), conflict()
	}
	applySettle(row, st)
	return s.txOut(row), after
}

// OpenAttempts lists shard's open transactions whose RecoverAfter is
// before cutoff, earliest first, at most limit.
func (s *Store) OpenAttempts(_ context.Context, shard int, cutoff time.Time, limit int32) ([]*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("OpenAttempts"); err != nil {
		return nil, err
	}
	var rows []*txRow
	for id, row := range s.txs {
		sh := int(uint64(id) % payment.OpenShards)
		if row.backoff {
			sh += payment.OpenShards
		}
		if row.open && sh == shard && row.t.RecoverAfter.UnixMilli() < cutoff.UnixMilli() {
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].t.RecoverAfter.Before(rows[j].t.RecoverAfter) })
	out := make([]*payment.Transaction, 0, len(rows))
	for _, row := range rows {
		if len(out) == int(limit) {
			break
		}
		out = append(out, s.txOut(row))
	}
	return out, nil
}

// BeginRefund records refund r on an approved transaction of merchantID
// that has none yet; a Conflict error otherwise (a missing one too).
func (s *Store) BeginRefund(_ context.Context, txID int64, merchantID string, r payment.Refund, recoverAfter time.Time) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("BeginRefund")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[txID]
	if !ok || row.t.Status != payment.TxApproved || row.t.MerchantID != merchantID || row.t.Refund != nil {
		return nil, conflict()
	}
	rc := clone(r)
	rc.CreatedAt = rc.CreatedAt.UTC()
	row.t.Refund, row.t.UpdatedAt = &rc, r.CreatedAt.UTC()
	row.open, row.t.RecoverAfter = true, msTime(recoverAfter)
	row.backoff = false
	return s.txOut(row), after
}

// CompleteRefund moves processing refund refundID to status;
// a Conflict error when it is not that refund or no longer processing.
func (s *Store) CompleteRefund(_ context.Context, txID int64, refundID, status, providerRef string, code codes.Code, now time.Time) (*payment.Transaction, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CompleteRefund")
	if before != nil {
		return nil, before
	}
	row, ok := s.txs[txID]
	if !ok || row.t.Refund == nil || row.t.Refund.ID != refundID || row.t.Refund.Status != payment.RefundProcessing {
		return nil, conflict()
	}
	now = now.UTC()
	rf := row.t.Refund
	rf.Status, rf.ProviderRef, rf.Code, rf.CompletedAt = status, providerRef, string(code), &now
	row.t.UpdatedAt, row.open, row.t.RecoverAfter = now, false, time.Time{}
	row.backoff = false
	return s.txOut(row), after
}

// ---- limit counters ----------------------------------------------------

func windowKey(w payment.LimitWindow) string { return w.MerchantID + "#" + w.Month }

func counterNames(w payment.LimitWindow) (mc, dc, ma, da string) {
	return "mc", "dc" + w.Day, "ma_" + w.Unit, "da" + w.Day + "_" + w.Unit
}

// ReserveLimits adds one attempt of amount if every limited counter stays
// within caps; a Conflict error (nothing added) otherwise.
func (s *Store) ReserveLimits(_ context.Context, w payment.LimitWindow, amount decimal.Decimal, caps payment.LimitCaps) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ReserveLimits")
	if before != nil {
		return before
	}
	item := s.limits[windowKey(w)]
	mc, dc, ma, da := counterNames(w)
	get := func(n string) (decimal.Decimal, bool) { v, ok := item[n]; return v, ok }
	if v, ok := get(dc); caps.DailyCount > 0 && ok && !v.LessThan(decimal.NewFromInt(caps.DailyCount)) {
		return conflict()
	}
	if v, ok := get(mc); caps.MonthlyCount > 0 && ok && !v.LessThan(decimal.NewFromInt(caps.MonthlyCount)) {
		return conflict()
	}
	if v, ok := get(da); caps.DailyAmount != nil && ok && v.GreaterThan(caps.DailyAmount.Sub(amount)) {
		return conflict()
	}
	if v, ok := get(ma); caps.MonthlyAmount != nil && ok && v.GreaterThan(caps.MonthlyAmount.Sub(amount)) {
		return conflict()
	}
	if item == nil {
		item = map[string]decimal.Decimal{}
		s.limits[windowKey(w)] = item
	}
	one := decimal.NewFromInt(1)
	item[mc], item[dc], item[ma], item[da] = item[mc].Add(one), item[dc].Add(one), item[ma].Add(amount), item[da].Add(amount)
	return after
}

// ReleaseLimits takes one attempt of amount back out of the window's
// counters; nothing when nothing was ever reserved in the window.
func (s *Store) ReleaseLimits(_ context.Context, w payment.LimitWindow, amount decimal.Decimal) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ReleaseLimits")
	if before != nil {
		return before
	}
	item := s.limits[windowKey(w)]
	if item == nil {
		return after
	}
	mc, dc, ma, da := counterNames(w)
	one := decimal.NewFromInt(1)
	item[mc], item[dc], item[ma], item[da] = item[mc].Sub(one), item[dc].Sub(one), item[ma].Sub(amount), item[da].Sub(amount)
	return after
}

// LimitUsageOf reads the window's counters.
func (s *Store) LimitUsageOf(_ context.Context, w payment.LimitWindow) (payment.LimitUsage, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("LimitUsageOf"); err != nil {
		return payment.LimitUsage{}, err
	}
	item := s.limits[windowKey(w)]
	mc, dc, ma, da := counterNames(w)
	return payment.LimitUsage{MonthlyCount: item[mc].IntPart(), DailyCount: item[dc].IntPart(),
		MonthlyAmount: item[ma], DailyAmount: item[da]}, nil
}

// ---- the outbox's reconciler side ---------------------------------------

func dueText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// outboxShard is the shard the DynamoDB store files ev under.
func outboxShard(ev *payment.NotifyEvent) int {
	h := fnv.New32a()
	h.Write([]byte(ev.EventID))
	return payment.OutboxShard(ev.Channel) + int(h.Sum32()%payment.OutboxShards)
}

// PutOutbox stores ev in its transaction's outbox on its own;
// a NotFound error when the transaction is missing.
func (s *Store) PutOutbox(_ context.Context, ev payment.NotifyEvent, now time.Time) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("PutOutbox")
	if before != nil {
		return before
	}
	row, ok := s.txs[ev.TransactionID]
	if !ok {
		return notFound()
	}
	c := clone(ev)
	row.outbox, row.outboxDueAt = &c, dueText(now)
	return after
}

// DueOutbox lists one shard's entries due before cutoff, earliest first.
func (s *Store) DueOutbox(_ context.Context, shard int, cutoff time.Time, limit int32) ([]payment.OutboxEntry, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("DueOutbox"); err != nil {
		return nil, err
	}
	c := dueText(cutoff)
	var out []payment.OutboxEntry
	for _, row := range s.txs {
		// The index's sort key is the text: compared as DynamoDB compares strings.
		if row.outbox != nil && outboxShard(row.outbox) == shard && row.outboxDueAt < c {
			out = append(out, payment.OutboxEntry{Event: clone(*row.outbox), DueAt: row.outboxDueAt})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DueAt < out[j].DueAt })
	if len(out) > int(limit) {
		out = out[:limit]
	}
	return out, nil
}

// LeaseOutbox moves e's due time to now if it is still e.DueAt; false when
// the entry changed or is gone.
func (s *Store) LeaseOutbox(_ context.Context, e payment.OutboxEntry, now time.Time) (bool, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("LeaseOutbox")
	if before != nil {
		return false, before
	}
	row, ok := s.txs[e.Event.TransactionID]
	if !ok || row.outbox == nil || row.outboxDueAt != e.DueAt {
		return false, nil
	}
	row.outboxDueAt = dueText(now)
	return true, after
}

// ClearOutbox removes the transaction's entry if it is eventID's; nothing
// (and no error) otherwise.
func (s *Store) ClearOutbox(_ context.Context, txID int64, eventID string) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ClearOutbox")
	if before != nil {
		return before
	}
	if row, ok := s.txs[txID]; ok && row.outbox != nil && row.outbox.EventID == eventID {
		row.outbox, row.outboxDueAt = nil, ""
	}
	return after
}

// MarkOutboxUnsent makes eventID's entry due at the Unix epoch; nothing
// when the entry is missing or another event's.
func (s *Store) MarkOutboxUnsent(_ context.Context, txID int64, eventID string) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("MarkOutboxUnsent")
	if before != nil {
		return before
	}
	if row, ok := s.txs[txID]; ok && row.outbox != nil && row.outbox.EventID == eventID {
		row.outboxDueAt = dueText(time.Unix(0, 0))
	}
	return after
}

// The store answers in kinds (internal/errkind), as the DynamoDB store does.

func notFound() error { return errkind.New(errkind.NotFound, "not found", "") }
func conflict() error { return errkind.New(errkind.Conflict, "conditional write failed", "") }
func exists() error   { return errkind.New(errkind.Exists, "already exists", "") }
