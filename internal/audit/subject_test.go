package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

// tables is a snapshot served the way internal/dynamo serves the tables:
// one subject's records at a time, and the tables in segments and pages.
type tables struct {
	d        Data
	mu       sync.Mutex
	reads    int
	pass     Pass
	advances int
}

func (f *tables) SubjectData(_ context.Context, s Subject, withLedger bool) (Data, error) {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	var d Data
	switch s.Kind {
	case SubjectRequest:
		for _, t := range f.d.Transactions {
			if t.PaymentRequestID == s.RequestID {
				d.Transactions = append(d.Transactions, t)
			}
		}
		for _, r := range f.d.Requests {
			if r.ID == s.RequestID {
				d.Requests = append(d.Requests, r)
				if r.TransactionID != 0 && !hasID(d.Transactions, r.TransactionID) {
					for _, t := range f.d.Transactions {
						if t.ID == r.TransactionID {
							d.Transactions = append(d.Transactions, t)
						}
					}
				}
			}
		}
		if withLedger {
			for _, t := range d.Transactions {
				for _, e := range f.d.Ledger {
					if e.Reference == t.reference() {
						d.Ledger = append(d.Ledger, e)
					}
				}
			}
		}
		for _, dl := range f.d.Deliveries {
			if dl.RequestID == s.RequestID {
				d.Deliveries = append(d.Deliveries, dl)
			}
		}
	case SubjectCharge:
		for _, t := range f.d.Transactions {
			if t.reference() == s.Reference {
				d.Transactions = append(d.Transactions, t)
			}
		}
		for _, e := range f.d.Ledger {
			if e.Reference == s.Reference {
				d.Ledger = append(d.Ledger, e)
			}
		}
	case SubjectBatchJob:
		for _, j := range f.d.BatchJobs {
			if j.MerchantID == s.MerchantID && j.JobID == s.JobID {
				d.BatchJobs = append(d.BatchJobs, j)
			}
		}
	}
	return d, nil
}

func hasID(txs []Transaction, id int64) bool {
	return slices.ContainsFunc(txs, func(t Transaction) bool { return t.ID == id })
}

// item is a stored item as a scan sees it: the subjects it names, when it
// was last written, and whether it is an open transaction.
type item struct {
	subjects []Subject
	at       time.Time
	open     bool
}

// items of a table in a stable order.
func (f *tables) items(table string) []item {
	var out []item
	switch table {
	case TableTransactions:
		for _, t := range f.d.Transactions {
			out = append(out, item{[]Subject{RequestSubject(t.PaymentRequestID)}, t.UpdatedAt, t.Open()})
		}
	case TableRequests:
		for _, r := range f.d.Requests {
			var s []Subject
			if r.Status == payment.RequestPaid {
				own := false
				for _, t := range f.d.Transactions {
					own = own || (t.ID == r.TransactionID && t.PaymentRequestID == r.ID)
				}
				if !own {
					s = append(s, RequestSubject(r.ID))
				}
			}
			out = append(out, item{s, r.UpdatedAt, false})
		}
	case TableLedger:
		for _, e := range f.d.Ledger {
			var s []Subject
			if e.Taken() {
				s = append(s, ChargeSubject(e.Reference))
			}
			out = append(out, item{s, e.UpdatedAt, false})
		}
	}
	return out
}

func (f *tables) ScanPage(_ context.Context, c Cursor, segments, limit int, since time.Time) (Page, error) {
	var mine []item
	for i, it := range f.items(c.Table) {
		if i%segments == c.Segment {
			mine = append(mine, it)
		}
	}
	from := 0
	if c.Key != "" {
		from, _ = strconv.Atoi(c.Key)
	}
	to := min(len(mine), from+limit)
	p := Page{Scanned: to - from, Done: to == len(mine)}
	if !p.Done {
		p.Next = strconv.Itoa(to)
	}
	for _, it := range mine[from:to] {
		if since.IsZero() || !it.at.Before(since) || it.open {
			p.Subjects = append(p.Subjects, it.subjects...)
		}
	}
	return p, nil
}

func (f *tables) UnfinishedBatchJobs(context.Context) ([]Subject, error) {
	var out []Subject
	for _, j := range f.d.BatchJobs {
		if !j.Finished {
			out = append(out, JobSubject(j.MerchantID, j.JobID))
		}
	}
	return out, nil
}

