package batchproc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/provider"
)

type hashState interface {
	hash.Hash
	encoding.BinaryMarshaler
}

func resumeHash(state []byte) (hashState, error) {
	h := sha256.New()
	hs, ok := h.(hashState)
	if !ok {
		return nil, errors.New("sha256 digest cannot save its state")
	}
	if len(state) > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
			return nil, fmt.Errorf("resume content hash: %w", err)
		}
	}
	return hs, nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// rowTask is one line in flight. Tasks are consumed in line order; the
// charge of a valid row runs concurrently with its neighbours.
type rowTask struct {
	line int
	row  batch.Row
	errs []errkind.FieldError
	end  int64         // offset after the line
	next int           // line number after the line
	key  string        // dedupe key of a valid row
	wait chan struct{} // done of an earlier line of this run with the same key
	// claimed is the row's record when the producer claimed it with its
	// group (claimRows); nil: the row claims its own.
	claimed *batch.RowRecord
	done    chan struct{}
	res     batch.Result
	err     error
}

// partBuffer collects result lines until they are written as a part.
type partBuffer struct {
	buf    bytes.Buffer
	w      *batch.ResultWriter
	counts batch.Counts // of the lines in buf
	end    int64        // offset after the last line in buf
	next   int          // line after the last line in buf
	lines  int
}

func newPartBuffer() *partBuffer {
	pb := &partBuffer{}
	pb.w = batch.NewResultWriter(&pb.buf)
	return pb
}

// reset empties the buffer for the next part. The writer stays: it writes
// into pb.buf, so replacing the struct (a copy whose writer points at another
// buffer) would send every later line nowhere.
func (pb *partBuffer) reset() {
	pb.buf.Reset()
	pb.counts, pb.lines = batch.Counts{}, 0
}

func (pb *partBuffer) add(t *rowTask) error {
	// Flushed line by line so that buf.Len() is the part's true size.
	if err := pb.w.Write(t.res); err != nil {
		return err
	}
	if err := pb.w.Flush(); err != nil {
		return err
	}
	pb.counts.Rows++
	switch t.res.Status {
	case batch.StatusApproved:
		pb.counts.Approved++
	case batch.StatusDeclined:
		pb.counts.Declined++
	case batch.StatusPending:
		pb.counts.Pending++
	case batch.StatusDuplicate:
		pb.counts.Duplicate++
	default:
		pb.counts.Rejected++
	}
	pb.end, pb.next = t.end, t.next
	pb.lines++
	return nil
}

func (pb *partBuffer) bytes() ([]byte, error) {
	if err := pb.w.Flush(); err != nil {
		return nil, err
	}
	return pb.buf.Bytes(), nil
}

// checkpoint writes the buffered results as the next part and saves the
// position after them: a crash later never loses more than one part's work,
// and that work is replayed, not charged again.
func (r *jobRun) checkpoint(ctx context.Context, pb *partBuffer) error {
	if pb.lines == 0 {
		return nil
	}
	b, err := pb.bytes()
	if err != nil {
		return err
	}
	n := r.job.Parts + 1
	if _, err := r.p.Objects.PutBytes(ctx, r.partKey(n), b); err != nil {
		return err
	}
	if err := r.p.hit(crashpoint.BatchAfterPart); err != nil {
		return err
	}
	parts, offset, next, counts := r.job.Parts, r.job.Offset, r.job.NextLine, r.job.Counts
	r.job.Parts, r.job.Offset, r.job.NextLine = n, pb.end, pb.next
	r.job.Counts = r.job.Counts.Add(pb.counts)
	if err := r.save(ctx); err != nil {
		// Saved or not (a lost answer), the run goes on from the position
		// before this part: a second checkpoint of the same buffer (the
		// run's exit keeps what is done) rewrites this part instead of
		// adding its lines again as the next one.
		r.job.Parts, r.job.Offset, r.job.NextLine, r.job.Counts = parts, offset, next, counts
		return err
	}
	pb.reset()
	return nil
}

