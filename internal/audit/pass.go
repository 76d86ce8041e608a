package audit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The full pass is the incremental audit's backstop: every record of the
// audited tables is read again, slowly, and the subjects it names judged
// like a change's, so that what the stream never delivered (a change
// older than the stream's 24 hours while the consumer was down, a bug)
// is still found. It is a parallel scan (one cursor per table and
// segment) that moves forward a bounded amount per scheduled invocation and
// keeps its cursors in a checkpoint, as a batch file keeps its byte
// offset: no invocation needs to finish it, and two invocations never
// advance the same cursor (each move is a conditional write of the cursor
// it started from).

// Tables a pass scans (the store maps them to the stack's tables).
const (
	TableTransactions = "transactions" // each transaction names its request
	TableRequests     = "requests"     // a paid request whose named transaction is not its approved one
	TableLedger       = "ledger"       // the sandbox ledger's money taken (operations table)
)

// Cursor is one segment of one table's scan.
type Cursor struct {
	Table   string
	Segment int
	// Key is the scan's position (opaque to the audit); "" at the start.
	Key     string
	Done    bool
	Scanned int64 // items read so far
}

// Pass is the full pass's checkpoint.
type Pass struct {
	// ID names the running (or last) pass: its start, in Unix ms; 0 when
	// no pass ever started.
	ID        int64
	StartedAt time.Time
	Running   bool
	Segments  int
	// Estimate is how many items the scanned tables held when the pass
	// started (the tables' item counts, refreshed by DynamoDB every few
	// hours): the denominator of Percent.
	Estimate int64
	// Since: the pass judges the records written since (and every open
	// transaction): a record unchanged since the previous pass began was
	// judged by it, and the stream judged each change in between. Zero
	// (the first pass, payctl audit): every record.
	Since   time.Time
	Cursors []Cursor
	// The last finished pass.
	LastStartedAt, LastFinishedAt time.Time
	LastScanned                   int64
}

// Scanned is how many items the pass has read.
func (p Pass) Scanned() int64 {
	var n int64
	for _, c := range p.Cursors {
		n += c.Scanned
	}
	return n
}

// Percent is how far the running pass has got (100 when none runs).
func (p Pass) Percent() float64 {
	if !p.Running {
		return 100
	}
	done := 0
	for _, c := range p.Cursors {
		if c.Done {
			done++
		}
	}
	if len(p.Cursors) > 0 && done == len(p.Cursors) {
		return 100
	}
	if p.Estimate <= 0 {
		return 100 * float64(done) / float64(max(1, len(p.Cursors)))
	}
	return min(99, 100*float64(p.Scanned())/float64(p.Estimate))
}

// Age is how old the audit's assurance is at now: since the start of the
// last finished pass (every record was read after it), or of the running
// first pass; 0 before any.
func (p Pass) Age(now time.Time) time.Duration {
	switch {
	case !p.LastStartedAt.IsZero():
		return now.Sub(p.LastStartedAt)
	case p.Running:
		return now.Sub(p.StartedAt)
	}
	return 0
}

// Page is one page of a segment's scan, turned into subjects.
type Page struct {
	// Subjects worth judging among the items read (the store drops what
	// cannot break an invariant: a request not paid, a ledger entry that
	// took no money, a paid request whose named transaction is its own and
	// approved or open).
	Subjects []Subject
	Next     string // the position after the page
	Done     bool   // the segment is finished
	Scanned  int    // items read
}

// ErrPassMoved: the checkpoint is not the one a write started from
// (another invocation moved it first).
var ErrPassMoved = errors.New("audit: the full pass was moved on by another invocation")

// Scanner reads the audited tables page by page.
type Scanner interface {
	// ScanPage reads the page of c's segment (of segments) after c.Key,
	// at most limit items; since (zero: all) drops the subjects of records
	// last written before it, except open transactions, which a deadline
	// can break without a write.
	ScanPage(ctx context.Context, c Cursor, segments, limit int, since time.Time) (Page, error)
	// UnfinishedBatchJobs are the batch jobs not finished yet.
	UnfinishedBatchJobs(ctx context.Context) ([]Subject, error)
	// EstimateItems is the tables' item count as DynamoDB last counted it.
	EstimateItems(ctx context.Context, tables []string) (int64, error)
}

// PassStore keeps the checkpoint and scans.
type PassStore interface {
	Scanner
	// LoadPass reads the checkpoint (zero Pass when none).
	LoadPass(ctx context.Context) (Pass, error)
	// SavePass replaces prev with next: ErrPassMoved when the stored
	// checkpoint is no longer prev (its ID and Running).
	SavePass(ctx context.Context, prev, next Pass) error
	// AdvanceCursor moves cursor i of pass id from old to next:
	// ErrPassMoved when it is no longer at old.
	AdvanceCursor(ctx context.Context, id int64, i int, old, next Cursor) error
}

