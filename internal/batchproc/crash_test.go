package batchproc_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

// testClock is the processor's clock: a test moves it past leases. It
// stands still between moves, unless it runs (newRunningTestClock).
type testClock struct {
	mu      sync.Mutex
	t       time.Time
	started time.Time // zero: stands still
}

// newTestClock starts a few seconds ahead of the real clock: the tests
// upload after creating it, and a job (stamped by this clock) must be
// created after its upload's S3 LastModified (stamped by the real one, in
// whole seconds), as it always is on AWS; otherwise the upload looks like a
// newer one and is kept.
func newTestClock() *testClock { return &testClock{t: time.Now().Add(5 * time.Second)} }

// newRunningTestClock also runs with the real clock between moves, as
// time does for a Lambda: a run that waits out another owner's row lease
// (a claim whose release was lost) sees it lapse after RowLease, where a
// clock standing still would keep it waiting for ever (a retried
// invocation once waited 10 minutes on a row whose release had timed out,
// until the stack's own scheduled recovery, on the real clock, took the
// job over).
func newRunningTestClock() *testClock {
	c := newTestClock()
	c.started = time.Now()
	return c
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started.IsZero() {
		return c.t
	}
	return c.t.Add(time.Since(c.started))
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// crashAt returns a hook that crashes at the given hits of point.
func crashAt(point string, hits ...int) func(string) bool {
	var mu sync.Mutex
	n := 0
	return func(p string) bool {
		if p != point {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		for _, h := range hits {
			if n == h {
				return true
			}
		}
		return false
	}
}

// checkEnded asserts that a merchant's job ended in state, left no card
// data in S3 (work files, upload) and is no longer listed open.
func (f *fixture) checkEnded(t *testing.T, merchantID, name, state string) {
	t.Helper()
	ctx := context.Background()
	jobs := f.jobs(t, merchantID, name)
	if len(jobs) != 1 || jobs[0].State != state {
		t.Fatalf("jobs of %s: %d, first %+v; want one %s", name, len(jobs), jobs[0], state)
	}
	if objs, err := f.objects.List(ctx, batchproc.WorkPrefix+merchantID+"/"); err != nil || len(objs) != 0 {
		t.Errorf("work files (snapshot, parts) left after the job ended: %v %v", objs, err)
	}
	if _, err := f.objects.Head(ctx, batchproc.IncomingPrefix+merchantID+"/"+name); err == nil {
		t.Error("the upload is left after the job ended")
	}
	open, err := f.testStore.OpenBatchJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range open {
		if o.MerchantID == merchantID {
			t.Errorf("job %s still listed open", o.JobID)
		}
	}
}

// At every batch crash point, a run that dies there (no clean-up: its job
// and row leases stay until they lapse) is finished by the next invocation —
// S3's redelivery of the event or the stuck-job recovery — with every row
// charged at most once, a complete result file and no card data left.
func TestCrashPointsResume(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		point string
		hits  []int
		by    string // "redelivery" or "recovery"
	}{
		{crashpoint.BatchAfterSnapshot, []int{1}, "redelivery"},
		{crashpoint.BatchAfterRowCharge, []int{5}, "recovery"},
		{crashpoint.BatchAfterRowCharge, []int{14}, "redelivery"},
		{crashpoint.BatchAfterPart, []int{3}, "redelivery"},
		{crashpoint.BatchAfterPart, []int{2}, "recovery"},
		{crashpoint.BatchBeforeDone, []int{1}, "recovery"},
	}
	for _, c := range cases {
		t.Run(c.point+"-"+c.by, func(t *testing.T) {
			clk := newTestClock()
			p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 150, 1 },
				func(d *batchproc.Deps) { d.Now = clk.Now })
			batchproc.SetCrashHook(p, crashAt(c.point, c.hits...))
			content, want := bigMixed(t, 24)
			m := testenv.NewMerchant(t)
			ev := f.upload(t, m.ID, "crash.csv", []byte(content))
			ctx := context.Background()
			if err := p.HandleS3(ctx, ev); !batchproc.IsCrash(err) {
				t.Fatalf("the run did not die at %s: %v", c.point, err)
			}
			if jobs := f.jobs(t, m.ID, "crash.csv"); len(jobs) != 1 || jobs[0].Finished() || jobs[0].Owner == "" {
				t.Fatalf("job after the crash: %+v", jobs)
			}
			// While the dead run's lease runs, nothing takes the job.
			if rep, err := p.RecoverStuck(ctx, clk.Now()); err != nil || rep.Resumed != 0 {
				t.Fatalf("recovery during the lease: %+v %v", rep, err)
			}
			clk.advance(11 * time.Minute) // past the job and row leases
			switch c.by {
			case "redelivery":
				if err := p.HandleS3(ctx, ev); err != nil {
					t.Fatal(err)
				}
			case "recovery":
				rep, err := p.RecoverStuck(ctx, clk.Now())
				if err != nil || rep.Resumed < 1 {
					t.Fatalf("recovery: %+v %v", rep, err)
				}
			}
			lines := parseResult(t, f.result(t, m.ID, "crash.csv"))
			checkLines(t, lines, want)
			// A charge in flight when the run died is cut off, and its
			// replay answers from the payment it made without a second Pay;
			// the counter counts it from its transaction.
			f.checkPaidOnce(t, pay, m.ID, lines, want)
			f.checkEnded(t, m.ID, "crash.csv", "done")
		})
	}
}

