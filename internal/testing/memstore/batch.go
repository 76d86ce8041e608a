package memstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"
)

// The batch processor's store (batchproc.Store): jobs with their lease,
// row records and open-job markers, each write under the condition
// internal/dynamo/batches.go puts on it, so that the errors the processor
// branches on (Conflict for a busy job, Exists with the held
// record, NotFound: errkind) come exactly where DynamoDB's would.

type jobRow struct {
	j batch.Job
	// releasedBy is the owner whose release emptied the lease: the same
	// release repeated succeeds again (a retried call whose answer was lost).
	releasedBy string
}

func batchKey(merchantID, id string) string { return merchantID + "#" + id }

// storedJob is the job as DynamoDB keeps it: times in UTC without a
// monotonic reading (they round-trip as RFC 3339 text).
func storedJob(j *batch.Job) batch.Job {
	c := clone(*j)
	c.Clock, c.CreatedAt, c.UpdatedAt = c.Clock.UTC().Round(0), c.CreatedAt.UTC().Round(0), c.UpdatedAt.UTC().Round(0)
	if c.CompletedAt != nil {
		t := c.CompletedAt.UTC().Round(0)
		c.CompletedAt = &t
	}
	return c
}

func (row *jobRow) out() *batch.Job {
	c := clone(row.j)
	return &c
}

func storedRow(r *batch.RowRecord) *batch.RowRecord {
	c := clone(*r)
	c.CreatedAt = c.CreatedAt.UTC().Round(0)
	return &c
}

// AcquireBatchJob creates j leased by owner until `until`, or else takes
// the existing job's lease as LeaseBatchJob does. Its open marker is
// written first, once.
func (s *Store) AcquireBatchJob(_ context.Context, j *batch.Job, owner string, now, until time.Time) (*batch.Job, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	j.Owner, j.LeaseUntil, j.Invocations = owner, until.UnixMilli(), 1
	before, after := s.begin("AcquireBatchJob")
	if before != nil {
		return nil, before
	}
	k := batchKey(j.MerchantID, j.JobID)
	if _, ok := s.open[k]; !ok {
		s.open[k] = now.UnixMilli()
	}
	if _, ok := s.jobs[k]; !ok {
		s.jobs[k] = &jobRow{j: storedJob(j)}
		if after != nil {
			return nil, after
		}
		return s.jobs[k].out(), nil
	}
	job, err := s.leaseJob(j.MerchantID, j.JobID, owner, now, until)
	if err != nil && !errkind.Is(err, errkind.Conflict) {
		return nil, err
	}
	if after != nil {
		return nil, after
	}
	return job, err
}

// LeaseBatchJob takes the lease of an unfinished job whose lease is free,
// lapsed or owner's; a finished job comes back with a nil error, another
// owner's live lease as a Conflict error with the job, an unknown job
// as a NotFound error.
func (s *Store) LeaseBatchJob(_ context.Context, merchantID, jobID, owner string, now, until time.Time) (*batch.Job, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("LeaseBatchJob")
	if before != nil {
		return nil, before
	}
	job, err := s.leaseJob(merchantID, jobID, owner, now, until)
	if after != nil && (err == nil || errkind.Is(err, errkind.Conflict)) {
		return nil, after
	}
	return job, err
}

func (s *Store) leaseJob(merchantID, jobID, owner string, now, until time.Time) (*batch.Job, error) {
	row, ok := s.jobs[batchKey(merchantID, jobID)]
	if !ok {
		return nil, notFound()
	}
	if row.j.Finished() {
		return row.out(), nil
	}
	if row.j.LeaseUntil >= now.UnixMilli() && row.j.Owner != owner {
		return row.out(), conflict()
	}
	row.j.Owner, row.j.LeaseUntil, row.j.UpdatedAt = owner, until.UnixMilli(), now.UTC().Round(0)
	row.j.Invocations++
	return row.out(), nil
}

// SaveBatchJob writes j's progress, state, counts and lease if j.Owner
// still holds the job; a Conflict error otherwise. The job's identity
// (file, key, ETag, clock, creation) and Invocations stay as stored.
func (s *Store) SaveBatchJob(_ context.Context, j *batch.Job, now time.Time) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("SaveBatchJob")
	if before != nil {
		return before
	}
	j.UpdatedAt = now.UTC()
	row, ok := s.jobs[batchKey(j.MerchantID, j.JobID)]
	if !ok || row.j.Owner == "" || row.j.Owner != j.Owner {
		return conflict()
	}
	in := storedJob(j)
	st := &row.j
	st.State, st.HashOffset, st.Offset, st.NextLine, st.Parts = in.State, in.HashOffset, in.Offset, in.NextLine, in.Parts
	st.Counts, st.Lines, st.Recoveries, st.LeaseUntil, st.UpdatedAt = in.Counts, in.Lines, in.Recoveries, in.LeaseUntil, in.UpdatedAt
	st.HashState, st.FileHash, st.Snapshot, st.Error = nil, in.FileHash, in.Snapshot, in.Error
	if len(in.HashState) > 0 {
		st.HashState = in.HashState
	}
	if in.CompletedAt != nil { // set, never removed
		st.CompletedAt = in.CompletedAt
	}
	return after
}

