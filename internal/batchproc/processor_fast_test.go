package batchproc_test

// The whole batch processor — HandleS3, HandleSQS, RecoverStuck — on the
// in-memory store (memstore) and bucket (memobjects), with the real payment
// service on memstore and the sandbox acquirer, a fake continuation queue
// and a test clock: no emulator, so it runs under -short, and every store
// and bucket call can be failed in turn.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/sftpd"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/testing/memobjects"
	"github.com/payreq/payreq/internal/testing/memstore"
)

var _ batchproc.Objects = (*memobjects.Store)(nil)

const fastBucket, fastQueue = "batch-bucket", "continue-queue"

// fakeQueue is the continuation queue: messages become visible after their
// delay on the test clock, as SQS's do.
type fakeQueue struct {
	clk  *testClock
	mu   sync.Mutex
	msgs []queued
	seq  int
}

type queued struct {
	id      string
	body    string
	visible time.Time
}

func (q *fakeQueue) Send(_ context.Context, url string, body any, delay time.Duration) error {
	if url != fastQueue {
		return fmt.Errorf("unknown queue %s", url)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.msgs = append(q.msgs, queued{id: strconv.Itoa(q.seq), body: string(b), visible: q.clk.Now().Add(delay)})
	return nil
}

// next takes the oldest visible message.
func (q *fakeQueue) next() (queued, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clk.Now()
	for i, m := range q.msgs {
		if !m.visible.After(now) {
			q.msgs = append(q.msgs[:i:i], q.msgs[i+1:]...)
			return m, true
		}
	}
	return queued{}, false
}

type fastEnv struct {
	store   *memstore.Store
	objects *memobjects.Store
	queue   *fakeQueue
	clk     *testClock
	acq     *countingAcquirer
	pay     *countingPay
	p       *batchproc.Processor
	m       *merchant.Merchant
}

func newFastEnv(t testing.TB, tune func(*batchproc.Config), deps ...func(*batchproc.Deps)) *fastEnv {
	t.Helper()
	clk := newTestClock()
	e := &fastEnv{store: memstore.New(), objects: memobjects.New(), queue: &fakeQueue{clk: clk}, clk: clk,
		acq: &countingAcquirer{Provider: sandbox.New(sandbox.Options{Ledger: sandbox.NewMemoryLedger()}), charges: map[string]int{}},
		m:   &merchant.Merchant{ID: "mer_fast", Sandbox: true}}
	e.objects.Now = clk.Now
	e.store.PutMerchant(e.m)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := paycore.New(paycore.Deps{Store: e.store, Provider: e.acq, Sandbox: true, Queue: discardQueue{},
		SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications", Log: quiet})
	e.pay = &countingPay{svc: svc, store: e.store}
	// The invocations' deadline is real time (invocationTimeout) and the
	// clock stands still during one: no reserve before it, and leases that
	// outlive it by the 10 minutes of a long invocation.
	cfg := batchproc.Config{Bucket: fastBucket, ContinueQueueURL: fastQueue, TimeReserve: time.Millisecond, LeaseMargin: 10 * time.Minute}
	if tune != nil {
		tune(&cfg)
	}
	d := batchproc.Deps{Store: e.store, Objects: e.objects, Queue: e.queue, Currencies: currency.Decimals,
		FingerprintKey: testFingerprintKey, Log: quiet, Now: clk.Now,
		Charger: &batchproc.PaymentsCharger{Service: e.pay, Store: e.store, Wait: 10 * time.Second}}
	for _, set := range deps {
		set(&d)
	}
	p, err := batchproc.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	e.p = p
	return e
}

// upload stores content as the merchant's upload name and returns S3's event.
func (e *fastEnv) upload(t testing.TB, name, content string) events.S3Event {
	t.Helper()
	key := batchproc.IncomingPrefix + e.m.ID + "/" + name
	etag, err := e.objects.PutBytes(context.Background(), key, []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	return devstack.UploadNotification(sftpd.UploadEvent{Bucket: fastBucket, Key: key, Size: int64(len(content)), ETag: etag, MerchantID: e.m.ID})
}

// invocationTimeout is a delivery's real time: the function's timeout, so
// that a run waiting for a row lease that only the clock ends (a dead run's,
// on the test clock that stands still during an invocation) fails and is
// retried later, as on AWS. The sweep's runs take milliseconds.
const invocationTimeout = time.Second

func invocation() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), invocationTimeout)
}

// invoke delivers the S3 event as Lambda does: a failed invocation is
// invoked again, twice at most, after 1 and 2 minutes; then the event is
// dropped and the job is the stuck-job recovery's.
func (e *fastEnv) invoke(t testing.TB, ev events.S3Event) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if attempt > 1 {
			e.clk.advance(time.Duration(attempt-1) * time.Minute)
		}
		ctx, cancel := invocation()
		err = e.p.HandleS3(ctx, ev)
		cancel()
		if err == nil {
			return
		}
	}
	t.Logf("the S3 event failed 3 times; Lambda drops it: %v", err)
}