// charge reads rows from the saved position until the end of the file or of
// the budget. It reports whether the file is finished.
func (r *jobRun) charge(ctx context.Context, m *merchant.Merchant) (bool, error) {
	if r.job.Snapshot == "" { // abandoned before its snapshot was taken
		if ok, err := r.snapshot(ctx); !ok || err != nil {
			return false, err
		}
	}
	body, err := r.p.Objects.GetRange(ctx, r.job.Snapshot, r.job.Offset, "")
	if err != nil {
		return false, err
	}
	defer body.Close()
	clock := r.job.Clock
	reader := batch.NewReader(body, r.job.NextLine, batch.WithStartOffset(r.job.Offset),
		batch.WithClock(func() time.Time { return clock }), batch.WithCurrencies(r.p.Currencies))

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tasks := make(chan *rowTask, 2*r.p.cfg.Concurrency)
	sem := make(chan struct{}, r.p.cfg.Concurrency)
	var workers sync.WaitGroup
	var eof bool
	var readErr error
	// Lines in flight by dedupe key: of two lines of a run with one key, the
	// later waits for the earlier, so the earlier line is always the charged
	// one. Only unfinished lines are kept (bounded by the concurrency).
	inflight := map[string]*rowTask{}
	// start hands the lines read so far to workers, in order, once the
	// group's rows are claimed together; false: the run is ending.
	var group []*rowTask
	start := func() bool {
		defer func() { group = group[:0] }()
		if r.job.State != batch.JobReporting && !r.crashed.Load() {
			r.claimRows(rctx, group)
		}
		for i, t := range group {
			if t.errs == nil {
				select {
				case sem <- struct{}{}:
				case <-rctx.Done():
					r.releaseClaims(ctx, group[i:])
					return false
				}
				workers.Add(1)
				go func() {
					defer workers.Done()
					defer func() { <-sem }()
					if t.wait != nil {
						select {
						case <-t.wait:
						case <-rctx.Done():
						}
					}
					if r.job.State == batch.JobReporting {
						t.res, t.err = r.reportRow(rctx, m, t)
					} else {
						t.res, t.err = r.chargeRow(rctx, m, t)
					}
					t.res.Row = t.line
					close(t.done)
				}()
			}
			select {
			case tasks <- t:
			case <-rctx.Done():
				r.releaseClaims(ctx, group[i+1:])
				return false
			}
		}
		return true
	}
	go func() { // producer: reads lines in order, starts their charges
		defer close(tasks)
		valid := 0
		for {
			if r.crashed.Load() {
				return // a dead process reads and claims nothing more
			}
			if rctx.Err() != nil || r.outOfBudget() {
				start()
				return
			}
			line, row, rowErrs, err := reader.Next()
			if isEOF(err) {
				eof = true
				start()
				return
			}
			if err != nil {
				readErr = err
				start()
				return
			}
			r.lines++
			t := &rowTask{line: line, row: row, errs: rowErrs, end: reader.Offset(), next: reader.NextLine(), done: make(chan struct{})}
			if rowErrs != nil {
				t.res = batch.Rejected(line, rowErrs)
				close(t.done)
			} else {
				valid++
				t.key, _ = r.p.rowKey(row)
				if prev := inflight[t.key]; prev != nil {
					t.wait = prev.done
				}
				inflight[t.key] = t
				if len(inflight) > 4*r.p.cfg.Concurrency+claimGroup {
					for k, o := range inflight {
						select {
						case <-o.done:
							delete(inflight, k)
						default:
						}
					}
				}
			}
			group = append(group, t)
			if valid == claimGroup || len(group) >= 4*claimGroup {
				valid = 0
				if !start() {
					return
				}
			}
		}
	}()

	pb := newPartBuffer()
	var firstErr error
	for t := range tasks {
		<-t.done
		if firstErr != nil {
			continue // drain
		}
		if t.err == nil {
			t.err = pb.add(t)
		}
		if t.err == nil && pb.buf.Len() >= r.p.cfg.PartSize {
			t.err = r.checkpoint(ctx, pb)
		}
		if t.err != nil {
			firstErr = t.err
			if errors.Is(t.err, provider.ErrNotProcessed) {
				// The acquirer is rate limiting: start no new line, but let
				// the charges in flight finish (cutting them off would leave
				// unknown outcomes to look up, more requests into the same
				// exhausted budget). The job pauses below.
				r.throttled.Store(true)
				continue
			}
			if isCrash(t.err) {
				// A simulated death (tests): from here on nothing starts,
				// claims or cleans up. A charge in flight is cut off, as a
				// dead process's would be: its replay resumes it.
				r.crashed.Store(true)
			}
			cancel()
		}
	}
	workers.Wait()
	if isCrash(firstErr) {
		r.crashed.Store(true)
		return false, firstErr
	}
	if err := r.flushCompleted(ctx); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr == nil {
		firstErr = readErr
	}
	if firstErr != nil {
		// Keep what is done; the retry continues after it. A run that lost
		// the job can save nothing: the new holder replays its rows.
		if errors.Is(firstErr, errLeaseLost) {
			return false, firstErr
		}
		if errors.Is(firstErr, provider.ErrNotProcessed) {
			// Rows take what the shoppers leave of the acquirer's budget:
			// keep what is done and continue after the acquirer's hint;
			// the row that was refused is charged then, as a first try.
			r.delay = provider.RetryAfterOf(firstErr)
			r.log.Info("acquirer rate limited a batch row; the job pauses", "line", r.job.NextLine, "retryAfter", r.delay.String())
			return false, r.checkpoint(ctx, pb)
		}
		return false, errors.Join(firstErr, r.checkpoint(ctx, pb))
	}
	if !eof {
		return false, r.checkpoint(ctx, pb)
	}
	return true, r.finishRows(ctx, pb)
}

