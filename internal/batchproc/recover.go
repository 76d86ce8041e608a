package batchproc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"
)

// RecoveryReport says what one RecoverStuck call did.
type RecoveryReport struct {
	Resumed   int `json:"resumed"`   // stuck jobs taken up again
	Abandoned int `json:"abandoned"` // stuck too often: remaining lines reported, not charged
	Cleaned   int `json:"cleaned"`   // finished jobs whose work files and upload were removed
}

// RecoverStuck ends every job left behind by a dead invocation. It is meant
// to run on the reconciler's schedule (every minute), with the batch
// function's Processor; now is the schedule's clock.
//
//   - A job whose lease lapsed, or that has had no lease and no progress for
//     StuckAfter (a lost continuation, retries used up), is stuck: it is
//     leased and run here, from its saved position, until it ends or this
//     invocation's budget does (then it continues through the queue).
//   - A job found stuck more than MaxRecoveries times is abandoned instead:
//     its remaining lines are reported from their row records (charged ones
//     with their real outcome, the others rejected "not charged"), nothing
//     more is charged, and it ends `failed` with a complete result file.
//   - A finished job whose work files or upload could not be removed is
//     cleaned up (card data never outlives its job by more than a run of
//     this function).
//
// Jobs are found through their open markers, so the cost is one query plus
// one read per open job.
func (p *Processor) RecoverStuck(ctx context.Context, now time.Time) (RecoveryReport, error) {
	var rep RecoveryReport
	open, err := p.open.OpenBatchJobs(ctx)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, o := range open {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		job, err := p.jobs.BatchJob(ctx, o.MerchantID, o.JobID)
		switch {
		case errkind.Is(err, errkind.NotFound):
			// The marker is written before the job: only an old one is an orphan.
			if now.Sub(o.Since) > p.cfg.StuckAfter {
				if err := p.jobs.CloseBatchJob(ctx, o.MerchantID, o.JobID); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case job.Finished():
			if p.newRun(job).cleanup(ctx) {
				rep.Cleaned++
			} else {
				errs = append(errs, fmt.Errorf("clean up batch job %s of %s", job.JobID, job.MerchantID))
			}
			continue
		case !p.stuck(job, now):
			continue
		}
		abandoned, err := p.recoverJob(ctx, job, now)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("recover batch job %s of %s: %w", job.JobID, job.MerchantID, err))
		case abandoned:
			rep.Abandoned++
		default:
			rep.Resumed++
		}
	}
	return rep, errors.Join(errs...)
}

// stuck: its lease lapsed without the job being saved and released (the
// invocation died), or nobody has worked on it for StuckAfter.
func (p *Processor) stuck(j *batch.Job, now time.Time) bool {
	if j.LeaseUntil != 0 {
		return j.LeaseUntil < now.UnixMilli()
	}
	return now.Sub(j.UpdatedAt) >= p.cfg.StuckAfter
}

// recoverJob leases a stuck job and runs it, abandoning it first when it was
// stuck too often.
func (p *Processor) recoverJob(ctx context.Context, stuck *batch.Job, now time.Time) (abandoned bool, err error) {
	owner := newToken()
	deadline, until := p.budget(ctx, now)
	job, err := p.jobs.LeaseBatchJob(ctx, stuck.MerchantID, stuck.JobID, owner, now, until)
	if errkind.Is(err, errkind.Conflict) || (err == nil && job.Finished()) {
		return false, nil // taken up meanwhile
	}
	if err != nil {
		return false, err
	}
	job.Owner, job.LeaseUntil = owner, until.UnixMilli()
	job.Recoveries++
	log := p.Log.With("merchantId", job.MerchantID, "jobId", job.JobID)
	if job.Recoveries > p.cfg.MaxRecoveries && (job.State == batch.JobHashing || job.State == batch.JobCharging) {
		abandoned = true
		job.Error = "processing of this file stopped after repeated failures"
		if job.State == batch.JobHashing || job.Snapshot == "" {
			job.Offset, job.NextLine = 0, 1
		}
		job.State = batch.JobReporting
		log.Warn("stuck batch job abandoned: its remaining lines are reported, not charged", "recoveries", job.Recoveries)
	} else {
		log.Warn("stuck batch job resumed", "state", job.State, "recoveries", job.Recoveries, "nextLine", job.NextLine)
	}
	if err := p.jobs.SaveBatchJob(ctx, job, now); err != nil {
		return abandoned, err
	}
	return abandoned, p.runJob(ctx, job, owner, until, deadline)
}
