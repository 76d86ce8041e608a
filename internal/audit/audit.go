// Package audit checks the money invariants over a snapshot of the stored
// records: payment requests, transactions, the sandbox acquirer's ledger,
// notification delivery records and batch jobs. It is domain logic only;
// the storage side (internal/dynamo) collects the records and the callers
// (payctl audit, the reconciler) print or publish the Report.
//
// The records are read by successive scans, not at one instant, so a
// payment moving while the audit runs could look broken. Two rules keep the
// audit free of such false alarms:
//
//   - the scans follow the payment path's write order backwards
//     (transactions, then requests, then the ledger, then deliveries), so a
//     state seen in one table implies what was written before it in the
//     others: an approved transaction implies its paid request and its
//     ledger charge;
//   - a record changed within Grace of now, and an open transaction, are
//     not judged on the cross-table rules a payment in flight breaks for a
//     moment; the stuck rules judge an open transaction once its recovery
//     deadline plus Grace has passed.
package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

// DefaultGrace is how long past a deadline (or since a change) the audit
// waits before it calls a record broken: longer than one reconciler run and
// one notifier attempt.
const DefaultGrace = 5 * time.Minute

// Invariant names, as they appear in Violation.Invariant.
const (
	OneApprovedPerRequest     = "one_approved_transaction_per_request"
	PaidRequestHasApprovedTx  = "paid_request_has_approved_transaction"
	ApprovedTxHasPaidRequest  = "approved_transaction_has_paid_request"
	FinalTxNotified           = "final_transaction_has_notification_record"
	LedgerChargeHasApprovedTx = "ledger_charge_has_approved_transaction"
	ApprovedTxHasLedgerCharge = "approved_transaction_has_ledger_charge"
	TransactionNotStuck       = "open_transaction_within_deadline"
	BatchJobNotStuck          = "batch_job_within_lease"
)

// Request is what the audit needs of a payment request.
type Request struct {
	ID            int64
	Status        payment.RequestStatus
	TransactionID int64 // the transaction its last commit names; 0 when none
	UpdatedAt     time.Time
}