// drain delivers the visible continuations as the event source mapping
// does, a failed one again once its visibility timeout (30 minutes) has
// passed (SQS's redelivery); after 3 receives it goes to the DLQ and its
// job is the stuck-job recovery's.
func (e *fastEnv) drain(t testing.TB) {
	t.Helper()
	for n := 0; ; n++ {
		if n > 2000 {
			t.Fatal("continuations never end")
		}
		m, ok := e.queue.next()
		if !ok {
			return
		}
		for attempt := 1; ; attempt++ {
			ctx, cancel := invocation()
			resp, err := e.p.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: m.id, Body: m.body, EventSource: "aws:sqs"}}})
			cancel()
			if err == nil && len(resp.BatchItemFailures) == 0 {
				break
			}
			if attempt == 3 {
				t.Logf("continuation failed %d times; to the DLQ: %v %+v", attempt, err, resp)
				break
			}
			e.clk.advance(30 * time.Minute)
		}
	}
}

// recover is the stuck-job recovery's schedule: three passes, each once
// the leases have lapsed (11 minutes on), each followed by the queue. A
// pass that fails, or a run it starts that dies, is the next pass's to
// finish, as the schedule runs every minute on AWS.
func (e *fastEnv) recover(t testing.TB) {
	t.Helper()
	for range 3 {
		e.clk.advance(11 * time.Minute)
		ctx, cancel := invocation()
		_, _ = e.p.RecoverStuck(ctx, e.clk.Now())
		cancel()
		e.drain(t)
	}
}

func (e *fastEnv) result(t testing.TB, name string) []resultLine {
	t.Helper()
	b, ok := e.objects.Object(batchproc.ResultKey(e.m.ID, name))
	if !ok {
		t.Fatalf("no result file for %s (bucket: %v)", name, e.objects.Keys(""))
	}
	return parseResult(t, string(b))
}

// checkPaidOnce: every valid line paid once (the service's payments, the
// acquirer's charges by reference), each line's request has exactly its
// one transaction, and the merchant has no request no line names.
func (e *fastEnv) checkPaidOnce(t testing.TB, lines []resultLine, want []expect) {
	t.Helper()
	if n, twice := e.pay.total(); n != validRows(want) || len(twice) > 0 {
		t.Fatalf("%d payments (want %d), paid twice: %v", n, validRows(want), twice)
	}
	named, refs := map[string]bool{}, map[string]bool{}
	for _, l := range lines {
		if l.prID == "" {
			continue
		}
		named[l.prID] = true
		if tx, err := strconv.ParseInt(l.txID, 10, 64); err == nil {
			refs[payment.ChargeReference(tx)] = true
		}
		id, _ := strconv.ParseInt(l.prID, 10, 64)
		txs, err := e.store.TransactionsOfRequest(context.Background(), id)
		if err != nil || len(txs) != 1 || strconv.FormatInt(txs[0].ID, 10) != l.txID {
			t.Errorf("payment request %s: %d transactions (%v), want exactly the result's %s", l.prID, len(txs), err, l.txID)
		}
	}
	// The acquirer keeps one charge per reference (as Stripe's idempotency
	// key does): a resumed attempt may ask again with its reference, but no
	// charge may carry a reference other than the result's transactions'.
	e.acq.mu.Lock()
	for ref := range e.acq.charges {
		if !refs[ref] {
			t.Errorf("the acquirer charged %s, a transaction no result line names", ref)
		}
	}
	e.acq.mu.Unlock()
	for _, r := range e.store.RequestsOf(e.m.ID) {
		if !named[strconv.FormatInt(r.ID, 10)] {
			t.Errorf("payment request %d (%s, reference %s) is named by no result line", r.ID, r.Status, r.ReferenceID)
		}
	}
}

