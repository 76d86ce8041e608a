package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

// The incremental audit judges one subject at a time instead of a snapshot
// of every table: a payment request with its transactions, their ledger
// charges and its delivery records; one sandbox ledger charge with its
// transaction; or one batch job. Each is read with a bounded number of
// point reads (internal/dynamo's SubjectData), in the payment path's write
// order backwards, so the rules of Check hold over it as over a snapshot.
// A stored change names the subjects to judge (Change.Dues) and when: after
// Grace, so that a payment in flight is never judged mid-way.

// SubjectKind is what a subject is.
type SubjectKind string

const (
	// SubjectRequest: a payment request, its transactions, their ledger
	// entries and its delivery records: every rule but the batch job's.
	SubjectRequest SubjectKind = "req"
	// SubjectCharge: one sandbox ledger entry and the transaction its
	// reference names: money taken without an approved transaction.
	SubjectCharge SubjectKind = "chg"
	// SubjectBatchJob: one batch file's job.
	SubjectBatchJob SubjectKind = "job"
)

// Subject is what one incremental check judges.
type Subject struct {
	Kind       SubjectKind
	RequestID  int64  // SubjectRequest
	Reference  string // SubjectCharge: the ledger reference ("ptx_<id>")
	MerchantID string // SubjectBatchJob
	JobID      string // SubjectBatchJob
}

// RequestSubject, ChargeSubject and JobSubject name the subjects.
func RequestSubject(id int64) Subject { return Subject{Kind: SubjectRequest, RequestID: id} }
func ChargeSubject(reference string) Subject {
	return Subject{Kind: SubjectCharge, Reference: reference}
}
func JobSubject(merchantID, jobID string) Subject {
	return Subject{Kind: SubjectBatchJob, MerchantID: merchantID, JobID: jobID}
}

// Key is the subject's stable name: "req#<id>", "chg#<reference>",
// "job#<merchantId>#<jobId>".
func (s Subject) Key() string {
	switch s.Kind {
	case SubjectRequest:
		return "req#" + strconv.FormatInt(s.RequestID, 10)
	case SubjectCharge:
		return "chg#" + s.Reference
	case SubjectBatchJob:
		return "job#" + s.MerchantID + "#" + s.JobID
	}
	return string(s.Kind) + "#?"
}

// ParseSubject reads a Key back.
func ParseSubject(key string) (Subject, error) {
	kind, rest, ok := strings.Cut(key, "#")
	if ok && rest != "" {
		switch SubjectKind(kind) {
		case SubjectRequest:
			if id, err := strconv.ParseInt(rest, 10, 64); err == nil && id > 0 {
				return RequestSubject(id), nil
			}
		case SubjectCharge:
			return ChargeSubject(rest), nil
		case SubjectBatchJob:
			// Merchant ids hold no '#'; job ids do ("file#<name>#<seq>").
			if m, j, ok := strings.Cut(rest, "#"); ok && m != "" && j != "" {
				return JobSubject(m, j), nil
			}
		}
	}
	return Subject{}, fmt.Errorf("audit: %q is not a subject key", key)
}

// rules are the invariants that concern the subject.
func (s Subject) rules() rule {
	switch s.Kind {
	case SubjectRequest:
		return allRules &^ ruleJobStuck
	case SubjectCharge:
		return ruleChargeHasTx | ruleTxHasCharge
	case SubjectBatchJob:
		return ruleJobStuck
	}
	return 0
}

// CheckSubject judges the records of one subject (as SubjectData reads
// them) with the rules that concern it: the same rules, and the same grace,
// as Check over a snapshot of every table.
func CheckSubject(s Subject, d Data, now time.Time, grace time.Duration) Report {
	return check(d, now, grace, s.rules(), s.RequestID)
}

// NextCheck is when the subject must be judged again: the earliest moment
// after now at which a record that the rules skip as in flight (written
// within grace, open before its recovery deadline, a batch job within its
// lease) becomes judgeable. false: nothing is waiting.
func NextCheck(d Data, now time.Time, grace time.Duration) (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if t = t.Add(grace); t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, r := range d.Requests {
		consider(r.UpdatedAt)
	}
	for _, t := range d.Transactions {
		consider(t.UpdatedAt)
		if t.Open() {
			if t.RecoverAfter.IsZero() {
				consider(t.CreatedAt)
			} else {
				consider(t.RecoverAfter)
			}
		}
	}
	for _, e := range d.Ledger {
		consider(e.UpdatedAt)
	}
	for _, j := range d.BatchJobs {
		if !j.Finished {
			consider(j.UpdatedAt)
			consider(j.LeaseUntil)
		}
	}
	return next, !next.IsZero()
}