func (f *tables) EstimateItems(_ context.Context, ts []string) (int64, error) {
	n := 0
	for _, t := range ts {
		n += len(f.items(t))
	}
	return int64(n), nil
}

func (f *tables) LoadPass(context.Context) (Pass, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pass
	p.Cursors = slices.Clone(p.Cursors)
	return p, nil
}

func (f *tables) SavePass(_ context.Context, prev, next Pass) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pass.ID != prev.ID || f.pass.Running != prev.Running {
		return ErrPassMoved
	}
	f.pass = next
	f.pass.Cursors = slices.Clone(next.Cursors)
	return nil
}

func (f *tables) AdvanceCursor(_ context.Context, id int64, i int, old, next Cursor) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pass.ID != id || !f.pass.Running || f.pass.Cursors[i] != old {
		return ErrPassMoved
	}
	f.pass.Cursors[i] = next
	f.advances++
	return nil
}

func judgeOf(f *tables) *Judge {
	return &Judge{Reader: f, Grace: grace, Sandbox: true, LedgerRetention: 90 * 24 * time.Hour, DeliveryRetention: 30 * 24 * time.Hour}
}

// randomSnapshot is a snapshot with n payments, some of them broken in
// each way the invariants know.
func randomSnapshot(rng *rand.Rand, n int) Data {
	d := Data{SandboxAcquirer: true, LedgerRetention: 90 * 24 * time.Hour, DeliveryRetention: 30 * 24 * time.Hour}
	when := func() time.Time {
		if rng.IntN(10) == 0 {
			return now.Add(-time.Duration(rng.IntN(240)) * time.Second) // within the grace
		}
		return old
	}
	tx := int64(1000)
	for i := 1; i <= n; i++ {
		id := int64(i)
		r := Request{ID: id, Status: payment.RequestUnpaid, UpdatedAt: when()}
		attempts := rng.IntN(3)
		for a := 0; a < attempts; a++ {
			tx++
			t := Transaction{ID: tx, PaymentRequestID: id, Reference: payment.ChargeReference(tx), CreatedAt: old, UpdatedAt: when()}
			switch rng.IntN(4) {
			case 0:
				t.Status = payment.TxDeclined
			case 1:
				t.Status = payment.TxPending
				t.RecoverAfter = now.Add(time.Duration(rng.IntN(20)-10) * time.Minute)
			default:
				if r.Status == payment.RequestPaid && rng.IntN(10) > 0 {
					t.Status = payment.TxDeclined // mostly one approval per request
					break
				}
				t.Status = payment.TxApproved
				r.Status, r.TransactionID = payment.RequestPaid, tx
			}
			if t.Status.Final() && rng.IntN(3) > 0 {
				d.Deliveries = append(d.Deliveries, Delivery{RequestID: id, EventID: EventID(t)})
			} else if t.Status.Final() && rng.IntN(2) == 0 {
				t.OutboxEventID = EventID(t)
			}
			e := LedgerEntry{Reference: t.Reference, Charge: true, Approved: t.Status == payment.TxApproved || rng.IntN(20) == 0,
				Voided: rng.IntN(25) == 0, UpdatedAt: when()}
			d.Ledger = append(d.Ledger, e)
			d.Transactions = append(d.Transactions, t)
		}
		if rng.IntN(30) == 0 {
			r.Status, r.TransactionID = payment.RequestPaid, int64(rng.IntN(3000)) // names nothing of its own
		}
		if rng.IntN(30) == 0 && r.Status == payment.RequestPaid {
			r.Status = payment.RequestCancelled
		}
		d.Requests = append(d.Requests, r)
	}
	for i := 0; i < n/20; i++ {
		d.Ledger = append(d.Ledger, LedgerEntry{Reference: fmt.Sprintf("ptx_%d", 90000+i), Charge: true, Approved: true, UpdatedAt: when()})
	}
	for i := 0; i < 5; i++ {
		d.BatchJobs = append(d.BatchJobs, BatchJob{MerchantID: "m", JobID: fmt.Sprintf("file#%d#1", i), Finished: i%2 == 0,
			LeaseUntil: now.Add(time.Duration(rng.IntN(20)-10) * time.Minute), UpdatedAt: old})
	}
	return d
}

