package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The ports of the incremental audit, implemented by internal/dynamo over
// the operations table. Every write is safe to repeat: a stream batch is
// retried, a scheduled run may overlap the next, an answer may be lost.

// Reader reads one subject's records.
type Reader interface {
	// SubjectData reads s's records with consistent point reads in the
	// payment path's write order backwards (transactions, request, ledger,
	// deliveries), the sandbox ledger only when withLedger.
	SubjectData(ctx context.Context, s Subject, withLedger bool) (Data, error)
}

// RecordedViolation is a violation as the audit keeps it until a later
// check of its subject finds the invariant holding again.
type RecordedViolation struct {
	Violation
	Subject string    `json:"subject"`
	FoundAt time.Time `json:"foundAt"`
}

// Findings keeps the violations found.
type Findings interface {
	// RecordViolation keeps v unless its Key is kept already: true when
	// this call recorded it (conditional: of two checks finding the same
	// violation, one reports it).
	RecordViolation(ctx context.Context, v RecordedViolation) (bool, error)
	// ClearViolation forgets a violation (gone already: no error).
	ClearViolation(ctx context.Context, key string) error
	// OpenViolations lists the kept violations (a few at most: each one is
	// an alarm).
	OpenViolations(ctx context.Context) ([]RecordedViolation, error)
}

// Checks is the queue of subjects to judge once they are due.
type Checks interface {
	// ScheduleChecks queues dues (a repeat of the same subject and time
	// is one entry).
	ScheduleChecks(ctx context.Context, dues []Due) error
	// DueChecks returns up to limit entries due at now, oldest first.
	DueChecks(ctx context.Context, now time.Time, limit int) ([]Due, error)
	// DoneChecks removes entries DueChecks returned.
	DoneChecks(ctx context.Context, dues []Due) error
	// OldestDue is the due time of the oldest entry due at now (false:
	// none is due).
	OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error)
}

// Heartbeat measures the stream consumer's lag end to end: the scheduled
// run writes a heartbeat record each minute into an audited table, and the
// consumer marks each one it reads. A stream that stopped (a disabled or
// failing event source mapping) shows as a heartbeat that nobody saw.
type Heartbeat interface {
	// Beat returns how long the oldest heartbeat the consumer has not seen
	// has been waiting (0: it saw the last one), then sends one at now.
	Beat(ctx context.Context, now time.Time) (time.Duration, error)
	// Seen records that the consumer read the heartbeat sent at sentAt.
	Seen(ctx context.Context, sentAt time.Time) error
}

// Judge judges subjects: their records read, the rules checked.
type Judge struct {
	Reader Reader
	Grace  time.Duration
	// Sandbox: the sandbox acquirer charges, so its ledger is read and
	// judged (see Data.SandboxAcquirer).
	Sandbox bool
	// Retention of the records the subjects read (see Data).
	LedgerRetention, DeliveryRetention, RecordRetention time.Duration
}

// Verdict is one subject judged.
type Verdict struct {
	Subject    Subject
	Violations []Violation
	// Next is when the subject must be judged again (NextCheck), zero when
	// nothing in it is in flight.
	Next    time.Time
	Checked Counts
}

// Judge reads s's records and checks them at now.
func (j *Judge) Judge(ctx context.Context, s Subject, now time.Time) (Verdict, error) {
	d, err := j.Reader.SubjectData(ctx, s, j.Sandbox)
	if err != nil {
		return Verdict{}, fmt.Errorf("audit: read %s: %w", s.Key(), err)
	}
	d.SandboxAcquirer = j.Sandbox
	d.LedgerRetention, d.DeliveryRetention, d.RecordRetention = j.LedgerRetention, j.DeliveryRetention, j.RecordRetention
	r := CheckSubject(s, d, now, j.Grace)
	v := Verdict{Subject: s, Violations: r.Violations, Checked: r.Checked}
	v.Next, _ = NextCheck(d, now, j.Grace)
	return v, nil
}

// Settler records what verdicts found: a new violation once (logged at
// error level, "audit violation"), a kept violation of the subject that no
// longer holds cleared ("audit violation resolved"), the subject's next
// check queued.
type Settler struct {
	Findings Findings
	Checks   Checks
	Log      *slog.Logger

	mu   sync.Mutex
	open map[string][]RecordedViolation // by subject key
	// New counts the violations this settler recorded.
	New int
}