// Passer moves the full pass forward.
type Passer struct {
	Store  PassStore
	Judge  *Judge
	Tables []string
	// Segments per table (DynamoDB's parallel scan).
	Segments int
	// Every: a pass starts this long after the previous one started (once
	// that one has finished).
	Every time.Duration
	// PageSize is the items read per page; Workers the segments read at
	// once, each judging up to JudgeConcurrency subjects at a time.
	PageSize, Workers, JudgeConcurrency int

	// perItem is the last page's time per item read (nanoseconds), kept
	// while the process lives (a warm Lambda instance): pageSize uses it so
	// that a page started near the budget's end still fits in it.
	perItem atomic.Int64
}

// minPage is the smallest page read; a page this small takes far less than
// an invocation's margin, so a budget is never overrun by more than it.
const minPage = 50

// pageSize is how many items the next page may read with remaining time
// left: the full PageSize while a page of that size fits in remaining (at
// the last page's pace), fewer near the end, never under minPage. Before any
// page was timed in this process the first is minPage, to learn the pace:
// a 500-item page judged on a slow day takes longer than the margin the
// invocation keeps before Lambda's timeout.
func (p *Passer) pageSize(remaining time.Duration) int {
	floor := min(p.PageSize, minPage)
	per := time.Duration(p.perItem.Load())
	if per <= 0 {
		return floor
	}
	fits := int(remaining / per)
	return max(floor, min(p.PageSize, fits))
}

// Step moves the pass forward until `until` (the invocation's budget):
// starts one when it is time, scans and judges pages (each verdict to
// settle), and closes the pass when every cursor is done. The work of an
// invocation is bounded by until and by one page per worker in memory.
func (p *Passer) Step(ctx context.Context, now, until time.Time, settle func(Verdict) error) (Pass, error) {
	st, err := p.Store.LoadPass(ctx)
	if err != nil {
		return st, err
	}
	if !st.Running && (st.LastStartedAt.IsZero() || !now.Before(st.LastStartedAt.Add(p.Every))) {
		next := Pass{ID: now.UnixMilli(), StartedAt: now.UTC(), Running: true, Segments: p.Segments,
			LastStartedAt: st.LastStartedAt, LastFinishedAt: st.LastFinishedAt, LastScanned: st.LastScanned}
		if !st.LastStartedAt.IsZero() {
			// Writers' clocks may lag: an hour's margin before the last start.
			next.Since = st.LastStartedAt.Add(-p.Judge.Grace - time.Hour)
		}
		if next.Estimate, err = p.Store.EstimateItems(ctx, p.Tables); err != nil {
			return st, err
		}
		for _, t := range p.Tables {
			for s := 0; s < p.Segments; s++ {
				next.Cursors = append(next.Cursors, Cursor{Table: t, Segment: s})
			}
		}
		switch err := p.Store.SavePass(ctx, st, next); {
		case errors.Is(err, ErrPassMoved):
			return p.Store.LoadPass(ctx) // another invocation started it: the next run continues
		case err != nil:
			return st, err
		}
		st = next
		// Batch jobs are few and indexed: judged once per pass, at its start.
		jobs, err := p.Store.UnfinishedBatchJobs(ctx)
		if err != nil {
			return st, err
		}
		if err := judgeAll(ctx, p.Judge, jobs, now, p.JudgeConcurrency, settle); err != nil {
			return st, err
		}
	}
	if !st.Running {
		return st, nil
	}
	if err := p.advance(ctx, &st, now, until, settle); err != nil {
		return st, err
	}
	for _, c := range st.Cursors {
		if !c.Done {
			return st, nil
		}
	}
	done := st
	done.Running, done.LastStartedAt, done.LastFinishedAt, done.LastScanned = false, st.StartedAt, now.UTC(), st.Scanned()
	switch err := p.Store.SavePass(ctx, st, done); {
	case errors.Is(err, ErrPassMoved):
		return p.Store.LoadPass(ctx)
	case err != nil:
		return st, err
	}
	return done, nil
}