// diff lists what only a or only b holds.
func diff(a, b []string) string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, "+"+x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, "-"+x)
		}
	}
	return strings.Join(out, "\n")
}

func keys(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Key())
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// The full pass's subjects, each judged on its own records, find exactly
// the violations the snapshot audit finds: the same invariants.
func TestSweepFindsWhatCheckFinds(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := &tables{d: randomSnapshot(rng, 300)}
		want := keys(Check(f.d, now, grace).Violations)
		if len(want) == 0 {
			t.Fatalf("seed %d: a snapshot with nothing broken tests nothing", seed)
		}
		r, err := Sweep(context.Background(), f, judgeOf(f), PassTables(true), 3, 2, 17, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(r.Violations); !slices.Equal(got, want) {
			t.Fatalf("seed %d: sweep (+) and snapshot audit (-) differ:\n%s", seed, diff(got, want))
		}
		if r.Checked.Transactions != len(f.d.Transactions) || r.Checked.Requests != len(f.d.Requests) || r.Checked.LedgerEntries != len(f.d.Ledger) {
			t.Fatalf("seed %d: counts %+v", seed, r.Checked)
		}
	}
}

// A request subject judges the request's own rules only; a charge
// subject money taken without its approved transaction; a job subject
// only the job.
func TestSubjectRules(t *testing.T) {
	d := healthy()
	d.BatchJobs[1].LeaseUntil = now.Add(-time.Hour) // stuck job
	d.Ledger[0].Approved = true                     // declined tx 10's charge took money
	f := &tables{d: d}
	j := judgeOf(f)
	for _, c := range []struct {
		s    Subject
		want []string
	}{
		{RequestSubject(1), []string{LedgerChargeHasApprovedTx}},
		{RequestSubject(2), nil},
		{ChargeSubject("ptx_10"), []string{LedgerChargeHasApprovedTx}},
		{ChargeSubject("ptx_11"), nil},
		{JobSubject("m", "file#b#1"), []string{BatchJobNotStuck}},
		{JobSubject("m", "file#a#1"), nil},
	} {
		v, err := j.Judge(context.Background(), c.s, now)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range v.Violations {
			got = append(got, x.Invariant)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.s.Key(), got, c.want)
		}
	}
}