// checkEnded: one job, in state, its work files and the upload gone, no
// open marker.
func (e *fastEnv) checkEnded(t testing.TB, name, state string) {
	t.Helper()
	jobs, err := e.store.BatchJobs(context.Background(), e.m.ID, name)
	if err != nil || len(jobs) != 1 || jobs[0].State != state {
		t.Fatalf("jobs of %s: %d %v; want one %s", name, len(jobs), err, state)
	}
	if keys := e.objects.Keys(batchproc.WorkPrefix); len(keys) != 0 {
		t.Errorf("work files left after the job ended: %v", keys)
	}
	if keys := e.objects.Keys(batchproc.IncomingPrefix); len(keys) != 0 {
		t.Errorf("the upload is left after the job ended: %v", keys)
	}
	if open, _ := e.store.OpenBatchJobsOf(context.Background(), e.m.ID); len(open) != 0 {
		t.Errorf("jobs still listed open: %+v", open)
	}
}

// A mixed file (BOM, CRLF, every kind of line) in one invocation: the
// exact result, every valid row paid once, the job closed and its card
// data gone.
func TestFastMixedFile(t *testing.T) {
	e := newFastEnv(t, nil)
	content, want := mixedFile("fast")
	e.invoke(t, e.upload(t, "mixed.csv", content))
	lines := e.result(t, "mixed.csv")
	checkMixed(t, lines, want)
	e.checkPaidOnce(t, lines, want)
	e.checkEnded(t, "mixed.csv", batch.JobDone)
	if n := len(e.queue.msgs); n != 0 {
		t.Errorf("%d continuations queued by a run that finished", n)
	}
}

// The same file through many invocations (15 lines each), parts of a few
// lines, a hash phase of several runs: the same result as one pass.
func TestFastContinuedFile(t *testing.T) {
	e := newFastEnv(t, func(c *batchproc.Config) {
		c.PartSize, c.Concurrency, c.MaxLinesPerRun, c.MaxHashBytesPerRun = 300, 3, 7, 1000
	})
	content, want := bigMixed(t, 40)
	e.invoke(t, e.upload(t, "cont.csv", content))
	e.drain(t)
	lines := e.result(t, "cont.csv")
	checkLines(t, lines, want)
	e.checkPaidOnce(t, lines, want)
	e.checkEnded(t, "cont.csv", batch.JobDone)
	jobs, _ := e.store.BatchJobs(context.Background(), e.m.ID, "cont.csv")
	if jobs[0].Invocations < 6 || jobs[0].Parts < 6 {
		t.Fatalf("%d invocations, %d parts: the file was not continued", jobs[0].Invocations, jobs[0].Parts)
	}
}

