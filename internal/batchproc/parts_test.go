package batchproc_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/testenv"
)

// A part size of a few lines forces a part every two or three lines in one
// invocation: the result file still has exactly one line per input line, in
// order (the buffer used to keep writing into a discarded copy after the
// first part, losing every later line of the invocation).
func TestManyPartsKeepEveryLine(t *testing.T) {
	f := newFixture(t)
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 120, 4 })
	content, want := bigMixed(t, 80)
	m := testenv.NewMerchant(t)
	// An invocation that fails (a store call timing out on a loaded
	// emulator) is invoked again, as Lambda does with an S3 event.
	invocations, err := invokeAsLambda(t, p, f.upload(t, m.ID, "parts.csv", []byte(content)))
	if err != nil {
		t.Fatal(err)
	}
	lines := parseResult(t, f.result(t, m.ID, "parts.csv"))
	checkLines(t, lines, want)
	jobs := f.jobs(t, m.ID, "parts.csv")
	if len(jobs) != 1 || jobs[0].Parts < 20 || jobs[0].Invocations < 1 || jobs[0].Invocations > invocations {
		t.Fatalf("want at most %d invocation(s) writing at least 20 parts, got %d jobs: %+v", invocations, len(jobs), *jobs[0])
	}
	f.checkPaidOnce(t, pay, m.ID, lines, want)
}

// failingJobSave fails one save of the job's progress, the failAt-th or
// the first of a finished job: before it reaches the table, or after (its
// answer lost, as a timeout on a loaded table).
type failingJobSave struct {
	batchproc.Store
	saves, failAt int64
	whenDone      bool
	applied       bool
	failed        atomic.Bool
}

func (s *failingJobSave) SaveBatchJob(ctx context.Context, j *batch.Job, now time.Time) error {
	n := atomic.AddInt64(&s.saves, 1)
	if !(n == s.failAt || s.whenDone && j.Finished()) || s.failed.Swap(true) {
		return s.Store.SaveBatchJob(ctx, j, now)
	}
	if s.applied {
		if err := s.Store.SaveBatchJob(ctx, j, now); err != nil {
			return err
		}
	}
	return errors.New("save batch job: request timed out")
}

// A checkpoint whose save fails ends the invocation, which still keeps what
// is done on its way out: that second checkpoint of the same lines rewrites
// the part, whether the failed save reached the table or not. (It used to
// count the failed part as written and add its lines again as the next
// part: the result file listed them twice, as a CI run under load found.)
func TestFailedCheckpointSaveWritesNoLineTwice(t *testing.T) {
	f := newFixture(t)
	for _, applied := range []bool{false, true} {
		// Saves 1 and 2 start the job and its charging; 3 is the first
		// part's, 6 a later one's.
		for _, failAt := range []int64{3, 6} {
			t.Run(fmt.Sprintf("applied=%v/save%d", applied, failAt), func(t *testing.T) {
				store := &failingJobSave{failAt: failAt, applied: applied}
				p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 120, 4 },
					func(d *batchproc.Deps) { store.Store = d.Store; d.Store = store })
				content, want := bigMixed(t, 30)
				m := testenv.NewMerchant(t)
				invocations, err := invokeAsLambda(t, p, f.upload(t, m.ID, "saves.csv", []byte(content)))
				if err != nil {
					t.Fatal(err)
				}
				if invocations < 2 || atomic.LoadInt64(&store.saves) < failAt {
					t.Fatalf("save %d never failed (%d saves, %d invocations)", failAt, store.saves, invocations)
				}
				lines := parseResult(t, f.result(t, m.ID, "saves.csv"))
				checkLines(t, lines, want)
				f.checkPaidOnce(t, pay, m.ID, lines, want)
			})
		}
	}
}

// The save that marks the job done reaches the table but its answer is
// lost: Lambda's retry of the event finds the job finished and removes the
// card data it left (snapshot, parts, upload) and its open marker at once,
// instead of leaving them to the stuck-job recovery's next pass.
func TestRetryOfAFinishedJobCleansUpAtOnce(t *testing.T) {
	f := newFixture(t)
	store := &failingJobSave{whenDone: true, applied: true}
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 300, 2 },
		func(d *batchproc.Deps) { store.Store = d.Store; d.Store = store })
	content, want := bigMixed(t, 12)
	m := testenv.NewMerchant(t)
	invocations, err := invokeAsLambda(t, p, f.upload(t, m.ID, "done.csv", []byte(content)))
	if err != nil {
		t.Fatal(err)
	}
	if invocations != 2 || !store.failed.Load() {
		t.Fatalf("the done save's answer was not lost once (%d invocations)", invocations)
	}
	lines := parseResult(t, f.result(t, m.ID, "done.csv"))
	checkLines(t, lines, want)
	f.checkPaidOnce(t, pay, m.ID, lines, want)
	f.checkEnded(t, m.ID, "done.csv", "done")
}