// Load reads the kept violations, so that a clean verdict can clear its
// subject's (call it once per run, before Settle).
func (s *Settler) Load(ctx context.Context) ([]RecordedViolation, error) {
	open, err := s.Findings.OpenViolations(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.open = map[string][]RecordedViolation{}
	for _, v := range open {
		s.open[v.Subject] = append(s.open[v.Subject], v)
	}
	s.mu.Unlock()
	return open, nil
}

// Settle records v at now.
func (s *Settler) Settle(ctx context.Context, v Verdict, now time.Time) error {
	key := v.Subject.Key()
	found := map[string]bool{}
	for _, viol := range v.Violations {
		found[viol.Key()] = true
		isNew, err := s.Findings.RecordViolation(ctx, RecordedViolation{Violation: viol, Subject: key, FoundAt: now.UTC()})
		if err != nil {
			return err
		}
		if isNew {
			s.mu.Lock()
			s.New++
			s.open[key] = append(s.open[key], RecordedViolation{Violation: viol, Subject: key, FoundAt: now.UTC()})
			s.mu.Unlock()
			s.Log.Error("audit violation", "invariant", viol.Invariant, "subject", key, "paymentRequestId", viol.PaymentRequestID,
				"transactionId", viol.TransactionID, "reference", viol.Reference, "batchJob", viol.BatchJob, "detail", viol.Detail)
		}
	}
	s.mu.Lock()
	kept := s.open[key]
	s.mu.Unlock()
	var still []RecordedViolation
	for _, k := range kept {
		if found[k.Key()] {
			still = append(still, k)
			continue
		}
		if err := s.Findings.ClearViolation(ctx, k.Key()); err != nil {
			return err
		}
		s.Log.Warn("audit violation resolved", "invariant", k.Invariant, "subject", key, "foundAt", k.FoundAt)
	}
	s.mu.Lock()
	if len(kept) > 0 {
		s.open[key] = still
	}
	s.mu.Unlock()
	if !v.Next.IsZero() {
		return s.Checks.ScheduleChecks(ctx, []Due{{Subject: v.Subject, At: v.Next}})
	}
	return nil
}

// OpenCount is how many violations are kept now.
func (s *Settler) OpenCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, vs := range s.open {
		n += len(vs)
	}
	return n
}

// Consumer turns a stream batch into due checks: the write path of the
// incremental audit. It judges nothing itself (every change is in flight
// when the stream delivers it); the scheduled run judges once due.
type Consumer struct {
	Checks    Checks
	Heartbeat Heartbeat
	Grace     time.Duration
}

// Consume queues the checks changes ask for (one per subject and due time)
// and marks the heartbeats seen. An error leaves the batch to be retried:
// every write it made is safe to make again.
func (c *Consumer) Consume(ctx context.Context, changes []Change, heartbeats []time.Time) error {
	seen := map[string]bool{}
	var dues []Due
	for _, ch := range changes {
		for _, d := range ch.Dues(c.Grace) {
			k := d.Subject.Key() + "@" + d.At.String()
			if !seen[k] {
				seen[k] = true
				dues = append(dues, d)
			}
		}
	}
	if len(dues) > 0 {
		if err := c.Checks.ScheduleChecks(ctx, dues); err != nil {
			return err
		}
	}
	var latest time.Time
	for _, h := range heartbeats {
		if h.After(latest) {
			latest = h
		}
	}
	if !latest.IsZero() {
		return c.Heartbeat.Seen(ctx, latest)
	}
	return nil
}

// judgeAll judges subjects, up to n at once, and hands each verdict to
// done (called concurrently).
func judgeAll(ctx context.Context, j *Judge, subjects []Subject, now time.Time, n int, done func(Verdict) error) error {
	if n < 1 {
		n = 1
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, n)
	)
	for _, s := range subjects {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			v, err := j.Judge(ctx, s, now)
			if err == nil {
				err = done(v)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Counts) add(o Counts) {
	c.Requests += o.Requests
	c.Transactions += o.Transactions
	c.LedgerEntries += o.LedgerEntries
	c.Deliveries += o.Deliveries
	c.BatchJobs += o.BatchJobs
}
