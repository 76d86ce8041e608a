package batchproc_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/testenv"
)

// faultyDB fails one DynamoDB call of the batch processor's store, the
// failAt-th of the run (0: none): before it reaches the table or, with
// applied, after the table applied it (a timeout whose answer was lost).
type faultyDB struct {
	*dynamodb.Client
	calls, failAt int64
	applied       bool
	failed        atomic.Bool
}

var errInjected = errors.New("injected: the DynamoDB call timed out")

func call[In, Out any](d *faultyDB, ctx context.Context, in In, do func(context.Context, In, ...func(*dynamodb.Options)) (Out, error)) (Out, error) {
	if atomic.AddInt64(&d.calls, 1) != d.failAt {
		return do(ctx, in)
	}
	d.failed.Store(true)
	var zero Out
	if d.applied {
		if _, err := do(ctx, in); err != nil {
			return zero, err
		}
	}
	return zero, errInjected
}

func (d *faultyDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return call(d, ctx, in, d.Client.GetItem)
}
func (d *faultyDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return call(d, ctx, in, d.Client.PutItem)
}
func (d *faultyDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return call(d, ctx, in, d.Client.UpdateItem)
}
func (d *faultyDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return call(d, ctx, in, d.Client.DeleteItem)
}
func (d *faultyDB) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return call(d, ctx, in, d.Client.Query)
}
func (d *faultyDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return call(d, ctx, in, d.Client.TransactWriteItems)
}

// Any one DynamoDB call of a batch run failing — a read, or a write lost
// before or after the table applied it — costs a retry, never a line: the
// file ends with exactly one result line per input line, each valid row
// paid once, through what AWS does next (Lambda's retries of the S3 event,
// SQS's redelivery of continuations, the stuck-job recovery). The calls
// failed are spread over a whole run, counted in a run without faults.
func TestAnyFailedStoreCallLosesNoLine(t *testing.T) {
	f := newFixture(t)
	run := func(t *testing.T, failAt int64, applied bool) int64 {
		t.Helper()
		clk := newRunningTestClock()
		db := &faultyDB{Client: dynamodb.NewFromConfig(f.cfg), failAt: failAt, applied: applied}
		p, pay, queueURL := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency, c.MaxLinesPerRun = 300, 3, 15 },
			func(d *batchproc.Deps) { d.Store, d.Now = dynamo.New(db, f.tables), clk.Now })
		content, want := bigMixed(t, 24)
		m := testenv.NewMerchant(t)
		if _, err := invokeAsLambda(t, p, f.upload(t, m.ID, "faults.csv", []byte(content))); err != nil {
			t.Fatal(err)
		}
		f.drain(t, p, queueURL)
		// The stuck-job recovery's scheduled pass, once the leases lapsed:
		// it resumes a job the failure left leased, and removes what a
		// failed clean-up left.
		clk.advance(11 * time.Minute)
		if passes, err := recoverAsScheduled(t, p, clk); err != nil {
			t.Fatalf("recovery (%d passes): %v", len(passes), err)
		}
		f.drain(t, p, queueURL)
		if failAt > 0 && !db.failed.Load() {
			t.Fatalf("call %d never came (%d calls)", failAt, db.calls)
		}
		lines := parseResult(t, f.result(t, m.ID, "faults.csv"))
		checkLines(t, lines, want)
		f.checkPaidOnce(t, pay, m.ID, lines, want)
		f.checkEnded(t, m.ID, "faults.csv", "done")
		return atomic.LoadInt64(&db.calls)
	}
	var calls int64
	t.Run("no fault", func(t *testing.T) { calls = run(t, 0, false) })
	if calls == 0 {
		t.FailNow()
	}
	const points = 10
	for i := range int64(points) {
		failAt := 1 + i*calls/points
		for _, applied := range []bool{false, true} {
			// One after another: the recovery's pass takes every open job
			// it finds stuck, whoever's, so a run beside this one would
			// have its job finished, and its rows charged, by this run's
			// processor (more charges than rows).
			t.Run(fmt.Sprintf("call %d of %d, applied=%v", failAt, calls, applied), func(t *testing.T) { run(t, failAt, applied) })
		}
	}
	// A run without faults ends with the recovery's look for open jobs; a
	// pass that fails there is followed by the schedule's next one.
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprintf("call %d of %d (the last), applied=%v", calls, calls, applied), func(t *testing.T) { run(t, calls, applied) })
	}
}