func TestSubjectKeysRoundTrip(t *testing.T) {
	for _, s := range []Subject{RequestSubject(42), ChargeSubject("ptx_7"), JobSubject("mer_1", "file#a b#c#000001")} {
		got, err := ParseSubject(s.Key())
		if err != nil || got != s {
			t.Errorf("%s parses to %+v, %v", s.Key(), got, err)
		}
	}
	for _, bad := range []string{"", "req#", "req#x", "job#m", "xyz#1"} {
		if _, err := ParseSubject(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A subject is judged again when a record the rules skipped as in flight
// becomes judgeable, and not otherwise.
func TestNextCheck(t *testing.T) {
	d := healthy()
	if next, ok := NextCheck(d, now, grace); !ok || !next.Equal(now.Add(time.Minute).Add(grace)) {
		t.Fatalf("open tx 20 (deadline in a minute), running job: next %v %v", next, ok)
	}
	d.Transactions = d.Transactions[:2]
	d.BatchJobs = d.BatchJobs[:1]
	if next, ok := NextCheck(d, now, grace); ok {
		t.Fatalf("nothing in flight, next %v", next)
	}
	d.Transactions[0].UpdatedAt = now.Add(-time.Minute)
	if next, ok := NextCheck(d, now, grace); !ok || !next.Equal(now.Add(-time.Minute).Add(grace)) {
		t.Fatalf("settled a minute ago: next %v %v", next, ok)
	}
}

func TestChangeDues(t *testing.T) {
	at := now
	tx := Transaction{ID: 5, PaymentRequestID: 9, Status: payment.TxWaiting, UpdatedAt: now.Add(-3 * time.Second)}
	settled := tx
	settled.Status, settled.OutboxEventID = payment.TxApproved, "evt_5_1"
	marked := settled // the dashboard's aggregation mark: nothing the invariants read
	req := Request{ID: 9, Status: payment.RequestUnpaid, UpdatedAt: now}
	paid := req
	paid.Status, paid.TransactionID = payment.RequestPaid, 5
	charge := LedgerEntry{Reference: "ptx_5", Charge: true, UpdatedAt: now}
	taken := charge
	taken.Approved = true
	job := BatchJob{MerchantID: "m", JobID: "j", UpdatedAt: now}
	for _, c := range []struct {
		name string
		ch   Change
		want string
	}{
		{"tx insert", Change{At: at, NewTx: &tx}, "req#9"},
		{"tx settle", Change{At: at, OldTx: &tx, NewTx: &settled}, "req#9"},
		{"tx mark", Change{At: at, OldTx: &settled, NewTx: &marked}, ""},
		{"tx removed", Change{At: at, OldTx: &settled}, ""},
		{"new unpaid request", Change{At: at, NewRequest: &req}, ""},
		{"request paid", Change{At: at, OldRequest: &req, NewRequest: &paid}, "req#9"},
		{"charge booked pending", Change{At: at, NewCharge: &charge}, ""},
		{"charge approved", Change{At: at, OldCharge: &charge, NewCharge: &taken}, "chg#ptx_5"},
		{"job", Change{At: at, NewJob: &job}, "job#m#j"},
	} {
		dues := c.ch.Dues(grace)
		got := ""
		if len(dues) == 1 {
			got = dues[0].Subject.Key()
			if want := now.Add(grace); !dues[0].At.Equal(want) {
				t.Errorf("%s: due %v, want %v (the later of record and stream time, plus grace, rounded up)", c.name, dues[0].At, want)
			}
		}
		if got != c.want || len(dues) > 1 {
			t.Errorf("%s: dues %+v, want %q", c.name, dues, c.want)
		}
	}
	if d := dueAt(now.Add(time.Second), grace); !d.Equal(now.Add(grace + DueResolution)) {
		t.Errorf("dueAt rounds up to %v: %v", DueResolution, d)
	}
}

// findings and checks kept in memory (for the Settler, Consumer and Runner).
type memFindings struct {
	mu      sync.Mutex
	kept    map[string]RecordedViolation
	dues    map[string]Due
	seen    time.Time
	sent    []time.Time
	failDue bool
}

func newMem() *memFindings {
	return &memFindings{kept: map[string]RecordedViolation{}, dues: map[string]Due{}}
}

func (m *memFindings) RecordViolation(_ context.Context, v RecordedViolation) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.kept[v.Key()]; ok {
		return false, nil
	}
	m.kept[v.Key()] = v
	return true, nil
}

func (m *memFindings) ClearViolation(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kept, key)
	return nil
}

func (m *memFindings) OpenViolations(context.Context) ([]RecordedViolation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RecordedViolation
	for _, v := range m.kept {
		out = append(out, v)
	}
	return out, nil
}

func dueID(d Due) string { return d.Subject.Key() + "@" + d.At.UTC().String() }

func (m *memFindings) ScheduleChecks(_ context.Context, dues []Due) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failDue {
		return errors.New("throttled")
	}
	for _, d := range dues {
		m.dues[dueID(d)] = d
	}
	return nil
}

func (m *memFindings) due(now time.Time) []Due {
	var out []Due
	for _, d := range m.dues {
		if !d.At.After(now) {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func (m *memFindings) DueChecks(_ context.Context, now time.Time, limit int) ([]Due, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.due(now)
	return d[:min(limit, len(d))], nil
}

func (m *memFindings) DoneChecks(_ context.Context, dues []Due) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range dues {
		delete(m.dues, dueID(d))
	}
	return nil
}

func (m *memFindings) OldestDue(_ context.Context, now time.Time) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.due(now); len(d) > 0 {
		return d[0].At, true, nil
	}
	return time.Time{}, false, nil
}

func (m *memFindings) Beat(_ context.Context, at time.Time) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lag time.Duration
	for _, s := range m.sent {
		if s.After(m.seen) {
			lag = at.Sub(s)
			break
		}
	}
	m.sent = append(m.sent, at)
	return lag, nil
}