// Key names a violation for its record (one per broken invariant of one
// record): the same finding from two subjects, or from a retried check, is
// one violation.
func (v Violation) Key() string {
	return v.Invariant + "#" + strconv.FormatInt(v.PaymentRequestID, 10) + "#" + strconv.FormatInt(v.TransactionID, 10) +
		"#" + v.Reference + "#" + v.BatchJob
}

// Due is a subject to judge at (or after) At.
type Due struct {
	Subject Subject
	At      time.Time
}

// DueResolution rounds due times up, so that the changes of one payment
// within a few seconds (lease, commit, settle) ask for one check.
const DueResolution = 10 * time.Second

// dueAt is when a record written at t (the later of its own clock and the
// stream's) may be judged: after grace, rounded up to DueResolution.
func dueAt(t time.Time, grace time.Duration) time.Time {
	at := t.Add(grace)
	if r := at.Truncate(DueResolution); !r.Equal(at) {
		at = r.Add(DueResolution)
	}
	return at.UTC()
}

// Change is one stored record as the table's stream reports it: its image
// before (nil for an insert) and after (nil for a removal) the write, of
// one of the audited kinds.
type Change struct {
	// At is when the stream recorded the write (its approximate creation
	// time: to the second or minute, so the later of it and the record's
	// own UpdatedAt counts).
	At                     time.Time
	OldTx, NewTx           *Transaction
	OldRequest, NewRequest *Request
	OldCharge, NewCharge   *LedgerEntry
	OldJob, NewJob         *BatchJob
}

// Dues are the checks a change asks for: the subjects whose invariants the
// write may have broken (or mended), after grace. A removal asks for none:
// records leave by TTL, and the audit does not judge what may have
// expired. A write that changes nothing the invariants read (a dashboard
// aggregation mark, a lease) asks for none either.
func (c Change) Dues(grace time.Duration) []Due {
	at := func(updated time.Time) time.Time {
		if updated.Before(c.At) {
			updated = c.At
		}
		return dueAt(updated, grace)
	}
	var out []Due
	switch {
	case c.NewTx != nil:
		if c.OldTx == nil || txAudited(*c.OldTx) != txAudited(*c.NewTx) {
			out = append(out, Due{RequestSubject(c.NewTx.PaymentRequestID), at(c.NewTx.UpdatedAt)})
		}
	case c.NewRequest != nil:
		n := c.NewRequest
		if c.OldRequest == nil && n.Status != payment.RequestPaid && n.TransactionID == 0 {
			break // a new request with no attempt: nothing to judge yet
		}
		if o := c.OldRequest; o == nil || o.Status != n.Status || o.TransactionID != n.TransactionID {
			out = append(out, Due{RequestSubject(n.ID), at(n.UpdatedAt)})
		}
	case c.NewCharge != nil:
		n := c.NewCharge
		if !n.Charge {
			break // a refund's entry: the ledger invariants are about charges
		}
		if o := c.OldCharge; (o == nil && n.Taken()) || (o != nil && o.Taken() != n.Taken()) {
			out = append(out, Due{ChargeSubject(n.Reference), at(n.UpdatedAt)})
		}
	case c.NewJob != nil:
		n := c.NewJob
		if o := c.OldJob; o == nil || o.Finished != n.Finished || !o.LeaseUntil.Equal(n.LeaseUntil) {
			out = append(out, Due{JobSubject(n.MerchantID, n.JobID), at(n.UpdatedAt)})
		}
	}
	return out
}

// txAudited is what the invariants read of a transaction.
type txFacts struct {
	request      int64
	status       payment.TransactionStatus
	refund       bool
	recoverAfter int64
	outbox       string
}

func txAudited(t Transaction) txFacts {
	return txFacts{t.PaymentRequestID, t.Status, t.RefundProcessing, t.RecoverAfter.UnixMilli(), t.OutboxEventID}
}
