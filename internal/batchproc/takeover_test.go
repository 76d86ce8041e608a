package batchproc_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

// repeatingRelease sends every release of a job lease twice, the second
// time after the first was applied: the SDK's retry of a call whose answer
// was lost (a loaded emulator can answer a DynamoDB call after the 5 s the
// SDK gives it).
type repeatingRelease struct {
	*dynamodb.Client
	repeated atomic.Int32
}

func (d *repeatingRelease) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := d.Client.UpdateItem(ctx, in, opts...)
	if err == nil && strings.Contains(aws.ToString(in.UpdateExpression), "REMOVE #owner, leaseUntil") {
		d.repeated.Add(1)
		return d.Client.UpdateItem(ctx, in, opts...)
	}
	return out, err
}

// A run that pauses releases the job and queues its continuation. When the
// release's answer is lost and the SDK sends it again, the run must not
// take its own release for a takeover and stop without queueing anything:
// the job would lie idle until the stuck-job recovery found it (counted as
// a recovery, and abandoned after MaxRecoveries): "taken over by another
// invocation; stopping", and no result file.
func TestLostReleaseAnswerStillQueuesTheContinuation(t *testing.T) {
	f := newFixture(t)
	db := &repeatingRelease{Client: dynamodb.NewFromConfig(f.cfg)}
	p, pay, queueURL := f.processor(t, func(c *batchproc.Config) { c.MaxLinesPerRun, c.Concurrency = 8, 2 },
		func(d *batchproc.Deps) { d.Store = dynamo.New(db, f.tables) })
	content, want := bigMixed(t, 20)
	m := testenv.NewMerchant(t)
	if err := p.HandleS3(context.Background(), f.upload(t, m.ID, "lostrelease.csv", []byte(content))); err != nil {
		t.Fatal(err)
	}
	if db.repeated.Load() == 0 {
		t.Fatal("no release was sent twice")
	}
	// 20 lines, 8 a run: the first run and two continuations, each queued
	// by the run before it.
	if n := f.drain(t, p, queueURL); n != 2 {
		t.Errorf("%d continuations, want 2", n)
	}
	lines := parseResult(t, f.result(t, m.ID, "lostrelease.csv"))
	checkLines(t, lines, want)
	f.checkPaidOnce(t, pay, m.ID, lines, want)
	f.checkEnded(t, m.ID, "lostrelease.csv", "done")
	if jobs := f.jobs(t, m.ID, "lostrelease.csv"); jobs[0].Recoveries != 0 {
		t.Errorf("recoveries %d, want 0", jobs[0].Recoveries)
	}
}

// conflictingCharger fails every charge of one row with a conflict that is
// not about the job's lease (the payment service's or a row record's
// conditional write), as often as the run retries it.
type conflictingCharger struct {
	inner batchproc.Charger
	on    string
	left  atomic.Int32
}

func (c *conflictingCharger) ChargeRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref batchproc.RowRef) (batch.Result, error) {
	if row.ReferenceID == c.on && c.left.Add(-1) >= 0 {
		return batch.Result{}, fmt.Errorf("payment request %d: %w", ref.PaymentRequestID, dynamo.ErrConflict)
	}
	return c.inner.ChargeRow(ctx, m, row, ref)
}

// Only a lost job lease stops a run quietly. A conflict on a row fails the
// invocation, so that Lambda retries it, and releases the job, so that the
// retry continues at once. Taken for a takeover, it ended the invocation
// "successfully" with the job still leased and nothing queued.
func TestConflictOnARowIsRetriedNotATakeover(t *testing.T) {
	f := newFixture(t)
	var charger *conflictingCharger
	// A short row lease: the failed run frees its unstarted claims best
	// effort (2 s for all), which a loaded emulator can miss; the retry then
	// waits out their lease (docs/batch.md, "Known limit").
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.Concurrency, c.PartSize, c.RowLease = 1, 300, 5*time.Second },
		func(d *batchproc.Deps) {
			charger = &conflictingCharger{inner: d.Charger, on: "REF-7"}
			charger.left.Store(3) // the run's three tries
			d.Charger = charger
		})
	content, want := bigMixed(t, 15)
	m := testenv.NewMerchant(t)
	ev := f.upload(t, m.ID, "conflict.csv", []byte(content))
	ctx := context.Background()
	if err := p.HandleS3(ctx, ev); err == nil {
		t.Fatal("the run with a conflicting row succeeded: Lambda would not retry it")
	}
	jobs := f.jobs(t, m.ID, "conflict.csv")
	if len(jobs) != 1 || jobs[0].Finished() || jobs[0].Owner != "" || jobs[0].LeaseUntil != 0 || jobs[0].NextLine < 2 || jobs[0].NextLine > 7 {
		t.Fatalf("job after the failed run (want unfinished, released, progress kept): %+v", jobs)
	}
	if err := p.HandleS3(ctx, ev); err != nil { // Lambda's retry
		t.Fatal(err)
	}
	lines := parseResult(t, f.result(t, m.ID, "conflict.csv"))
	checkLines(t, lines, want)
	f.checkPaidOnce(t, pay, m.ID, lines, want)
	f.checkEnded(t, m.ID, "conflict.csv", "done")
	if jobs := f.jobs(t, m.ID, "conflict.csv"); jobs[0].Recoveries != 0 {
		t.Errorf("recoveries %d, want 0", jobs[0].Recoveries)
	}
}