// finishRows ends the charging phase. A file whose results all fit in the
// buffer (the common case) gets its result file at once; otherwise the last
// part is written and the parts are joined.
func (r *jobRun) finishRows(ctx context.Context, pb *partBuffer) error {
	if r.job.Parts == 0 {
		b, err := pb.bytes()
		if err != nil {
			return err
		}
		if err := r.removeInput(ctx); err != nil {
			return err
		}
		if _, err := r.p.Objects.PutBytes(ctx, r.job.ResultKey, b); err != nil {
			return err
		}
		r.job.Counts = r.job.Counts.Add(pb.counts)
		r.job.Offset, r.job.NextLine = pb.end, pb.next
		return r.done(ctx)
	}
	if err := r.checkpoint(ctx, pb); err != nil {
		return err
	}
	r.job.State = batch.JobAssembling
	return r.save(ctx)
}

// assemble joins the result parts into the result file, streaming (a
// multipart upload above one part size).
func (r *jobRun) assemble(ctx context.Context) error {
	if err := r.removeInput(ctx); err != nil {
		return err
	}
	// The parts are read one after another as the upload consumes them: not
	// a ReadSeeker, so Put streams it and aborts the upload on a failed read.
	parts := &partsReader{ctx: ctx, r: r}
	defer parts.Close()
	if _, err := r.p.Objects.Put(ctx, r.job.ResultKey, parts, -1); err != nil {
		return err
	}
	return r.done(ctx)
}

// partsReader reads a job's result parts in order as one stream, opening
// each part only when the previous one is read to its end.
type partsReader struct {
	ctx context.Context
	r   *jobRun
	n   int           // the part being read (0: none opened yet)
	cur io.ReadCloser // part n
}