func (m *memFindings) Seen(_ context.Context, sentAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sentAt.After(m.seen) {
		m.seen = sentAt
	}
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A change queues its subject's check; the scheduled run judges it once
// due, records the violation once however often it is found (a retried
// batch, the full pass), and clears it when the records are mended.
func TestIncrementalAuditReportsOnceAndClears(t *testing.T) {
	ctx := context.Background()
	d := healthy()
	f := &tables{d: d}
	m := newMem()
	cons := &Consumer{Checks: m, Heartbeat: m, Grace: grace}
	run := &Runner{Judge: judgeOf(f), Checks: m, Findings: m, Heartbeat: m, Log: quiet, Budget: time.Minute, DueBatch: 10, Concurrency: 4}
	var published []RunMetrics
	publish := func(r RunMetrics) error { published = append(published, r); return nil }

	// Request 1 made paid by a declined transaction, as the stream shows it.
	f.d.Requests[0].TransactionID = 10
	changed := f.d.Requests[0]
	before := healthy().Requests[0]
	ch := Change{At: now, OldRequest: &before, NewRequest: &changed}
	for i := 0; i < 3; i++ { // the stream batch, retried twice
		if err := cons.Consume(ctx, []Change{ch}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.dues) != 1 {
		t.Fatalf("dues %+v", m.dues)
	}
	// Before the grace: nothing judged.
	st, err := run.Run(ctx, now.Add(time.Minute), publish)
	if err != nil || st.Judged != 0 || len(m.kept) != 0 {
		t.Fatalf("judged early: %+v %v", st, err)
	}
	// After it: both directions found, each recorded once.
	later := now.Add(grace + time.Minute)
	if st, err = run.Run(ctx, later, publish); err != nil || st.Judged != 1 || st.NewViolations != 2 || st.OpenViolations != 2 {
		t.Fatalf("run %+v %v", st, err)
	}
	// Found again (a check queued twice, the full pass): not reported again.
	_ = m.ScheduleChecks(ctx, []Due{{RequestSubject(1), later}})
	if st, err = run.Run(ctx, later.Add(time.Minute), publish); err != nil || st.Judged != 1 || st.NewViolations != 0 || st.OpenViolations != 2 {
		t.Fatalf("second run %+v %v", st, err)
	}
	if p := published[len(published)-1]; p.OpenViolations != 2 {
		t.Fatalf("published %+v", p)
	}
	// Mended: the next check clears both.
	f.d.Requests[0].TransactionID = 11
	_ = m.ScheduleChecks(ctx, []Due{{RequestSubject(1), later}})
	if st, err = run.Run(ctx, later.Add(2*time.Minute), publish); err != nil || st.OpenViolations != 0 || len(m.kept) != 0 {
		t.Fatalf("after the repair %+v %v %+v", st, err, m.kept)
	}
}

// An in-flight subject is judged again when it is due (the open
// transaction's deadline), and the stream's lag shows as unchecked age.
func TestRunnerReschedulesAndMeasuresLag(t *testing.T) {
	ctx := context.Background()
	f := &tables{d: healthy()}
	m := newMem()
	run := &Runner{Judge: judgeOf(f), Checks: m, Findings: m, Heartbeat: m, Log: quiet, Budget: time.Minute, DueBatch: 10, Concurrency: 4}
	_ = m.ScheduleChecks(ctx, []Due{{RequestSubject(2), now}})
	var last RunMetrics
	publish := func(r RunMetrics) error { last = r; return nil }
	if _, err := run.Run(ctx, now, publish); err != nil {
		t.Fatal(err)
	}
	want := Due{RequestSubject(2), now.Add(time.Minute + grace)}
	if _, ok := m.dues[dueID(want)]; !ok || len(m.dues) != 1 {
		t.Fatalf("open transaction 20 not judged again at its deadline + grace: %+v", m.dues)
	}
	// The consumer never read the heartbeat: two minutes later the lag is
	// the first heartbeat's age.
	if _, err := run.Run(ctx, now.Add(time.Minute), publish); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Run(ctx, now.Add(2*time.Minute), publish); err != nil {
		t.Fatal(err)
	}
	if last.UncheckedAge != 2*time.Minute {
		t.Fatalf("unchecked age %v, want the unread heartbeat's 2m", last.UncheckedAge)
	}
	cons := &Consumer{Checks: m, Heartbeat: m, Grace: grace}
	if err := cons.Consume(ctx, nil, []time.Time{now.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Run(ctx, now.Add(3*time.Minute), publish); err != nil {
		t.Fatal(err)
	}
	if last.UncheckedAge != 0 {
		t.Fatalf("unchecked age %v after the consumer caught up", last.UncheckedAge)
	}
}

// A failing write leaves the stream batch to be retried.
func TestConsumerErrorFailsTheBatch(t *testing.T) {
	m := newMem()
	m.failDue = true
	tx := Transaction{ID: 1, PaymentRequestID: 2, UpdatedAt: now}
	err := (&Consumer{Checks: m, Heartbeat: m, Grace: grace}).Consume(context.Background(), []Change{{At: now, NewTx: &tx}}, nil)
	if err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Fatalf("err %v", err)
	}
}

// The full pass moves a bounded amount per step, resumes from its
// checkpoint, finishes in a bounded number of steps, is not started again
// before its period, and two overlapping invocations never advance one
// cursor twice.
func TestFullPassContinuesAcrossInvocations(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	f := &tables{d: randomSnapshot(rng, 2000)}
	m := newMem()
	st := &Settler{Findings: m, Checks: m, Log: quiet}
	if _, err := st.Load(ctx); err != nil {
		t.Fatal(err)
	}
	p := &Passer{Store: f, Judge: judgeOf(f), Tables: PassTables(true), Segments: 4, Every: 24 * time.Hour, PageSize: 50, Workers: 2, JudgeConcurrency: 2}
	settle := func(v Verdict) error { return st.Settle(ctx, v, now) }
	// A step that may read one page per worker only: a budget already
	// spent still lets each worker finish the page it started.
	steps := 0
	var pass Pass
	for ; steps < 1000; steps++ {
		var err error
		pass, err = p.Step(ctx, now, time.Now().Add(time.Millisecond), settle)
		if err != nil {
			t.Fatal(err)
		}
		if !pass.Running {
			break
		}
		if steps == 0 && pass.Percent() >= 100 {
			t.Fatal("the first step finished the pass: not bounded")
		}
	}
	items := len(f.d.Transactions) + len(f.d.Requests) + len(f.d.Ledger)
	if pass.Running || pass.LastScanned != int64(items) || !pass.LastStartedAt.Equal(now) {
		t.Fatalf("after %d steps: %+v (want %d items scanned)", steps, pass, items)
	}
	if max := items/50 + 12; steps > max {
		t.Fatalf("%d steps for %d items at 50 a page: more than %d", steps, items, max)
	}
	want := keys(Check(f.d, now, grace).Violations)
	var got []Violation
	for _, v := range m.kept {
		got = append(got, v.Violation)
	}
	if !slices.Equal(keys(got), want) {
		t.Fatalf("the pass (+) and the snapshot audit (-) differ:\n%s", diff(keys(got), want))
	}
	// Not again before its period; again after it.
	if pass, _ = p.Step(ctx, now.Add(time.Hour), time.Now().Add(time.Second), settle); pass.Running {
		t.Fatal("a new pass started before Every")
	}
	// Two invocations at once: every cursor move is made by one of them.
	f.advances = 0
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				ps, err := p.Step(ctx, now.Add(25*time.Hour), time.Now().Add(2*time.Millisecond), settle)
				if err != nil {
					t.Error(err)
					return
				}
				if !ps.Running && ps.LastStartedAt.Equal(now.Add(25*time.Hour)) {
					return
				}
			}
		}()
	}
	wg.Wait()
	pass, _ = f.LoadPass(ctx)
	if pass.Running || pass.LastScanned != int64(items) {
		t.Fatalf("overlapping invocations: %+v", pass)
	}
	pages := 0
	for _, tb := range PassTables(true) {
		for s := 0; s < 4; s++ {
			n := 0
			for i := range f.items(tb) {
				if i%4 == s {
					n++
				}
			}
			pages += max(1, (n+49)/50)
		}
	}
	if f.advances != pages {
		t.Fatalf("%d cursor moves for %d pages: a page was counted twice", f.advances, pages)
	}
}