// ReleaseBatchJob empties owner's lease; a Conflict error when another
// owner holds it or released it. The same release again succeeds.
func (s *Store) ReleaseBatchJob(_ context.Context, merchantID, jobID, owner string) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ReleaseBatchJob")
	if before != nil {
		return before
	}
	row, ok := s.jobs[batchKey(merchantID, jobID)]
	if !ok || !(row.j.Owner == owner || row.j.Owner == "" && row.releasedBy == owner) {
		return conflict()
	}
	row.releasedBy, row.j.Owner, row.j.LeaseUntil = owner, "", 0
	return after
}

// BatchJob loads one job; a NotFound error when there is none.
func (s *Store) BatchJob(_ context.Context, merchantID, jobID string) (*batch.Job, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("BatchJob"); err != nil {
		return nil, err
	}
	row, ok := s.jobs[batchKey(merchantID, jobID)]
	if !ok {
		return nil, notFound()
	}
	return row.out(), nil
}

// BatchJobs lists a merchant's jobs (of one file name when file is not
// empty) in job id order, as the DynamoDB store's query does (a test
// helper: the processor does not call it).
func (s *Store) BatchJobs(_ context.Context, merchantID, file string) ([]*batch.Job, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("BatchJobs"); err != nil {
		return nil, err
	}
	var out []*batch.Job
	for _, row := range s.jobs {
		if row.j.MerchantID == merchantID && (file == "" || strings.HasPrefix(row.j.JobID, batch.JobFilePrefix(file))) {
			out = append(out, row.out())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JobID < out[j].JobID })
	return out, nil
}

// OpenBatchJobs lists every open-job marker, in key order.
func (s *Store) OpenBatchJobs(context.Context) ([]batch.OpenJob, error) {
	return s.openJobs("OpenBatchJobs", "")
}

// OpenBatchJobsOf lists merchantID's open-job markers, in job id order.
func (s *Store) OpenBatchJobsOf(_ context.Context, merchantID string) ([]batch.OpenJob, error) {
	return s.openJobs("OpenBatchJobsOf", merchantID)
}

func (s *Store) openJobs(method, merchantID string) ([]batch.OpenJob, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin(method); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(s.open))
	for k := range s.open {
		if merchantID == "" || strings.HasPrefix(k, merchantID+"#") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // the markers' sort key
	out := make([]batch.OpenJob, 0, len(keys))
	for _, k := range keys {
		m, job, _ := strings.Cut(k, "#") // merchant ids have no "#"
		out = append(out, batch.OpenJob{MerchantID: m, JobID: job, Since: time.UnixMilli(s.open[k])})
	}
	return out, nil
}

// CloseBatchJob removes a job's open marker (none: no error).
func (s *Store) CloseBatchJob(_ context.Context, merchantID, jobID string) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CloseBatchJob")
	if before != nil {
		return before
	}
	delete(s.open, batchKey(merchantID, jobID))
	return after
}

// ---- row records ----------------------------------------------------------

// claimable is the claim's condition: no record, or an expired one.
func claimable(held *batch.RowRecord, now time.Time) bool {
	return held == nil || held.ExpiresAt <= now.Unix()
}

// ClaimBatchRow stores r if its key has no live record; otherwise it
// returns the held record with exists().
func (s *Store) ClaimBatchRow(_ context.Context, r *batch.RowRecord, now time.Time) (*batch.RowRecord, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ClaimBatchRow")
	if before != nil {
		return nil, before
	}
	k := batchKey(r.MerchantID, r.Key)
	if held := s.rows[k]; !claimable(held, now) {
		return storedRow(held), exists()
	}
	s.rows[k] = storedRow(r)
	if after != nil {
		return nil, after
	}
	return storedRow(r), nil
}