// Thirty deliveries of one upload's event at once: one invocation holds the
// job, the others queue a look for when its lease ends; each row is charged
// once and the file has one result.
func TestFastThirtyDeliveriesOfOneUploadChargeEachRowOnce(t *testing.T) {
	e := newFastEnv(t, func(c *batchproc.Config) { c.Concurrency = 4 })
	e.store.SetLatency(200 * time.Microsecond) // callers interleave between calls
	content, want := bigMixed(t, 20)
	ev := e.upload(t, "thirty.csv", content)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := e.p.HandleS3(context.Background(), ev); err != nil {
				t.Errorf("delivery: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	e.drain(t)
	e.recover(t) // the busy deliveries' looks come due
	lines := e.result(t, "thirty.csv")
	checkLines(t, lines, want)
	e.checkPaidOnce(t, lines, want)
	e.checkEnded(t, "thirty.csv", batch.JobDone)
	jobs, _ := e.store.BatchJobs(context.Background(), e.m.ID, "thirty.csv")
	if jobs[0].Counts.Rows != int64(len(want)) {
		t.Fatalf("job counts %+v, want %d rows", jobs[0].Counts, len(want))
	}
}

// faultAt is one failed call: the n-th call of method on the store or the
// bucket, failing before it applies or after (its answer lost).
type faultAt struct {
	bucket  bool
	method  string
	n       int
	applied bool
}

var errFastInjected = errors.New("injected: the call timed out")

// sweepRun processes a 24-line file that takes several invocations and
// parts, with f injected (nil: none), and drives what AWS does next; it
// returns the calls the run made of each store and bucket method. With
// crash the first invocation dies after its fifth row's charge (no
// clean-up: job and row leases left to lapse), so the run also goes
// through the recovery's takeover of the job and of its rows.
func sweepRun(t *testing.T, crash bool, f *faultAt) (store, bucket map[string]int) {
	t.Helper()
	e := newFastEnv(t, func(c *batchproc.Config) {
		c.PartSize, c.Concurrency, c.MaxLinesPerRun = 300, 3, 15
		if crash {
			c.Concurrency = 1 // the rows in flight at the crash, and so the calls after it, are the same every run
		}
	})
	if crash {
		batchproc.SetCrashHook(e.p, crashAt(crashpoint.BatchAfterRowCharge, 5))
	}
	content, want := bigMixed(t, 24)
	ev := e.upload(t, "faults.csv", content)
	store0, bucket0 := e.store.CallCounts(), e.objects.CallCounts()
	if f != nil {
		switch {
		case f.bucket && f.applied:
			e.objects.CrashAfter(f.method, f.n, errFastInjected)
		case f.bucket:
			e.objects.Fail(f.method, f.n, errFastInjected)
		case f.applied:
			e.store.CrashAfter(f.method, f.n, errFastInjected)
		default:
			e.store.Fail(f.method, f.n, errFastInjected)
		}
	}
	e.invoke(t, ev)
	e.drain(t)
	e.recover(t)
	store, bucket = diff(e.store.CallCounts(), store0), diff(e.objects.CallCounts(), bucket0)
	if f != nil {
		calls := store
		if f.bucket {
			calls = bucket
		}
		if calls[f.method] < f.n {
			// How often a row is taken over or a payment looked up depends
			// on when leases run out: this run made fewer calls than the
			// fault-free one. The run must still end right (checked below);
			// sweep requires every method's fault to fire in some run.
			t.Logf("call %d of %s never came (%d calls)", f.n, f.method, calls[f.method])
		}
	}
	lines := e.result(t, "faults.csv")
	checkLines(t, lines, want)
	e.checkPaidOnce(t, lines, want)
	e.checkEnded(t, "faults.csv", batch.JobDone)
	return store, bucket
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for m, n := range after {
		if n > before[m] {
			out[m] = n - before[m]
		}
	}
	return out
}

// Every call of a run to the store (batch and payment records alike) and
// to the bucket fails in turn, before it applies and after (the answer
// lost): through Lambda's retries of the S3 event, SQS's redelivery of
// continuations and the stuck-job recovery, the file ends with exactly one
// result line per input line, each valid row paid once, no work file or
// upload left, and the job closed.
func TestFastEveryFailedCallLosesNoLine(t *testing.T) {
	t.Run("plain", func(t *testing.T) { sweep(t, false) })
	t.Run("after a crash", func(t *testing.T) { sweep(t, true) })
}

func sweep(t *testing.T, crash bool) {
	var store, bucket map[string]int
	t.Run("no fault", func(t *testing.T) { store, bucket = sweepRun(t, crash, nil) })
	if t.Failed() {
		t.FailNow()
	}
	var faults []faultAt
	for _, side := range []struct {
		bucket bool
		calls  map[string]int
	}{{false, store}, {true, bucket}} {
		methods := make([]string, 0, len(side.calls))
		for m := range side.calls {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			for n := 1; n <= side.calls[m]; n++ {
				for _, applied := range []bool{false, true} {
					faults = append(faults, faultAt{bucket: side.bucket, method: m, n: n, applied: applied})
				}
			}
		}
	}
	t.Logf("%d cases: store calls %v, bucket calls %v", len(faults), store, bucket)
	// The cases spend their time in the processor's retry waits, not on the
	// CPU: 16 at once, whatever -parallel (GOMAXPROCS) is. t.Run may be
	// called from several goroutines.
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := map[string]bool{}
	sem := make(chan struct{}, 16)
	for _, f := range faults {
		where := "store"
		if f.bucket {
			where = "bucket"
		}
		kind := fmt.Sprintf("%s.%s applied=%v", where, f.method, f.applied)
		mu.Lock() // running cases write fired meanwhile
		if _, ok := fired[kind]; !ok {
			fired[kind] = false
		}
		mu.Unlock()
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			t.Run(fmt.Sprintf("%s.%s#%d applied=%v", where, f.method, f.n, f.applied), func(t *testing.T) {
				st, bk := sweepRun(t, crash, &f)
				calls := st
				if f.bucket {
					calls = bk
				}
				if calls[f.method] >= f.n {
					mu.Lock()
					fired[kind] = true
					mu.Unlock()
				}
			})
		}()
	}
	wg.Wait()
	for kind, ok := range fired {
		if !ok {
			t.Errorf("no run's fault on %s fired", kind)
		}
	}
}

// The save that marks the job done applies but its answer is lost: the
// retry of the event finds the job finished and removes the card data it
// left (snapshot, parts, upload) and its open marker at once, without the
// recovery's pass.
func TestFastRetryOfAFinishedJobCleansUpAtOnce(t *testing.T) {
	wrap := &failingJobSave{whenDone: true, applied: true}
	e := newFastEnv(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 300, 2 },
		func(d *batchproc.Deps) { wrap.Store = d.Store; d.Store = wrap })
	content, want := bigMixed(t, 12)
	ev := e.upload(t, "done.csv", content)
	if err := e.p.HandleS3(context.Background(), ev); err == nil || !wrap.failed.Load() {
		t.Fatalf("the done save's answer was not lost: %v", err)
	}
	e.invoke(t, ev)
	lines := e.result(t, "done.csv")
	checkLines(t, lines, want)
	e.checkPaidOnce(t, lines, want)
	e.checkEnded(t, "done.csv", batch.JobDone)
}