// After the first pass, a pass judges what was written since the previous
// one began, and every open transaction: a record unchanged since was
// judged then.
func TestLaterPassesJudgeWhatChangedAndWhatIsOpen(t *testing.T) {
	ctx := context.Background()
	f := &tables{d: healthy()}
	m := newMem()
	st := &Settler{Findings: m, Checks: m, Log: quiet}
	_, _ = st.Load(ctx)
	p := &Passer{Store: f, Judge: judgeOf(f), Tables: PassTables(true), Segments: 2, Every: 24 * time.Hour, PageSize: 10, Workers: 2, JudgeConcurrency: 2}
	step := func(at time.Time) Pass {
		t.Helper()
		for i := 0; i < 50; i++ {
			ps, err := p.Step(ctx, at, time.Now().Add(time.Second), func(v Verdict) error { return st.Settle(ctx, v, at) })
			if err != nil {
				t.Fatal(err)
			}
			if !ps.Running {
				return ps
			}
		}
		t.Fatal("pass did not finish")
		return Pass{}
	}
	if ps := step(now); !ps.Since.IsZero() || len(m.kept) != 0 {
		t.Fatalf("first pass: %+v %+v", ps, m.kept)
	}
	next := now.Add(25 * time.Hour)
	// Broken before the first pass began and never written since: judged then.
	f.d.Ledger[3] = LedgerEntry{Reference: "ptx_404", Charge: true, Approved: true, UpdatedAt: now.Add(-48 * time.Hour)}
	// Broken after it: a charge without its transaction.
	f.d.Ledger = append(f.d.Ledger, LedgerEntry{Reference: "ptx_405", Charge: true, Approved: true, UpdatedAt: now.Add(time.Hour)})
	// Open, unchanged, and now past its deadline.
	f.d.Transactions[2].RecoverAfter = now.Add(time.Hour)
	step(next)
	var got []string
	for _, v := range m.kept {
		got = append(got, v.Invariant+" "+v.Reference+strconv.FormatInt(v.TransactionID, 10))
	}
	sort.Strings(got)
	// The running batch job is judged by every pass (jobs are few).
	want := []string{BatchJobNotStuck + " 0", LedgerChargeHasApprovedTx + " ptx_4050", TransactionNotStuck + " 20"}
	if !slices.Equal(got, want) {
		t.Fatalf("second pass found %v, want %v", got, want)
	}
}