// Transaction is what the audit needs of a transaction.
type Transaction struct {
	ID               int64
	PaymentRequestID int64
	Status           payment.TransactionStatus
	// Reference is the charge reference sent to the provider ("ptx_<id>").
	Reference string
	// RecoverAfter is the open transaction's recovery deadline (zero when
	// it has none).
	RecoverAfter     time.Time
	RefundProcessing bool
	// OutboxEventID is the event id of the outbox entry the transaction
	// carries ("" when none: not final yet, or taken by the notifier).
	OutboxEventID string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Open reports whether the transaction still waits for an actor: waiting or
// pending, or a refund in processing.
func (t Transaction) Open() bool { return !t.Status.Final() || t.RefundProcessing }

func (t Transaction) reference() string {
	if t.Reference != "" {
		return t.Reference
	}
	return payment.ChargeReference(t.ID)
}

// LedgerEntry is one entry of the sandbox acquirer's ledger.
type LedgerEntry struct {
	Reference string
	Charge    bool // a charge (not a refund)
	Approved  bool // money moved
	Voided    bool
	Abandoned bool // a tombstone: never charged
	UpdatedAt time.Time
}

// Taken reports whether the entry is money taken from a payer.
func (e LedgerEntry) Taken() bool { return e.Charge && e.Approved && !e.Voided && !e.Abandoned }

// Delivery is one recorded notification attempt (payment.DeliveryAttempt).
type Delivery struct {
	RequestID int64
	EventID   string
}

// BatchJob is what the audit needs of a batch file's job.
type BatchJob struct {
	MerchantID string
	JobID      string
	State      string
	Finished   bool
	LeaseUntil time.Time // zero when no invocation holds it
	UpdatedAt  time.Time
}

// Data is the snapshot the audit judges.
type Data struct {
	Requests     []Request
	Transactions []Transaction
	Ledger       []LedgerEntry
	Deliveries   []Delivery
	BatchJobs    []BatchJob
	// SandboxAcquirer: the payments were charged by the sandbox acquirer,
	// whose ledger is the money moved (the sandbox stage). On a production
	// stage the acquirer is Stripe and no ledger is kept here: the ledger
	// invariants do not apply (they would call every approved payment
	// broken).
	SandboxAcquirer bool
	// Retention of the ledger and of delivery records: older transactions
	// are not judged on the records that may have expired (zero: kept).
	LedgerRetention   time.Duration
	DeliveryRetention time.Duration
	// RecordRetention is how long requests and transactions are kept (TTL):
	// within RetentionMargin of it a record is no longer judged on a partner
	// that may have expired first (zero: kept for ever).
	RecordRetention time.Duration
}

// RetentionMargin is how long before the end of RecordRetention the audit
// stops judging a request or transaction on the records it names: a
// payment's records expire one by one, days apart (TTL deletes lazily).
const RetentionMargin = 30 * 24 * time.Hour

// Counts are how many records were checked.
type Counts struct {
	Requests      int `json:"requests"`
	Transactions  int `json:"transactions"`
	LedgerEntries int `json:"ledgerEntries"`
	Deliveries    int `json:"deliveries"`
	BatchJobs     int `json:"batchJobs"`
}

// Violation is one broken invariant.
type Violation struct {
	Invariant        string `json:"invariant"`
	PaymentRequestID int64  `json:"paymentRequestId,omitempty"`
	TransactionID    int64  `json:"transactionId,omitempty"`
	Reference        string `json:"reference,omitempty"`
	BatchJob         string `json:"batchJob,omitempty"`
	Detail           string `json:"detail"`
}

// Report is the audit's result.
type Report struct {
	CheckedAt    time.Time   `json:"checkedAt"`
	GraceSeconds int64       `json:"graceSeconds"`
	Checked      Counts      `json:"checked"`
	Violations   []Violation `json:"violations"`
}

// OK reports whether no invariant is broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Check judges d at now.
func Check(d Data, now time.Time, grace time.Duration) Report {
	return check(d, now, grace, allRules, 0)
}

// rule selects the invariants a check judges: all of them over a
// snapshot, those of one subject over its records (CheckSubject).
type rule uint

const (
	ruleOneApproved rule = 1 << iota
	rulePaidRequest
	ruleApprovedTx
	ruleNotified
	ruleChargeHasTx
	ruleTxHasCharge
	ruleTxStuck
	ruleJobStuck
	allRules = ruleOneApproved | rulePaidRequest | ruleApprovedTx | ruleNotified | ruleChargeHasTx |
		ruleTxHasCharge | ruleTxStuck | ruleJobStuck
)

func check(d Data, now time.Time, grace time.Duration, rules rule, request int64) Report {
	c := checker{d: d, now: now, grace: grace, rules: rules, request: request}
	c.index()
	c.oneApprovedPerRequest()
	c.paidRequests()
	c.approvedTransactions()
	c.notifications()
	c.ledger()
	c.stuck()
	v := c.out
	if v == nil {
		v = []Violation{}
	}
	sortViolations(v)
	return Report{
		CheckedAt: now.UTC(), GraceSeconds: int64(grace / time.Second), Violations: v,
		Checked: Counts{Requests: len(d.Requests), Transactions: len(d.Transactions), LedgerEntries: len(d.Ledger),
			Deliveries: len(d.Deliveries), BatchJobs: len(d.BatchJobs)},
	}
}

// sortViolations orders a report's violations by invariant, then record.
func sortViolations(v []Violation) {
	slices.SortStableFunc(v, func(a, b Violation) int {
		if c := strings.Compare(a.Invariant, b.Invariant); c != 0 {
			return c
		}
		if a.PaymentRequestID != b.PaymentRequestID {
			return cmpInt(a.PaymentRequestID, b.PaymentRequestID)
		}
		if a.TransactionID != b.TransactionID {
			return cmpInt(a.TransactionID, b.TransactionID)
		}
		return strings.Compare(a.Reference+a.BatchJob, b.Reference+b.BatchJob)
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type checker struct {
	d     Data
	now   time.Time
	grace time.Duration
	rules rule
	// request, when set, is the one request a subject check judges: a
	// transaction of another request (one the request names) is read for
	// the paid-request rule only.
	request int64
	out     []Violation

	requests  map[int64]Request
	txs       map[int64]Transaction
	txByRef   map[string]Transaction
	charges   map[string]LedgerEntry // money taken, by reference
	delivered map[string]bool        // "<requestId>/<eventId>"
}

func (c *checker) add(v Violation) { c.out = append(c.out, v) }

func (c *checker) judges(r rule) bool { return c.rules&r != 0 }

// judged are the transactions the rules judge.
func (c *checker) judged() []Transaction {
	if c.request == 0 {
		return c.d.Transactions
	}
	var out []Transaction
	for _, t := range c.d.Transactions {
		if t.PaymentRequestID == c.request {
			out = append(out, t)
		}
	}
	return out
}

// expiring reports whether a record last written at t may outlive a record
// it names by less than RetentionMargin (see Data.RecordRetention).
func (c *checker) expiring(t time.Time) bool {
	return c.d.RecordRetention > 0 && t.Before(c.now.Add(-(c.d.RecordRetention - RetentionMargin)))
}

// recent reports whether t is within the grace period before now: a record
// changed that recently may be mid-way through a payment.
func (c *checker) recent(t time.Time) bool { return t.After(c.now.Add(-c.grace)) }

func (c *checker) index() {
	c.requests = make(map[int64]Request, len(c.d.Requests))
	for _, r := range c.d.Requests {
		c.requests[r.ID] = r
	}
	c.txs = make(map[int64]Transaction, len(c.d.Transactions))
	c.txByRef = make(map[string]Transaction, len(c.d.Transactions))
	for _, t := range c.d.Transactions {
		c.txs[t.ID] = t
		c.txByRef[t.reference()] = t
	}
	c.charges = map[string]LedgerEntry{}
	for _, e := range c.d.Ledger {
		if e.Taken() {
			c.charges[e.Reference] = e
		}
	}
	c.delivered = make(map[string]bool, len(c.d.Deliveries))
	for _, dl := range c.d.Deliveries {
		c.delivered[fmt.Sprintf("%d/%s", dl.RequestID, dl.EventID)] = true
	}
}

// At most one approved transaction per payment request: a second one is a
// double charge of the payer.
func (c *checker) oneApprovedPerRequest() {
	if !c.judges(ruleOneApproved) {
		return
	}
	approved := map[int64][]int64{}
	for _, t := range c.judged() {
		if t.Status == payment.TxApproved {
			approved[t.PaymentRequestID] = append(approved[t.PaymentRequestID], t.ID)
		}
	}
	for req, ids := range approved {
		if len(ids) < 2 {
			continue
		}
		slices.Sort(ids)
		c.add(Violation{Invariant: OneApprovedPerRequest, PaymentRequestID: req, TransactionID: ids[1],
			Detail: fmt.Sprintf("%d approved transactions: %v", len(ids), ids)})
	}
}

// Every paid request names an approved transaction of its own. The request
// is committed before its transaction settles, so an open transaction is
// the normal in-between state (judged by the stuck rule instead).
func (c *checker) paidRequests() {
	if !c.judges(rulePaidRequest) {
		return
	}
	for _, r := range c.d.Requests {
		if r.Status != payment.RequestPaid || c.expiring(r.UpdatedAt) {
			continue
		}
		v := Violation{Invariant: PaidRequestHasApprovedTx, PaymentRequestID: r.ID, TransactionID: r.TransactionID}
		t, ok := c.txs[r.TransactionID]
		switch {
		case r.TransactionID == 0:
			v.Detail = "paid request names no transaction"
		case !ok:
			if c.recent(r.UpdatedAt) {
				continue // its transaction may have been written after the transactions scan
			}
			v.Detail = "paid request names a transaction that does not exist"
		case t.PaymentRequestID != r.ID:
			v.Detail = fmt.Sprintf("paid request names a transaction of request %d", t.PaymentRequestID)
		case !t.Status.Final() || t.Status == payment.TxApproved:
			continue
		default:
			v.Detail = fmt.Sprintf("paid request names a transaction with status %d", t.Status)
		}
		c.add(v)
	}
}

// Every approved transaction has its request paid, naming it.
func (c *checker) approvedTransactions() {
	if !c.judges(ruleApprovedTx) {
		return
	}
	for _, t := range c.judged() {
		if t.Status != payment.TxApproved || c.expiring(t.CreatedAt) {
			continue
		}
		v := Violation{Invariant: ApprovedTxHasPaidRequest, PaymentRequestID: t.PaymentRequestID, TransactionID: t.ID}
		r, ok := c.requests[t.PaymentRequestID]
		switch {
		case !ok:
			v.Detail = "approved transaction of a payment request that does not exist"
		case r.Status != payment.RequestPaid:
			v.Detail = fmt.Sprintf("approved transaction but the request has status %d", r.Status)
		case r.TransactionID != t.ID:
			v.Detail = fmt.Sprintf("approved transaction but the paid request names transaction %d", r.TransactionID)
		default:
			continue
		}
		c.add(v)
	}
}

// Every final transaction has a notification record. The settling write
// puts the event in the transaction's outbox; the notifier removes it when
// the event first reaches it and then records a delivery attempt under the
// request (pk "dlv#<requestId>") with the same event id, whatever the
// outcome (delivered, retry, dead-lettered, or skipped without a notify
// URL). So the record is the outbox entry or an attempt of the
// transaction's event; between the two the event is in flight for less
// than one notifier run (Grace). Attempts expire after DeliveryRetention.
func (c *checker) notifications() {
	if !c.judges(ruleNotified) {
		return
	}
	for _, t := range c.judged() {
		if !t.Status.Final() || t.OutboxEventID != "" || c.recent(t.UpdatedAt) {
			continue
		}
		if c.d.DeliveryRetention > 0 && t.UpdatedAt.Before(c.now.Add(-c.d.DeliveryRetention)) {
			continue
		}
		ev := EventID(t)
		if c.delivered[fmt.Sprintf("%d/%s", t.PaymentRequestID, ev)] {
			continue
		}
		c.add(Violation{Invariant: FinalTxNotified, PaymentRequestID: t.PaymentRequestID, TransactionID: t.ID,
			Detail: fmt.Sprintf("final transaction (status %d) has no outbox entry and no delivery attempt of event %s", t.Status, ev)})
	}
}

// EventID is the notification event id of a final transaction, as the
// payment path builds it.
func EventID(t Transaction) string {
	ev, err := payment.NewNotifyEvent(&payment.Request{ID: t.PaymentRequestID}, t.ID, t.Status, payment.LastLog{}, time.Time{})
	if err != nil {
		return ""
	}
	return ev.EventID
}

// The sandbox ledger's money taken (approved charges not voided) equals the
// approved transactions, matched by charge reference: no charge without its
// approved transaction (a double charge, or one that could not pay and was
// not voided) and no approved transaction without its charge.
func (c *checker) ledger() {
	if !c.d.SandboxAcquirer {
		return
	}
	for ref, e := range c.charges {
		if !c.judges(ruleChargeHasTx) {
			break
		}
		t, ok := c.txByRef[ref]
		v := Violation{Invariant: LedgerChargeHasApprovedTx, Reference: ref}
		switch {
		case !ok:
			if c.recent(e.UpdatedAt) {
				continue // its transaction may have been written after the transactions scan
			}
			v.Detail = "approved charge with no transaction"
		case t.Status == payment.TxApproved || !t.Status.Final():
			continue // an open transaction is judged by the stuck rule
		default:
			v.PaymentRequestID, v.TransactionID = t.PaymentRequestID, t.ID
			v.Detail = fmt.Sprintf("approved charge, not voided, but its transaction has status %d", t.Status)
		}
		c.add(v)
	}
	for _, t := range c.judged() {
		if t.Status != payment.TxApproved || !c.judges(ruleTxHasCharge) {
			continue
		}
		if c.d.LedgerRetention > 0 && t.CreatedAt.Before(c.now.Add(-c.d.LedgerRetention)) {
			continue
		}
		if _, ok := c.charges[t.reference()]; ok {
			continue
		}
		c.add(Violation{Invariant: ApprovedTxHasLedgerCharge, PaymentRequestID: t.PaymentRequestID, TransactionID: t.ID,
			Reference: t.reference(), Detail: "approved transaction has no approved, unvoided ledger charge"})
	}
}

// Nothing stays open past its deadline by more than Grace: an open
// transaction past RecoverAfter (the reconciler drives it to a final state)
// and an unfinished batch job past its lease (or, with no lease held, its
// last change: the next continuation takes it).
func (c *checker) stuck() {
	limit := c.now.Add(-c.grace)
	for _, t := range c.judged() {
		if !t.Open() || !c.judges(ruleTxStuck) {
			continue
		}
		v := Violation{Invariant: TransactionNotStuck, PaymentRequestID: t.PaymentRequestID, TransactionID: t.ID}
		switch {
		case t.RecoverAfter.IsZero():
			if !t.CreatedAt.Before(limit) {
				continue
			}
			v.Detail = fmt.Sprintf("open transaction (status %d) has no recovery deadline", t.Status)
		case t.RecoverAfter.Before(limit):
			v.Detail = fmt.Sprintf("open transaction (status %d, refund processing %t) past its recovery deadline %s",
				t.Status, t.RefundProcessing, t.RecoverAfter.UTC().Format(time.RFC3339))
		default:
			continue
		}
		c.add(v)
	}
	for _, j := range c.d.BatchJobs {
		if j.Finished || !c.judges(ruleJobStuck) {
			continue
		}
		deadline := j.UpdatedAt
		if j.LeaseUntil.After(deadline) {
			deadline = j.LeaseUntil
		}
		if !deadline.Before(limit) {
			continue
		}
		c.add(Violation{Invariant: BatchJobNotStuck, BatchJob: j.MerchantID + "/" + j.JobID,
			Detail: fmt.Sprintf("batch job in state %q untouched since %s", j.State, deadline.UTC().Format(time.RFC3339))})
	}
}