// advance runs the workers over the unfinished cursors until `until`.
func (p *Passer) advance(ctx context.Context, st *Pass, now, until time.Time, settle func(Verdict) error) error {
	var todo []int
	for i, c := range st.Cursors {
		if !c.Done {
			todo = append(todo, i)
		}
	}
	// Invocations that overlap start on different cursors.
	rand.Shuffle(len(todo), func(a, b int) { todo[a], todo[b] = todo[b], todo[a] })
	var (
		next atomic.Int32
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for w := 0; w < max(1, p.Workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(todo) || time.Now().After(until) || ctx.Err() != nil {
					return
				}
				i := todo[k]
				mu.Lock()
				c := st.Cursors[i]
				mu.Unlock()
				for !c.Done && time.Now().Before(until) && ctx.Err() == nil {
					began := time.Now()
					page, err := p.Store.ScanPage(ctx, c, st.Segments, p.pageSize(time.Until(until)), st.Since)
					if err == nil {
						err = judgeAll(ctx, p.Judge, page.Subjects, now, p.JudgeConcurrency, settle)
					}
					if err == nil {
						p.perItem.Store(int64(time.Since(began)) / int64(max(1, page.Scanned)))
					}
					moved := Cursor{Table: c.Table, Segment: c.Segment, Key: page.Next, Done: page.Done, Scanned: c.Scanned + int64(page.Scanned)}
					if err == nil {
						err = p.Store.AdvanceCursor(ctx, st.ID, i, c, moved)
					}
					if errors.Is(err, ErrPassMoved) {
						break // another invocation holds this cursor
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					c = moved
					mu.Lock()
					st.Cursors[i] = c
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SweepProgress is how far a Sweep has got.
type SweepProgress struct {
	Scanned      int64 `json:"scanned"`
	Estimate     int64 `json:"estimate"`
	SegmentsDone int   `json:"segmentsDone"`
	Segments     int   `json:"segments"`
	Violations   int   `json:"violations"`
}

// Sweep is the full pass run to its end in one process (payctl audit): the
// same segmented scan and the same subject checks as the scheduled pass,
// every cursor in memory, the violations returned rather than recorded
// (the audit changes nothing). progress is called after each page, one
// call at a time.
func Sweep(ctx context.Context, sc Scanner, j *Judge, tables []string, segments, workers, pageSize int, now time.Time,
	progress func(SweepProgress)) (Report, error) {
	var (
		mu    sync.Mutex
		found = map[string]Violation{}
		cnt   Counts
		prog  = SweepProgress{Segments: len(tables) * segments}
	)
	est, err := sc.EstimateItems(ctx, tables)
	if err != nil {
		return Report{}, err
	}
	prog.Estimate = est
	collect := func(v Verdict) error {
		mu.Lock()
		defer mu.Unlock()
		for _, viol := range v.Violations {
			found[viol.Key()] = viol
		}
		cnt.Deliveries += v.Checked.Deliveries
		if v.Subject.Kind == SubjectBatchJob {
			cnt.BatchJobs += v.Checked.BatchJobs
		}
		return nil
	}
	jobs, err := sc.UnfinishedBatchJobs(ctx)
	if err != nil {
		return Report{}, err
	}
	if err := judgeAll(ctx, j, jobs, now, 8, collect); err != nil {
		return Report{}, err
	}
	cursors := make(chan Cursor, len(tables)*segments)
	for _, t := range tables {
		for s := 0; s < segments; s++ {
			cursors <- Cursor{Table: t, Segment: s}
		}
	}
	close(cursors)
	var (
		wg   sync.WaitGroup
		errs []error
	)
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range cursors {
				for !c.Done {
					page, err := sc.ScanPage(ctx, c, segments, pageSize, time.Time{})
					if err == nil {
						err = judgeAll(ctx, j, page.Subjects, now, 4, collect)
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					c = Cursor{Table: c.Table, Segment: c.Segment, Key: page.Next, Done: page.Done, Scanned: c.Scanned + int64(page.Scanned)}
					mu.Lock()
					switch c.Table {
					case TableTransactions:
						cnt.Transactions += page.Scanned
					case TableRequests:
						cnt.Requests += page.Scanned
					case TableLedger:
						cnt.LedgerEntries += page.Scanned
					}
					prog.Scanned += int64(page.Scanned)
					if c.Done {
						prog.SegmentsDone++
					}
					prog.Violations = len(found)
					if progress != nil {
						progress(prog) // under mu: the calls see a growing count
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Report{}, err
	}
	r := Report{CheckedAt: now.UTC(), GraceSeconds: int64(j.Grace / time.Second), Checked: cnt, Violations: []Violation{}}
	for _, v := range found {
		r.Violations = append(r.Violations, v)
	}
	sortViolations(r.Violations)
	return r, nil
}

// PassTables are the tables a full pass reads: the sandbox ledger only on
// a sandbox stage (production keeps none).
func PassTables(sandbox bool) []string {
	if sandbox {
		return []string{TableTransactions, TableRequests, TableLedger}
	}
	return []string{TableTransactions, TableRequests}
}