// slowTables reads each item in perItem (a table on a slow day) and keeps
// the page sizes asked.
type slowTables struct {
	*tables
	perItem time.Duration
	asked   []int
}

func (s *slowTables) ScanPage(ctx context.Context, c Cursor, segments, limit int, since time.Time) (Page, error) {
	s.mu.Lock()
	s.asked = append(s.asked, limit)
	s.mu.Unlock()
	p, err := s.tables.ScanPage(ctx, c, segments, limit, since)
	time.Sleep(time.Duration(p.Scanned) * s.perItem)
	return p, err
}

// A page that would not fit in what is left of an invocation's budget is
// cut to fit, at the pace of the pages before it; the first page of a
// process is small, to learn that pace. A full page here takes a second:
// read whole, it would overrun a 300 ms budget by 700 ms.
func TestPassPagesFitTheBudget(t *testing.T) {
	ctx := context.Background()
	f := &slowTables{tables: &tables{d: randomSnapshot(rand.New(rand.NewPCG(5, 5)), 3000)}, perItem: 2 * time.Millisecond}
	m := newMem()
	st := &Settler{Findings: m, Checks: m, Log: quiet}
	if _, err := st.Load(ctx); err != nil {
		t.Fatal(err)
	}
	p := &Passer{Store: f, Judge: judgeOf(f.tables), Tables: PassTables(true), Segments: 1, Every: 24 * time.Hour, PageSize: 500, Workers: 1, JudgeConcurrency: 2}
	settle := func(v Verdict) error { return st.Settle(ctx, v, now) }
	// The first step starts the pass (its batch jobs judged) and may read
	// nothing; the next reads one page.
	for _, budget := range []time.Duration{0, 20 * time.Millisecond} {
		if _, err := p.Step(ctx, now, time.Now().Add(budget), settle); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.asked) != 1 || f.asked[0] != minPage {
		t.Fatalf("first step asked pages %v: want one probe of %d items", f.asked, minPage)
	}
	for i := 0; i < 3; i++ {
		f.asked = nil
		began := time.Now()
		pass, err := p.Step(ctx, now, began.Add(300*time.Millisecond), settle)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		if !pass.Running {
			t.Fatal("the pass finished: the snapshot is too small for this test")
		}
		// The budget plus one smallest page (100 ms) and some slack; a
		// full page alone would take 1 s.
		if took > 650*time.Millisecond || slices.Max(f.asked) >= p.PageSize {
			t.Fatalf("step %d took %v with pages %v for a 300 ms budget", i, took, f.asked)
		}
	}
}