func (pr *partsReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		if pr.cur == nil {
			if pr.n >= pr.r.job.Parts {
				return 0, io.EOF
			}
			pr.n++
			rc, err := pr.r.p.Objects.Get(pr.ctx, pr.r.partKey(pr.n))
			if err != nil {
				return 0, err
			}
			pr.cur = rc
		}
		n, err := pr.cur.Read(b)
		if errors.Is(err, io.EOF) {
			pr.cur.Close()
			pr.cur, err = nil, nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (pr *partsReader) Close() error {
	if pr.cur != nil {
		pr.cur.Close()
		pr.cur = nil
	}
	return nil
}

// removeInput deletes the upload once its rows are all handled (the job
// works on its snapshot), unless the merchant has uploaded a new file under
// the same name meanwhile. So when the result file appears, the upload is
// already gone.
func (r *jobRun) removeInput(ctx context.Context) error {
	info, err := r.p.Objects.Head(ctx, r.job.Key)
	if err != nil {
		if errkind.Is(err, errkind.NotFound) {
			return nil
		}
		return err
	}
	// A newer upload of the same bytes has the same ETag: it is told apart
	// by being written after this job was created (by its event).
	if info.ETag != r.job.ETag || info.LastModified.After(r.job.CreatedAt) {
		return nil
	}
	return r.p.Objects.Remove(ctx, r.job.Key)
}

// done marks the job finished — failed if it was abandoned, though its
// result file reports every line — and removes its work files.
func (r *jobRun) done(ctx context.Context) error {
	if err := r.p.hit(crashpoint.BatchBeforeDone); err != nil {
		return err
	}
	now := r.p.Now().UTC()
	state := batch.JobDone
	if r.job.Error != "" {
		state = batch.JobFailed
	}
	r.job.State, r.job.CompletedAt, r.job.LeaseUntil = state, &now, 0
	if err := r.save(ctx); err != nil {
		return err
	}
	r.log.Info("batch file processed", "state", state, "file", r.job.File, "rows", r.job.Counts.Rows, "approved", r.job.Counts.Approved,
		"declined", r.job.Counts.Declined, "pending", r.job.Counts.Pending, "rejected", r.job.Counts.Rejected,
		"duplicate", r.job.Counts.Duplicate, "invocations", r.job.Invocations, "resultKey", r.job.ResultKey)
	r.cleanup(ctx)
	return nil
}

// chargeRow charges one valid row at most once across every invocation and
// every file: the row record of its dedupe key is claimed first (one
// conditional PutItem that names this line as the owner and fixes the
// payment request id). A record owned by this very line (a crash, a
// redelivery) is replayed, waited for, or taken over when its holder's lease
// lapsed; a record owned by any other line makes this line a duplicate.
func (r *jobRun) chargeRow(ctx context.Context, m *merchant.Merchant, t *rowTask) (batch.Result, error) {
	if r.crashed.Load() {
		// A simulated death (tests): a dead process starts nothing more,
		// not even the charges of lines claimed with their group.
		return batch.Result{}, crashError{"an earlier crash point"}
	}
	rec := t.claimed // claimed with its group
	var held *batch.RowRecord
	var err error
	if rec == nil {
		now := r.p.Now()
		rec = r.newRowRecord(t, now)
		held, err = r.p.rows.ClaimBatchRow(ctx, rec, now)
	}
	for tries := 0; errkind.Is(err, errkind.Exists); tries++ {
		if tries == 5 {
			return batch.Result{}, fmt.Errorf("batch row %d: its record keeps changing", t.line)
		}
		if held.Owns(r.job.JobID, t.line) {
			res, taken, rerr := r.resumeOwn(ctx, m, t, held)
			if rerr != nil || res != nil {
				if res == nil {
					return batch.Result{}, rerr
				}
				return *res, nil
			}
			rec, err = taken, nil
			break
		}
		res, derr := r.duplicate(ctx, m, t, held)
		switch {
		case errors.Is(derr, errAbandonedClaim):
			// The line that claimed the payment died before creating its
			// request: this line takes the claim over, with its id.
			taken := *held
			taken.JobID, taken.File, taken.Row = r.job.JobID, r.job.File, t.line
			taken.Owner, taken.LeaseUntil = r.job.Owner, r.p.Now().Add(r.p.cfg.RowLease).UnixMilli()
			if err = r.p.rows.TakeOverBatchRow(ctx, &taken, held.Owner); err == nil {
				r.log.Warn("batch row takes over the abandoned claim of another line", "row", t.line,
					"file", held.File, "line", held.Row, "paymentRequestId", taken.PaymentRequestID)
				rec = &taken
				break
			}
			if !errkind.Is(err, errkind.Conflict) {
				return batch.Result{}, err
			}
			held, err = r.p.rows.BatchRowRecord(ctx, rec.MerchantID, rec.Key, r.p.Now())
			if err == nil {
				err = errkind.New(errkind.Exists, "batch row record held", "") // look at the holder again
			} else if errkind.Is(err, errkind.NotFound) {
				held, err = r.p.rows.ClaimBatchRow(ctx, rec, r.p.Now())
			}
		case errors.Is(derr, errRecordGone):
			held, err = r.p.rows.ClaimBatchRow(ctx, rec, r.p.Now())
		default:
			return res, derr
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// The claim may have reached the table while the context was
			// being cancelled: free it (best effort; only this owner's claim
			// is released), so Lambda's retry needs not wait out its lease.
			r.releaseRow(ctx, rec)
		}
		return batch.Result{}, err
	}
	res, err := r.chargeWithRetry(ctx, m, t.row, rec)
	if err != nil {
		if isCrash(err) || r.crashed.Load() {
			return batch.Result{}, err
		}
		// Let a retry take the row over at once (best effort: otherwise
		// its lease lapses).
		r.releaseRow(ctx, rec)
		return batch.Result{}, err
	}
	if err := r.p.hit(crashpoint.BatchAfterRowCharge); err != nil {
		r.crashed.Store(true)
		return batch.Result{}, err
	}
	rec.Status, rec.TransactionID, rec.Code, rec.Message = string(res.Status), res.TransactionID, string(res.Code), res.Message
	if err := r.completed(ctx, rec); err != nil {
		return batch.Result{}, err
	}
	return res, nil
}

// claimGroup is how many rows the producer claims in one write.
const claimGroup = 25

// newRowRecord is the record that claims line t for this job: a fresh
// payment request id, leased to this owner.
func (r *jobRun) newRowRecord(t *rowTask, now time.Time) *batch.RowRecord {
	key, keep := r.p.rowKey(t.row)
	return &batch.RowRecord{MerchantID: r.job.MerchantID, Key: key, JobID: r.job.JobID, File: r.job.File, Row: t.line,
		PaymentRequestID: r.p.NewID(now), Owner: r.job.Owner, LeaseUntil: now.Add(r.p.cfg.RowLease).UnixMilli(),
		CreatedAt: now.UTC(), ExpiresAt: now.Add(keep).Unix()}
}

// claimRows claims the valid lines of a group that wait for no earlier
// line in one write (ClaimBatchRows) instead of one write each: the claim
// of each still precedes its charge, as a single claim does. A line whose
// key is held, or any failure, leaves the line to claim on its own in
// chargeRow, where a held record is sorted out (replay, duplicate, take
// over).
func (r *jobRun) claimRows(ctx context.Context, group []*rowTask) {
	now := r.p.Now()
	var ts []*rowTask
	var recs []*batch.RowRecord
	for _, t := range group {
		if t.errs == nil && t.wait == nil {
			ts, recs = append(ts, t), append(recs, r.newRowRecord(t, now))
		}
	}
	for try := 0; len(recs) > 1 && try < 3; try++ {
		held, err := r.p.rows.ClaimBatchRows(ctx, recs, now)
		if err == nil {
			for i, t := range ts {
				t.claimed = recs[i]
			}
			return
		}
		if !errkind.Is(err, errkind.Exists) {
			r.log.Warn("claiming a group of batch rows failed; each row claims its own", "error", err.Error())
			return
		}
		// Nothing was written: claim the others again, without the held.
		skip := map[int]bool{}
		for _, i := range held {
			skip[i] = true
		}
		var keepTs []*rowTask
		var keepRecs []*batch.RowRecord
		for i := range ts {
			if !skip[i] {
				keepTs, keepRecs = append(keepTs, ts[i]), append(keepRecs, recs[i])
			}
		}
		ts, recs = keepTs, keepRecs
	}
}

// releaseClaims frees the group claims of lines that will not be charged
// in this run (it is ending), so that the retry needs not wait out their
// lease. Best effort: otherwise the lease lapses. Each release has its own
// time, so a slow table does not leave a group's last claims held.
func (r *jobRun) releaseClaims(ctx context.Context, ts []*rowTask) {
	if r.crashed.Load() { // a simulated death cleans nothing up
		return
	}
	for _, t := range ts {
		if t.claimed != nil {
			r.releaseRow(ctx, t.claimed)
		}
	}
}

// releaseTimeout bounds one best-effort release of a row's claim: a
// failing run's clean-up, which must not hold up the retry for long.
const releaseTimeout = 2 * time.Second

// releaseRow ends this run's claim on rec (best effort), also when ctx
// was cancelled: the run is failing and its retry should take the row at
// once instead of waiting out its lease.
func (r *jobRun) releaseRow(ctx context.Context, rec *batch.RowRecord) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = r.p.rows.ReleaseBatchRow(rctx, rec)
}

// resumeOwn handles this line's own record found claimed: its stored result
// (res), or the record to charge after taking it over (rec), waiting while
// another holder's lease runs.
func (r *jobRun) resumeOwn(ctx context.Context, m *merchant.Merchant, t *rowTask, held *batch.RowRecord) (*batch.Result, *batch.RowRecord, error) {
	wait := 50 * time.Millisecond
	for {
		now := r.p.Now()
		switch {
		case held.Done:
			res := storedResult(held)
			return &res, nil, nil
		case held.Owner != r.job.Owner && held.LeaseActive(now):
			// Another invocation charges the row. Its attempt outcome is on
			// the payment request as soon as it is committed, before the row
			// record says done.
			if peeker, ok := r.p.Charger.(Peeker); ok {
				res, ok, err := peeker.PeekRow(ctx, m, t.row, RowRef{PaymentRequestID: held.PaymentRequestID})
				if err != nil {
					return nil, nil, err
				}
				if ok {
					return &res, nil, nil
				}
			}
			if err := sleep(ctx, &wait); err != nil {
				return nil, nil, err
			}
		default:
			// The holder's lease lapsed (it crashed or was cut off): take the
			// row over, keeping its payment request id.
			taken := *held
			taken.Owner, taken.LeaseUntil = r.job.Owner, now.Add(r.p.cfg.RowLease).UnixMilli()
			err := r.p.rows.TakeOverBatchRow(ctx, &taken, held.Owner)
			if err == nil {
				r.log.Warn("batch row taken over after its lease lapsed", "row", t.line, "paymentRequestId", taken.PaymentRequestID)
				return nil, &taken, nil
			}
			if !errkind.Is(err, errkind.Conflict) {
				return nil, nil, err
			}
		}
		cur, err := r.p.rows.BatchRowRecord(ctx, held.MerchantID, held.Key, r.p.Now())
		if err != nil {
			return nil, nil, err
		}
		held = cur
	}
}

// duplicate is the result of a line whose payment another line owns: the
// original's ids and outcome, once known. It waits while the owner is
// charging (its lease runs), and never charges.
func (r *jobRun) duplicate(ctx context.Context, m *merchant.Merchant, t *rowTask, held *batch.RowRecord) (batch.Result, error) {
	peeker, _ := r.p.Charger.(Peeker)
	// peek reads the original's outcome off its payment request, committed
	// before its record says done (which may wait for the end of a run: the
	// original may be a line of this very run).
	peek := func() (batch.Result, RequestState, error) {
		if peeker == nil {
			return batch.Result{}, RequestNoOutcome, nil
		}
		return peeker.PeekRequest(ctx, m, held.PaymentRequestID)
	}
	orig := batch.Result{PaymentRequestID: strconv.FormatInt(held.PaymentRequestID, 10)}
	wait := 50 * time.Millisecond
	for {
		if held.Done {
			orig = storedResult(held)
			break
		}
		res, state, err := peek()
		if err != nil {
			return batch.Result{}, err
		}
		if state == RequestHasOutcome {
			orig = res
			break
		}
		if !held.LeaseActive(r.p.Now()) {
			if state == RequestMissing {
				return batch.Result{}, errAbandonedClaim
			}
			break // created, outcome unknown: the owner's recovery finishes it
		}
		if err := sleep(ctx, &wait); err != nil {
			return batch.Result{}, err
		}
		cur, err := r.p.rows.BatchRowRecord(ctx, held.MerchantID, held.Key, r.p.Now())
		if errkind.Is(err, errkind.NotFound) {
			return batch.Result{}, errRecordGone
		}
		if err != nil {
			return batch.Result{}, err
		}
		held = cur
	}
	what := "Reference ID already used"
	if t.row.ReferenceID == "" {
		what = "same card, amount and unit already charged within " + fmtWindow(r.p.cfg.FingerprintWindow)
	}
	outcome := string(orig.Status)
	if outcome == "" {
		outcome = "outcome not known yet"
	}
	return batch.Result{Status: batch.StatusDuplicate, PaymentRequestID: orig.PaymentRequestID, TransactionID: orig.TransactionID,
		Message: fmt.Sprintf("duplicate, not charged: %s by line %d of %s (%s)", what, held.Row, held.File, outcome)}, nil
}

func fmtWindow(d time.Duration) string {
	if d%time.Hour == 0 {
		return strconv.Itoa(int(d/time.Hour)) + " hours"
	}
	return d.String()
}

// sleep waits *wait (doubling it up to a second) or until ctx ends.
func sleep(ctx context.Context, wait *time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(*wait):
	}
	*wait = min(2**wait, time.Second)
	return nil
}