// blockingCharger blocks the first charge of one row until the run's
// context ends, like an invocation cut off mid-way.
type blockingCharger struct {
	inner   batchproc.Charger
	blockOn string
	reached chan struct{}
	once    sync.Once
}

func (c *blockingCharger) ChargeRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref batchproc.RowRef) (batch.Result, error) {
	blocked := false
	if row.ReferenceID == c.blockOn {
		c.once.Do(func() { blocked = true })
	}
	if blocked {
		close(c.reached)
		<-ctx.Done()
		return batch.Result{}, ctx.Err()
	}
	return c.inner.ChargeRow(ctx, m, row, ref)
}

// recoverAsScheduled runs the stuck-job recovery as its schedule does on
// AWS, once a minute: a pass that failed for another reason than a crash the
// test injected (on a loaded machine, an emulator that stalled past the
// SDK's attempts) is followed by another once its job lease lapsed, up to
// three passes. It returns every pass's report and the last pass's error.
func recoverAsScheduled(t *testing.T, p *batchproc.Processor, clk *testClock) ([]batchproc.RecoveryReport, error) {
	t.Helper()
	var passes []batchproc.RecoveryReport
	for {
		rep, err := p.RecoverStuck(context.Background(), clk.Now())
		passes = append(passes, rep)
		if err == nil || batchproc.IsCrash(err) || len(passes) == 3 {
			return passes, err
		}
		t.Logf("recovery pass %d failed; run again a lease later, as the schedule would: %v", len(passes), err)
		clk.advance(11 * time.Minute)
	}
}

// A run cut off mid-way (its context ends while a row is being charged)
// leaves its job "charging" with nobody to continue it; the recovery finds
// it once it has not moved for StuckAfter and finishes it.
func TestStuckJobResumedByRecovery(t *testing.T) {
	f := newFixture(t)
	clk := newTestClock()
	var charger *blockingCharger
	// One row at a time: a payment cut off inside the payment core is the
	// core's recovery to prove, not the batch's.
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 200, 1 },
		func(d *batchproc.Deps) {
			d.Now = clk.Now
			charger = &blockingCharger{inner: d.Charger, blockOn: "REF-12", reached: make(chan struct{})}
			d.Charger = charger
		})
	content, want := bigMixed(t, 30)
	m := testenv.NewMerchant(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-charger.reached; cancel() }()
	if err := p.HandleS3(ctx, f.upload(t, m.ID, "stuck.csv", []byte(content))); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cut-off run: %v", err)
	}
	bg := context.Background()
	if rep, err := p.RecoverStuck(bg, clk.Now()); err != nil || rep.Resumed != 0 {
		t.Fatalf("a job that just stopped is not stuck yet: %+v %v", rep, err)
	}
	clk.advance(3 * time.Minute)
	// The template's schedule invokes the batch function with EventBridge's
	// scheduled event (the golden event of events/).
	ev, err := os.ReadFile("../../events/eventbridge-schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Handle(bg, ev)
	if rep, ok := out.(batchproc.RecoveryReport); err != nil || !ok || rep.Resumed < 1 {
		t.Fatalf("recovery on the schedule: %+v %v", out, err)
	}
	lines := parseResult(t, f.result(t, m.ID, "stuck.csv"))
	checkLines(t, lines, want)
	if n, twice := pay.total(); n != validRows(want) || len(twice) > 0 {
		t.Fatalf("%d charges (want %d), charged twice: %v", n, validRows(want), twice)
	}
	f.checkEnded(t, m.ID, "stuck.csv", "done")
	if jobs := f.jobs(t, m.ID, "stuck.csv"); jobs[0].Recoveries != 1 {
		t.Errorf("recoveries %d, want 1", jobs[0].Recoveries)
	}
}

