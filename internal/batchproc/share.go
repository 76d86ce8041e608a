package batchproc

import (
	"context"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"
)

// pacer spaces the starts of acquirer calls of one invocation evenly at a
// rate: no bursts above it, nothing shared between invocations.
type pacer struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newPacer(perSecond float64) *pacer {
	return &pacer{interval: time.Duration(float64(time.Second) / perSecond)}
}

// wait blocks until the caller's slot.
func (p *pacer) wait(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.interval)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// behindOlderFile reports whether the job has not started charging yet and
// an older file of its merchant is still open (MerchantOrder): a merchant's
// files are charged in upload order (the order their jobs were opened), one
// after the other, while other merchants' files go on.
func (r *jobRun) behindOlderFile(ctx context.Context) (bool, error) {
	if !r.p.cfg.MerchantOrder || r.job.State != batch.JobCharging || r.job.Offset != 0 || r.job.Parts != 0 {
		return false, nil
	}
	open, err := r.p.open.OpenBatchJobsOf(ctx, r.job.MerchantID)
	if err != nil {
		return false, err
	}
	var mine time.Time
	for _, o := range open {
		if o.JobID == r.job.JobID {
			mine = o.Since
		}
	}
	for _, o := range open {
		older := o.Since.Before(mine) || (o.Since.Equal(mine) && o.JobID < r.job.JobID)
		if o.JobID == r.job.JobID || !older {
			continue
		}
		// A marker outlives its job until the job's files are deleted.
		j, err := r.p.jobs.BatchJob(ctx, o.MerchantID, o.JobID)
		if errkind.Is(err, errkind.NotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if !j.Finished() {
			r.log.Info("batch job waits for an older file of its merchant", "olderJobId", o.JobID)
			return true, nil
		}
	}
	return false, nil
}

// sharers is how many runs split the batch share now: the merchants with
// open files (one query of the open-job markers per slice), at least 1 and
// at most the queue's concurrency. When the markers cannot be read it
// assumes the queue is full (the smallest pace: never over the share).
func (p *Processor) sharers(ctx context.Context) int {
	q := max(1, p.cfg.QueueConcurrency)
	open, err := p.open.OpenBatchJobs(ctx)
	if err != nil {
		p.Log.Warn("open batch jobs unreadable; pacing for a full queue", "error", err.Error())
		return q
	}
	merchants := map[string]bool{}
	for _, o := range open {
		merchants[o.MerchantID] = true
	}
	return min(q, max(1, len(merchants)))
}