// errRecordGone: the record a line was a duplicate of was removed meanwhile
// (its job was abandoned before charging it): the line may claim it again.
var errRecordGone = errors.New("batch row record removed")

// errAbandonedClaim: the record a line was a duplicate of was claimed by a
// line whose holder died before creating its payment request.
var errAbandonedClaim = errors.New("batch row claimed by a dead holder, never charged")

// notCharged is the result of a line an abandoned job never charged.
func notCharged(reason string) batch.Result {
	return batch.Result{Status: batch.StatusRejected,
		Message: "not charged: " + reason + ". Upload this line again in a new file"}
}

// reportRow is the result of a valid line of an abandoned job: what was
// done for it, found from its record and its payment request, charging
// nothing. A line whose payment request was never created is reported
// rejected and its record removed, so that uploading it again charges it.
func (r *jobRun) reportRow(ctx context.Context, m *merchant.Merchant, t *rowTask) (batch.Result, error) {
	key, _ := r.p.rowKey(t.row)
	held, err := r.p.rows.BatchRowRecord(ctx, r.job.MerchantID, key, r.p.Now())
	if errkind.Is(err, errkind.NotFound) {
		return notCharged(r.job.Error), nil
	}
	if err != nil {
		return batch.Result{}, err
	}
	if !held.Owns(r.job.JobID, t.line) {
		res, err := r.duplicate(ctx, m, t, held)
		if errors.Is(err, errRecordGone) || errors.Is(err, errAbandonedClaim) {
			return notCharged(r.job.Error), nil
		}
		return res, err
	}
	wait := 50 * time.Millisecond
	for !held.Done && held.LeaseActive(r.p.Now()) { // a charge may still be under way
		if err := sleep(ctx, &wait); err != nil {
			return batch.Result{}, err
		}
		if held, err = r.p.rows.BatchRowRecord(ctx, r.job.MerchantID, key, r.p.Now()); err != nil {
			return batch.Result{}, err
		}
	}
	if held.Done {
		return storedResult(held), nil
	}
	id := strconv.FormatInt(held.PaymentRequestID, 10)
	state := RequestNoOutcome
	var res batch.Result
	if peeker, ok := r.p.Charger.(Peeker); ok {
		if res, state, err = peeker.PeekRequest(ctx, m, held.PaymentRequestID); err != nil {
			return batch.Result{}, err
		}
	}
	switch state {
	case RequestHasOutcome:
		// Stored on the record, so a duplicate of the line sees it at once.
		held.Status, held.TransactionID, held.Code, held.Message = string(res.Status), res.TransactionID, string(res.Code), res.Message
		return res, r.completed(ctx, held)
	case RequestMissing:
		if err := r.p.rows.ForgetBatchRow(ctx, held); err != nil && !errkind.Is(err, errkind.Conflict) {
			return batch.Result{}, err
		}
		return notCharged(r.job.Error), nil
	}
	return batch.Result{Status: batch.StatusPending, PaymentRequestID: id,
		Message: "the outcome is not known yet: GET /payment-requests/status/" + id + " and the notification give it"}, nil
}