// An upload replaced by a newer one before its job took the snapshot (S3
// refuses the copy on its ETag; the emulators ignore that condition, so
// only the fake reaches this): the job fails without a result file and
// without charging, and the newer upload is kept for its own event.
func TestFastReplacedUploadIsNotProcessed(t *testing.T) {
	e := newFastEnv(t, nil)
	content, _ := bigMixed(t, 5)
	first := e.upload(t, "swap.csv", content)
	newer, _ := bigMixed(t, 6)
	e.upload(t, "swap.csv", newer)
	e.invoke(t, first)
	jobs, _ := e.store.BatchJobs(context.Background(), e.m.ID, "swap.csv")
	if len(jobs) != 1 || jobs[0].State != batch.JobFailed || !strings.Contains(jobs[0].Error, "replaced by a newer upload") {
		t.Fatalf("jobs %+v, want one failed as replaced", jobs)
	}
	if _, ok := e.objects.Object(batchproc.ResultKey(e.m.ID, "swap.csv")); ok {
		t.Error("a result file was written for the replaced upload")
	}
	if b, ok := e.objects.Object(batchproc.IncomingPrefix + e.m.ID + "/swap.csv"); !ok || string(b) != newer {
		t.Error("the newer upload was removed")
	}
	if keys := e.objects.Keys(batchproc.WorkPrefix); len(keys) != 0 {
		t.Errorf("work files left: %v", keys)
	}
	if refs, _ := e.acq.total(); refs != 0 || len(e.store.RequestsOf(e.m.ID)) != 0 {
		t.Errorf("the replaced upload charged %d rows", refs)
	}
}