// A job that keeps dying is abandoned after MaxRecoveries: it ends failed,
// its result file reports every line — charged ones with their outcome, the
// others rejected "not charged" — nothing more is charged, and no card data
// stays. Uploading the file again then charges exactly the lines that were
// not charged; the others are duplicates.
func TestStuckJobAbandonedReportsEveryLine(t *testing.T) {
	f := newFixture(t)
	clk := newTestClock()
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency, c.MaxRecoveries = 200, 1, 1 },
		func(d *batchproc.Deps) { d.Now = clk.Now })
	// Dies at the 6th charged row, and again at the 3rd row the recovery
	// handles (a replay of a row charged before the first death).
	batchproc.SetCrashHook(p, crashAt(crashpoint.BatchAfterRowCharge, 6, 9))
	content, want := bigMixed(t, 30)
	m := testenv.NewMerchant(t)
	ev := f.upload(t, m.ID, "doomed.csv", []byte(content))
	ctx := context.Background()
	if err := p.HandleS3(ctx, ev); !batchproc.IsCrash(err) {
		t.Fatalf("first run: %v", err)
	}
	clk.advance(11 * time.Minute)
	if rep, err := p.RecoverStuck(ctx, clk.Now()); !batchproc.IsCrash(err) {
		t.Fatalf("first recovery: %+v %v", rep, err)
	}
	clk.advance(11 * time.Minute)
	// The second recovery abandons the job. If a stalled store failed it, a
	// repeat abandons it (the failure came before that was saved) or
	// finishes its report. The checks below see the abandonment.
	passes, err := recoverAsScheduled(t, p, clk)
	last := passes[len(passes)-1]
	if err != nil || (len(passes) == 1 && last.Abandoned != 1) || last.Abandoned+last.Resumed != 1 {
		t.Fatalf("second recovery (%d passes): %+v %v", len(passes), passes, err)
	}
	f.checkEnded(t, m.ID, "doomed.csv", "failed")
	lines := parseResult(t, f.result(t, m.ID, "doomed.csv"))
	if len(lines) != len(want) {
		t.Fatalf("%d result lines, want %d", len(lines), len(want))
	}
	charged, notCharged := 0, 0
	for i, l := range lines {
		w := want[i]
		switch {
		case l.row != i+1:
			t.Errorf("line %d numbered %d", i+1, l.row)
		case l.status == w.status && l.prID != "":
			charged++
		case l.status == "rejected" && w.status != "rejected":
			if l.prID != "" || !strings.HasPrefix(l.message, "not charged: processing of this file stopped after repeated failures. Upload this line again in a new file") {
				t.Errorf("line %d: %+v", i+1, l)
			}
			notCharged++
		case l.status != w.status || l.code != w.code:
			t.Errorf("line %d: %+v, want %+v", i+1, l, w)
		}
	}
	n, twice := pay.total()
	if n < 6 || charged != n || len(twice) > 0 || notCharged != validRows(want)-n {
		t.Fatalf("%d lines charged, %d charges (twice: %v), %d reported not charged", charged, n, twice, notCharged)
	}
	if jobs := f.jobs(t, m.ID, "doomed.csv"); !strings.Contains(jobs[0].Error, "stopped") {
		t.Errorf("job error %q", jobs[0].Error)
	}

	// The merchant uploads the same file again.
	p2, pay2, _ := f.processor(t, nil, func(d *batchproc.Deps) { d.Now = clk.Now })
	if err := p2.HandleS3(ctx, f.upload(t, m.ID, "doomed.csv", []byte(content))); err != nil {
		t.Fatal(err)
	}
	again := parseResult(t, f.result(t, m.ID, "doomed.csv"))
	dups := 0
	for i, l := range again {
		if l.status == "duplicate" {
			dups++
			if l.prID != lines[i].prID || l.txID != lines[i].txID {
				t.Errorf("line %d: duplicate %+v names another payment than %+v", i+1, l, lines[i])
			}
		}
	}
	if n2, _ := pay2.total(); n2 != notCharged || dups != n {
		t.Errorf("re-upload: %d charges (want %d), %d duplicates (want %d)", n2, notCharged, dups, n)
	}
}

