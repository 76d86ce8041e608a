// Package lostanswer loses, in turn, the answer to each DynamoDB write of
// every path a user takes that writes (docs/lost-answers.md). The local
// stack's fault proxy lets the n-th write reach DynamoDB Local, which
// applies it, and answers 500 instead: the SDK sends the call again and
// meets its own write. For n from 1 to the path's last write, the sweep
// checks that the first answer is the one the call deserved (no 409, no
// 5xx, no second object), that every payment is charged and notified once,
// that no notification contradicts an earlier one, and, once per path, that
// the invariant audit is clean.
package lostanswer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

var delays = map[string]string{
	"SANDBOX_UPI_DELAY":          "100ms",
	"SANDBOX_QR_DELAY":           "100ms",
	"SANDBOX_UPI_COLLECT_WINDOW": "300ms",
	"THREEDS_CHALLENGE_WINDOW":   "10s",
	"PAYMENT_PENDING_GRACE":      "500ms",
}

func TestMain(m *testing.M) {
	for k, v := range delays {
		os.Setenv(k, v)
	}
	testenv.Options.Faults = true
	// The reconciler stays quiet: its writes would shift the sweep's count.
	testenv.Options.ScheduleEvery = time.Hour
	// Its own tables, so that the audit judges this package's records only
	// (emulators shared with other packages keep theirs).
	testenv.Options.StackName = fmt.Sprintf("lost-%d", os.Getpid())
	testenv.Main(m)
}

// receiver records the notifications of every merchant of the sweep.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]notice // by merchant id, in arrival order
}

// notice is one notification as the merchant received it.
type notice struct {
	typ       string // "" for a payment's; refund.*, dispute.* for their own events
	webhookID string
	requestID string
	txID      string
	txStatus  string
	reqStatus string
	at        time.Time
}

var (
	recvOnce sync.Once
	recv     *receiver
)

func notifications(t *testing.T) *receiver {
	recvOnce.Do(func() {
		recv = &receiver{got: map[string][]notice{}}
		recv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			f, _ := url.ParseQuery(string(b))
			recv.mu.Lock()
			mer := strings.TrimPrefix(r.URL.Path, "/n/")
			recv.got[mer] = append(recv.got[mer], notice{typ: f.Get("type"), webhookID: r.Header.Get("webhook-id"), requestID: f.Get("id"),
				txID: f.Get("transactionId"), txStatus: f.Get("transactionStatusId"), reqStatus: f.Get("paymentRequestStatusId"), at: time.Now()})
			recv.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
	})
	return recv
}

func (rv *receiver) of(merchantID string) []notice {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.got[merchantID])
}

// run is one execution of a path: its merchant and what it made.
type run struct {
	t   *testing.T
	stg *stage
	m   testenv.Merchant
	st  *devstack.Stack
	api string
	// what the path made, for its checks
	requestID int64
	vars      map[string]string
}

// path is one thing a user does that writes.
type path struct {
	name string
	// setup prepares what the path acts on; its writes are not swept.
	setup func(r *run)
	// act makes the user's call(s) and checks each answer is the one the
	// call deserved.
	act func(r *run)
	// want is what the merchant's records must show once act returned.
	want want
}

// want describes the records a run leaves, checked after every run.
type want struct {
	requests     int // payment requests of the merchant
	transactions int // per request
	approved     int // approved transactions per request (0 or 1)
	notified     int // distinct notifications per request (final transactions)
	paid         bool
	// events are the merchant's own events each request must have got
	// once (refund.succeeded, dispute.created).
	events []string
}

func newRun(t *testing.T, stg *stage) *run {
	rv := notifications(t)
	m := stg.newMerchant(t, func(mm *merchant.Merchant) {
		mm.RateLimitPerMinute = 1_000_000
		mm.NotifyURL = rv.srv.URL + "/n/" + mm.ID
	})
	if stg.connect != nil {
		stg.connect(t, m)
	}
	return &run{t: t, stg: stg, m: m, st: stg.st, api: stg.st.Info.APIBase, vars: map[string]string{}}
}

// sweep runs p once to count its writes, then once per write with that
// write's answer lost, checking the path's records after each run and the
// audit at the end.
func sweep(t *testing.T, p path) { sweepOn(t, sandbox(t), p) }