// ClaimBatchRows claims rows all or none (one transaction: at most 100
// rows, each key once). When keys are held it writes nothing and returns
// their indexes with a Exists error.
func (s *Store) ClaimBatchRows(_ context.Context, rows []*batch.RowRecord, now time.Time) ([]int, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("ClaimBatchRows")
	if before != nil {
		return nil, before
	}
	// DynamoDB refuses these transactions as invalid.
	if len(rows) == 0 || len(rows) > 100 {
		return nil, fmt.Errorf("claim %d batch rows: a transaction has 1 to 100 items", len(rows))
	}
	seen := map[string]bool{}
	var held []int
	for i, r := range rows {
		k := batchKey(r.MerchantID, r.Key)
		if seen[k] {
			return nil, fmt.Errorf("claim %d batch rows: key %s twice in one transaction", len(rows), r.Key)
		}
		seen[k] = true
		if !claimable(s.rows[k], now) {
			held = append(held, i)
		}
	}
	if len(held) > 0 {
		return held, exists()
	}
	for _, r := range rows {
		s.rows[batchKey(r.MerchantID, r.Key)] = storedRow(r)
	}
	return nil, after
}

// BatchRowRecord reads a row record; a NotFound error also for an
// expired one.
func (s *Store) BatchRowRecord(_ context.Context, merchantID, key string, now time.Time) (*batch.RowRecord, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, _ := s.begin("BatchRowRecord"); err != nil {
		return nil, err
	}
	held := s.rows[batchKey(merchantID, key)]
	if held == nil || held.ExpiresAt <= now.Unix() {
		return nil, notFound()
	}
	return storedRow(held), nil
}

// updateRow applies change to r's stored record if cond holds of it;
// a Conflict error otherwise (a missing record too).
func (s *Store) updateRow(method string, r *batch.RowRecord, cond func(*batch.RowRecord) bool, change func(*batch.RowRecord)) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin(method)
	if before != nil {
		return before
	}
	held := s.rows[batchKey(r.MerchantID, r.Key)]
	if held == nil || !cond(held) {
		return conflict()
	}
	change(held)
	return after
}

// TakeOverBatchRow moves an unfinished row held by prevOwner to r.Owner and
// r's line; the payment request id stays. a Conflict error otherwise.
func (s *Store) TakeOverBatchRow(_ context.Context, r *batch.RowRecord, prevOwner string) error {
	return s.updateRow("TakeOverBatchRow", r,
		func(h *batch.RowRecord) bool { return h.Owner == prevOwner && !h.Done },
		func(h *batch.RowRecord) {
			h.Owner, h.LeaseUntil, h.JobID, h.File, h.Row = r.Owner, r.LeaseUntil, r.JobID, r.File, r.Row
		})
}

// CompleteBatchRows stores the rows as done with their results,
// unconditionally (every holder of a row finds the same outcome), and marks
// the callers' records done.
func (s *Store) CompleteBatchRows(_ context.Context, rows []*batch.RowRecord) error {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	before, after := s.begin("CompleteBatchRows")
	if before != nil {
		return before
	}
	for _, r := range rows {
		done := storedRow(r)
		done.Done, done.LeaseUntil = true, 0
		s.rows[batchKey(r.MerchantID, r.Key)] = done
	}
	if after != nil {
		return after
	}
	for _, r := range rows {
		r.Done, r.LeaseUntil = true, 0
	}
	return nil
}

// ReleaseBatchRow ends r.Owner's lease on an unfinished row.
func (s *Store) ReleaseBatchRow(_ context.Context, r *batch.RowRecord) error {
	return s.updateRow("ReleaseBatchRow", r,
		func(h *batch.RowRecord) bool { return h.Owner == r.Owner && !h.Done },
		func(h *batch.RowRecord) { h.LeaseUntil = 0 })
}

// ForgetBatchRow deletes an unfinished row record r.Owner holds.
func (s *Store) ForgetBatchRow(_ context.Context, r *batch.RowRecord) error {
	return s.updateRow("ForgetBatchRow", r,
		func(h *batch.RowRecord) bool { return h.Owner == r.Owner && !h.Done },
		func(*batch.RowRecord) { delete(s.rows, batchKey(r.MerchantID, r.Key)) })
}

// ReassignBatchRow gives r's unfinished row, still r.Owner's with r's
// payment request id, the id newID, and r too.
func (s *Store) ReassignBatchRow(_ context.Context, r *batch.RowRecord, newID int64) error {
	err := s.updateRow("ReassignBatchRow", r,
		func(h *batch.RowRecord) bool {
			return h.Owner == r.Owner && h.PaymentRequestID == r.PaymentRequestID && !h.Done
		},
		func(h *batch.RowRecord) { h.PaymentRequestID = newID })
	if err == nil {
		r.PaymentRequestID = newID
	}
	return err
}

// CallCounts returns how many times each method was called, for a fault
// sweep that fails every call of a run in turn.
func (s *Store) CallCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Counts()
}