// The merchant uploads the same file again while the first job lies dead
// (before the recovery took it up): the new job reports the lines the dead
// one charged as duplicates and charges the rest; the recovered job then
// reports those as duplicates. Every line is charged once, by one of them,
// and the new upload is not deleted by the old job.
func TestReuploadWhileJobIsStuck(t *testing.T) {
	f := newFixture(t)
	clk := newTestClock()
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 200, 1 },
		func(d *batchproc.Deps) { d.Now = clk.Now })
	batchproc.SetCrashHook(p, crashAt(crashpoint.BatchAfterRowCharge, 7))
	content, want := bigMixed(t, 25)
	m := testenv.NewMerchant(t)
	ctx := context.Background()
	if err := p.HandleS3(ctx, f.upload(t, m.ID, "again.csv", []byte(content))); !batchproc.IsCrash(err) {
		t.Fatalf("first run: %v", err)
	}
	// Past the dead run's row leases, not its job lease: the job is not
	// recovered yet.
	clk.advance(3 * time.Minute)
	if err := p.HandleS3(ctx, f.upload(t, m.ID, "again.csv", []byte(content))); err != nil {
		t.Fatal(err)
	}
	second := parseResult(t, f.result(t, m.ID, "again.csv"))
	clk.advance(11 * time.Minute)
	if rep, err := p.RecoverStuck(ctx, clk.Now()); err != nil || rep.Resumed != 1 {
		t.Fatalf("recovery: %+v %v", rep, err)
	}
	first := parseResult(t, f.result(t, m.ID, "again.csv")) // the recovered job writes last
	if len(first) != len(want) || len(second) != len(want) {
		t.Fatalf("%d and %d lines, want %d", len(first), len(second), len(want))
	}
	dups := [2]int{}
	for i := range want {
		a, b := first[i], second[i]
		if want[i].status == "rejected" {
			continue
		}
		if a.status == "duplicate" {
			dups[0]++
			a, b = b, a
		} else {
			dups[1]++
		}
		if a.status != want[i].status || b.status != "duplicate" || a.prID != b.prID || a.txID != b.txID {
			t.Errorf("line %d: %+v and %+v, want one charge and one duplicate of it", i+1, a, b)
		}
	}
	if dups[1] < 7 || dups[0] == 0 {
		t.Errorf("duplicates: %d in the recovered job, %d in the new one", dups[0], dups[1])
	}
	if n, twice := pay.total(); n != validRows(want) || len(twice) > 0 {
		t.Fatalf("%d charges (want %d), charged twice: %v", n, validRows(want), twice)
	}
	jobs := f.jobs(t, m.ID, "again.csv")
	if len(jobs) != 2 || jobs[0].State != "done" || jobs[1].State != "done" {
		t.Fatalf("jobs: %+v", jobs)
	}
	if objs, _ := f.objects.List(ctx, batchproc.WorkPrefix+m.ID+"/"); len(objs) != 0 {
		t.Errorf("work files left: %v", objs)
	}
}

// A continuation invocation that dies at a crash point is finished by SQS's
// redelivery of the same continuation message once the dead run's lease
// lapsed.
func TestCrashInContinuationResumedByRedelivery(t *testing.T) {
	f := newFixture(t)
	clk := newTestClock()
	p, pay, queueURL := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency, c.MaxLinesPerRun = 150, 1, 8 },
		func(d *batchproc.Deps) { d.Now = clk.Now })
	content, want := bigMixed(t, 24)
	m := testenv.NewMerchant(t)
	ctx := context.Background()
	if err := p.HandleS3(ctx, f.upload(t, m.ID, "cont.csv", []byte(content))); err != nil {
		t.Fatal(err)
	}
	out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 1, WaitTimeSeconds: 5})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("no continuation queued: %v", err)
	}
	msg := events.SQSMessage{MessageId: aws.ToString(out.Messages[0].MessageId), Body: aws.ToString(out.Messages[0].Body), EventSource: "aws:sqs"}
	if _, err := f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	batchproc.SetCrashHook(p, crashAt(crashpoint.BatchAfterRowCharge, 3))
	resp, err := p.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("the dying continuation: %+v %v", resp, err)
	}
	batchproc.SetCrashHook(p, nil)
	clk.advance(11 * time.Minute)
	resp, err = p.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}) // SQS redelivers it
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivered continuation: %+v %v", resp, err)
	}
	f.drain(t, p, queueURL)
	lines := parseResult(t, f.result(t, m.ID, "cont.csv"))
	checkLines(t, lines, want)
	if n, twice := pay.total(); n != validRows(want) || len(twice) > 0 {
		t.Fatalf("%d charges (want %d), charged twice: %v", n, validRows(want), twice)
	}
	f.checkEnded(t, m.ID, "cont.csv", "done")
	// Finished by the chain of continuations, not left to the stuck-job
	// recovery (which this test does not run).
	if jobs := f.jobs(t, m.ID, "cont.csv"); jobs[0].Recoveries != 0 {
		t.Errorf("recoveries %d, want 0", jobs[0].Recoveries)
	}
}