func sweepOn(t *testing.T, stg *stage, p path) {
	faults := stg.faults
	var writes []devstack.Write
	t.Run("no fault", func(t *testing.T) {
		r := newRun(t, stg)
		p.setup(r)
		faults.Record()
		p.act(r)
		check(r, p.want)
		quiet(r)
		writes = faults.Writes()
		for i, w := range writes {
			t.Logf("write %d: %s %v %s", i+1, w.Op, w.Tables, w.Key)
		}
	})
	if len(writes) == 0 {
		t.Fatal("the path made no write")
	}
	// The n-th write is aimed at as the k-th write of its kind (operation
	// and tables): asynchronous work (a notification's delivery) may
	// interleave differently from one run to the next.
	seen, lost := map[string]int{}, map[string]bool{}
	for n := 1; n <= len(writes); n++ {
		w := writes[n-1]
		if strings.HasPrefix(w.Key, "pk=auditdue#") {
			// The audit's schedule, written by its stream consumer whenever
			// its poll comes, inside a run or after it: not the path's write.
			// Its puts and deletes are unconditional, the same item twice.
			continue
		}
		kind := w.Op + " " + strings.Join(w.Tables, ",")
		seen[kind]++
		nth := seen[kind]
		t.Run(fmt.Sprintf("write %d of %d lost (%s)", n, len(writes), w.Op), func(t *testing.T) {
			r := newRun(t, stg)
			p.setup(r)
			faults.Record()
			armed, err := faults.Arm(devstack.Fault{Kind: devstack.FaultLoseAnswer, Op: w.Op, Tables: w.Tables, Nth: nth})
			if err != nil {
				t.Fatal(err)
			}
			defer faults.Disarm()
			p.act(r)
			check(r, p.want)
			quiet(r)
			for _, got := range faults.Writes() {
				if got.Fault != "" {
					t.Logf("lost the answer of %s %v %s", got.Op, got.Tables, got.Key)
				}
			}
			if armed.Fired() == 0 {
				// A write repeated a varying number of times (the status
				// polls' rate-limit counter) may come fewer times.
				t.Logf("this run made fewer than %d writes of %s", nth, kind)
			} else {
				lost[kind] = true
			}
		})
	}
	for kind := range seen {
		if !lost[kind] {
			loseAgain(t, stg, p, kind)
		}
	}
	t.Logf("%s: %d writes, each lost in turn", p.name, len(writes))
	auditClean(t, stg)
}