// completeBatch is how many row results are stored per write.
const completeBatch = 25

// completed queues a charged row's result for storing; every 25 results
// are written in one call. Until its result is stored, a replay of the row
// finds its outcome on the payment request instead.
func (r *jobRun) completed(ctx context.Context, rec *batch.RowRecord) error {
	if r.crashed.Load() {
		return nil
	}
	r.doneMu.Lock()
	r.doneRows = append(r.doneRows, rec)
	var full []*batch.RowRecord
	if len(r.doneRows) >= completeBatch {
		full, r.doneRows = r.doneRows, nil
	}
	r.doneMu.Unlock()
	if full == nil {
		return nil
	}
	return r.p.rows.CompleteBatchRows(ctx, full)
}

// flushCompleted stores the queued row results.
func (r *jobRun) flushCompleted(ctx context.Context) error {
	r.doneMu.Lock()
	rows := r.doneRows
	r.doneRows = nil
	r.doneMu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	return r.p.rows.CompleteBatchRows(ctx, rows)
}

// chargeWithRetry retries a charge whose outcome could not be determined
// (the charger is idempotent on the payment request id), and gives the row a
// new id when its id belongs to another payment request.
func (r *jobRun) chargeWithRetry(ctx context.Context, m *merchant.Merchant, row batch.Row, rec *batch.RowRecord) (batch.Result, error) {
	var err error
	for attempt, reassigned := 0, 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return batch.Result{}, ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		if err := r.pace.wait(ctx); err != nil {
			return batch.Result{}, err
		}
		var res batch.Result
		res, err = r.p.Charger.ChargeRow(ctx, m, row, RowRef{PaymentRequestID: rec.PaymentRequestID})
		if errors.Is(err, ErrPaymentRequestIDTaken) && reassigned < 5 {
			old := rec.PaymentRequestID
			if err = r.p.rows.ReassignBatchRow(ctx, rec, r.p.NewID(r.p.Now())); err != nil {
				return batch.Result{}, err
			}
			r.log.Info("batch row given a new payment request id: the drawn one was taken", "row", rec.Row,
				"takenId", old, "paymentRequestId", rec.PaymentRequestID)
			attempt, reassigned = attempt-1, reassigned+1
			continue
		}
		if errors.Is(err, provider.ErrNotProcessed) {
			return batch.Result{}, err // not retried at once: the job backs off
		}
		if err == nil {
			if res.PaymentRequestID == "" {
				res.PaymentRequestID = strconv.FormatInt(rec.PaymentRequestID, 10)
			}
			return res, nil
		}
		if ctx.Err() != nil {
			return batch.Result{}, ctx.Err()
		}
		r.log.Warn("batch row charge failed; retrying", "paymentRequestId", rec.PaymentRequestID, "attempt", attempt+1, "error", err.Error())
	}
	return batch.Result{}, err
}

func storedResult(rec *batch.RowRecord) batch.Result {
	return batch.Result{Status: batch.Status(rec.Status), PaymentRequestID: strconv.FormatInt(rec.PaymentRequestID, 10),
		TransactionID: rec.TransactionID, Code: codes.Code(rec.Code), Message: rec.Message}
}
