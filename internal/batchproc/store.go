package batchproc

import (
	"context"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/merchant"
)

// The processor's storage, by use. Each role is the methods one part of
// the processor calls, with the rule those writes keep; the parts reach
// them through Processor's fields. *dynamo.Store implements every role;
// internal/testing/memstore does too, and its contract tests hold it to
// DynamoDB. Errors are errkind kinds: Conflict where a write's guard
// failed, Exists where a claim met a live record, NotFound for a missing
// item; any other error is a failed call whose write may or may not have
// been applied.

// Jobs is the job lease (processor.go, recover.go): one invocation owns a
// job at a time, and every write names its owner, so an invocation whose
// job was taken over gets Conflict and stops.
type Jobs interface {
	// AcquireBatchJob creates j leased by owner until until (with its open
	// marker first), or takes the existing job's lease as LeaseBatchJob.
	AcquireBatchJob(ctx context.Context, j *batch.Job, owner string, now, until time.Time) (*batch.Job, error)
	// LeaseBatchJob takes the lease of an unfinished job whose lease is
	// free, expired or owner's; a finished job comes back with a nil error
	// (check Finished); another owner's live lease is Conflict with the
	// job; an unknown job NotFound.
	LeaseBatchJob(ctx context.Context, merchantID, jobID, owner string, now, until time.Time) (*batch.Job, error)
	// SaveBatchJob writes j's progress and extends its lease if j.Owner
	// still holds it; Conflict otherwise.
	SaveBatchJob(ctx context.Context, j *batch.Job, now time.Time) error
	// ReleaseBatchJob ends owner's lease so the next invocation takes the
	// job at once (repeating it succeeds); Conflict when another owner
	// holds or released it.
	ReleaseBatchJob(ctx context.Context, merchantID, jobID, owner string) error
	// BatchJob reads a job; NotFound when missing.
	BatchJob(ctx context.Context, merchantID, jobID string) (*batch.Job, error)
	// CloseBatchJob removes a finished job's open marker, once its work
	// files are gone.
	CloseBatchJob(ctx context.Context, merchantID, jobID string) error
}

// OpenJobs lists the open-job markers (recover.go, share.go): a job has
// one from its first write until it is finished and cleaned up, so a
// stuck job is found and a merchant's files wait for the older ones.
type OpenJobs interface {
	// OpenBatchJobs lists every marker.
	OpenBatchJobs(ctx context.Context) ([]batch.OpenJob, error)
	// OpenBatchJobsOf lists merchantID's markers (strongly consistent).
	OpenBatchJobsOf(ctx context.Context, merchantID string) ([]batch.OpenJob, error)
}

// Rows are the row records (rows.go): a line is charged by the one
// holder of its key's record, which keeps the payment request id across
// holders, so every holder charges the same request and the acquirer
// charges it once. A claim succeeds only where no live record is; a
// holder whose lease ran out is taken over, never charged beside.
type Rows interface {
	// ClaimBatchRow stores r leased by r.Owner when the key has no live
	// record; otherwise the stored record and Exists.
	ClaimBatchRow(ctx context.Context, r *batch.RowRecord, now time.Time) (*batch.RowRecord, error)
	// ClaimBatchRows claims rows (at most 100) all or none: Exists with
	// the indexes of held keys, nothing written.
	ClaimBatchRows(ctx context.Context, rows []*batch.RowRecord, now time.Time) ([]int, error)
	// BatchRowRecord reads a row record (strongly consistent); NotFound
	// also for an expired one.
	BatchRowRecord(ctx context.Context, merchantID, key string, now time.Time) (*batch.RowRecord, error)
	// TakeOverBatchRow moves an unfinished row whose lease ran out from
	// prevOwner to r.Owner; Conflict when another was faster or it is done.
	TakeOverBatchRow(ctx context.Context, r *batch.RowRecord, prevOwner string) error
	// CompleteBatchRows stores charged rows' results and marks them done
	// (unconditional: every holder finds the same outcome).
	CompleteBatchRows(ctx context.Context, rows []*batch.RowRecord) error
	// ReleaseBatchRow ends r.Owner's lease of an unfinished row whose
	// charge failed, so a retry takes it over at once.
	ReleaseBatchRow(ctx context.Context, r *batch.RowRecord) error
	// ForgetBatchRow deletes an unfinished row still held by r.Owner whose
	// payment request was never created; Conflict otherwise.
	ForgetBatchRow(ctx context.Context, r *batch.RowRecord) error
	// ReassignBatchRow gives r's row newID when its id belongs to another
	// request, if r.Owner still holds it with the old id; Conflict
	// otherwise.
	ReassignBatchRow(ctx context.Context, r *batch.RowRecord, newID int64) error
}

// Merchants reads merchant accounts.
type Merchants interface {
	// Merchant reads a merchant; NotFound when missing.
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
}

// Store is every role: what wiring passes (*dynamo.Store); New hands each
// part its own.
type Store interface {
	Jobs
	OpenJobs
	Rows
	Merchants
}

// stores are the processor's roles, each the Store it was built with.
type stores struct {
	jobs  Jobs
	open  OpenJobs
	rows  Rows
	merch Merchants
}

func storesOf(st Store) stores {
	return stores{jobs: st, open: st, rows: st, merch: st}
}