// loseAgain runs p again, up to twice, losing the answer of the first
// write of kind, for a kind whose aimed run never met it. The recording
// sees every write to the stack's tables, so such a write may be another
// test's background work (a delivery, a lease released) that fell inside
// the first run, or a write the path makes only at some speeds (a
// delivery's retry on a loaded machine): it counts as the path's only if a
// run makes it again, and then that run loses its answer and is checked as
// every other.
func loseAgain(t *testing.T, stg *stage, p path, kind string) {
	for attempt := 1; attempt <= 2; attempt++ {
		fired := false
		t.Run(fmt.Sprintf("again, first %s lost", kind), func(t *testing.T) {
			op, tables, _ := strings.Cut(kind, " ")
			r := newRun(t, stg)
			p.setup(r)
			stg.faults.Record()
			armed, err := stg.faults.Arm(devstack.Fault{Kind: devstack.FaultLoseAnswer, Op: op, Tables: strings.Split(tables, ","), Nth: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer stg.faults.Disarm()
			p.act(r)
			check(r, p.want)
			quiet(r)
			fired = armed.Fired() > 0
		})
		if fired {
			return
		}
	}
	t.Logf("%s came from outside the path (no run made it again): not required", kind)
}

// quiet waits until the run's notifications are all delivered: no outbox
// entry of its merchant is left. The notifier's last write (the delivery's
// record and the entry's clear, one transaction) may land after check saw
// the notification arrive, so a run that reads its writes sooner would miss
// it, and a run aimed at it would end before it came.
func quiet(r *run) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	store := testenv.PatientStore(t, r.st)
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := 0
		for shard := 0; shard < payment.OutboxAllShards; shard++ {
			entries, err := store.DueOutbox(ctx, shard, time.Now().Add(24*time.Hour), 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Event.MerchantID == r.m.ID {
					left++
				}
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("%d outbox entries of the run still wait for their delivery", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check holds the run's records to w.
func check(r *run, w want) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	store := testenv.PatientStore(t, r.st)
	var reqs []*payment.Request
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		reqs, _, err = store.PaymentRequestsOf(ctx, payment.Query{MerchantID: r.m.ID, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) >= w.requests || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the index is eventually consistent
	}
	if len(reqs) != w.requests {
		t.Fatalf("%d payment requests, want %d (a lost answer made a second object?)", len(reqs), w.requests)
	}
	for _, q := range reqs {
		// A request's final state may show (on the status endpoint) a
		// moment before its transaction's: the path writes the request
		// first. The records are judged once they stop moving.
		var problems []string
		var req *payment.Request
		var txs []*payment.Transaction
		deadline := time.Now().Add(15 * time.Second)
		for {
			problems, req, txs = judge(t, r.stg, store, q.ID, w)
			if len(problems) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, p := range problems {
			t.Error(p)
		}
		checkNotified(r, req, txs, w.notified)
		checkEvents(r, req.ID, w.events)
	}
}

// judge reads one request's records and says how they differ from w.
func judge(t *testing.T, stg *stage, store *dynamo.Store, id int64, w want) ([]string, *payment.Request, []*payment.Transaction) {
	t.Helper()
	ctx := context.Background()
	var problems []string
	req, err := store.PaymentRequest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if w.paid != (req.Status == payment.RequestPaid) {
		problems = append(problems, fmt.Sprintf("request %d status %d, want paid=%v", req.ID, req.Status, w.paid))
	}
	txs, err := store.TransactionsOfRequest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(txs) != w.transactions {
		problems = append(problems, fmt.Sprintf("request %d has %d transactions, want %d", id, len(txs), w.transactions))
	}
	approved, taken := 0, 0
	for _, tx := range txs {
		if tx.Status == payment.TxApproved {
			approved++
		}
		taken += stg.charged(ctx, store, tx)
	}
	if approved != w.approved || taken != w.approved {
		problems = append(problems, fmt.Sprintf("request %d: %d approved transactions, %d ledger charges; want %d of each", id, approved, taken, w.approved))
	}
	return problems, req, txs
}

// checkNotified waits for the request's notifications and checks there is
// one per final transaction and none contradicts an earlier one.
func checkNotified(r *run, req *payment.Request, txs []*payment.Transaction, want int) {
	t := r.t
	t.Helper()
	var mine []notice
	deadline := time.Now().Add(15 * time.Second)
	for {
		mine = mine[:0]
		for _, n := range r.stg.notices(r, req.ID) {
			if n.typ == "" {
				mine = append(mine, n)
			}
		}
		if distinct(mine) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := distinct(mine); got != want {
		t.Errorf("request %d: %d distinct notifications, want %d: %+v", req.ID, got, want, mine)
	}
	paid := false
	for _, n := range mine {
		if n.typ != "" {
			continue // a refund's or a dispute's own event says so in its own words
		}
		if paid && (n.reqStatus != "1" || n.txStatus != "1") {
			t.Errorf("request %d: after \"approved, paid\" came %+v", req.ID, n)
		}
		paid = paid || n.reqStatus == "1"
	}
}

// checkEvents waits for the request's own events (refund, dispute) and
// checks each came once.
func checkEvents(r *run, requestID int64, want []string) {
	t := r.t
	t.Helper()
	count := func() map[string]map[string]bool {
		got := map[string]map[string]bool{}
		for _, n := range r.stg.notices(r, requestID) {
			if n.typ != "" {
				if got[n.typ] == nil {
					got[n.typ] = map[string]bool{}
				}
				got[n.typ][n.webhookID] = true
			}
		}
		return got
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, done := count(), true
		for _, typ := range want {
			done = done && len(got[typ]) >= 1
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := count()
	for _, typ := range want {
		if len(got[typ]) != 1 {
			t.Errorf("request %d: %d distinct %s notifications, want 1", requestID, len(got[typ]), typ)
		}
	}
	for typ := range got {
		if !slices.Contains(want, typ) {
			t.Errorf("request %d: unexpected %s notifications %v", requestID, typ, got[typ])
		}
	}
}

func distinct(ns []notice) int {
	ids := map[string]bool{}
	for _, n := range ns {
		ids[n.webhookID] = true
	}
	return len(ids)
}

// auditClean runs the invariant audit over the stage's tables.
func auditClean(t *testing.T, stg *stage) {
	t.Helper()
	rep, err := testenv.PatientStore(t, stg.st).Audit().Sweep(context.Background(), !stg.live, time.Now().Add(audit.DefaultGrace+time.Second),
		audit.DefaultGrace, 4, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("audit: %+v", v)
	}
}
