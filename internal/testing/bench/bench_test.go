//go:build bench

// Package bench measures each path of the service against its ceiling, in
// the same run: the service through the local stack (real HTTP through the
// local API gateway and the Lambda adapter, the batch function's handler,
// the notifier fed by its queue), and a ceiling program that makes the same
// AWS calls directly (no HTTP, no Lambda adapter, no domain logic). It
// prints one table (docs/testing.md): path, ops, service p50/p95/p99,
// ceiling p50/p95/p99, service/ceiling throughput ratio, AWS calls per op
// (counted on the ceiling, whose call lists the budget tests pin to the
// service's). `make bench` runs it:
//
//	go test -tags bench -count=1 -run '^TestBench$' -v -timeout 30m ./internal/testing/bench/
//
// PAYREQ_BENCH_N (default 400) operations per path, PAYREQ_BENCH_CONCURRENCY
// (default 4) clients, PAYREQ_BENCH_ROWS (default 2000) batch rows.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/sftpd"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/batchwire"
)

func TestMain(m *testing.M) {
	// Request logs would drown the table.
	testenv.Options.Env = map[string]string{"LOG_LEVEL": "WARN"}
	testenv.Main(m)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// run is one measured load: latencies of every operation and the wall time.
type run struct {
	lat   []time.Duration
	took  time.Duration
	calls float64 // AWS calls per operation of the service's own (ceiling only)
	acq   float64 // calls per operation that stand for the acquirer (the sandbox ledger)
}

func (r run) q(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func (r run) rate() float64 { return float64(len(r.lat)) / r.took.Seconds() }

// load runs op n times on conc workers.
func load(t *testing.T, n, conc int, op func(i int) error) run {
	t.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				s := time.Now()
				if err := op(i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(s)
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return run{lat: lat, took: time.Since(start)}
}

// directPayment pays like the service's client does, through an own
// instance of the payments function's Lambda handler (its template
// environment, the local stack's emulators) invoked in-process with the
// event the local gateway builds: the payment without the local gateway
// and its TCP hop.
func directPayment(t *testing.T, ctx context.Context, st *devstack.Stack, apiKey string, body any) func() (map[string]any, error) {
	t.Helper()
	const fn = "PaymentsFunction"
	env, err := st.Resources.Env(fn)
	if err != nil {
		t.Fatal(err)
	}
	env["LOG_LEVEL"] = "WARN"
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := devstack.Functions[fn].Build(ctx, func(k string) string { return env[k] }, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(body)
	timeout := st.Resources.Timeout(fn)
	return func() (map[string]any, error) {
		req := httptest.NewRequest("POST", st.Info.APIBase+"/payments/h2h/27", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", apiKey)
		req.SetPathValue("n", "27")
		payload, err := json.Marshal(devstack.ToEvent(req, "POST /payments/h2h/{n}", []string{"n"}, raw))
		if err != nil {
			return nil, err
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := devstack.InvokeBytes(ctx, h, fn, timeout, payload, &resp); err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("payment: %d %s", resp.StatusCode, resp.Body)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
			return nil, err
		}
		if out["transactionStatusId"] != 1.0 {
			return nil, fmt.Errorf("payment not approved: %v", out)
		}
		return out, nil
	}
}

type row struct {
	path             string
	ops              int
	service, ceiling run
	latency          bool // p50/p95/p99 mean something per operation
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

// table prints the stable table (columns and their order are part of the
// documented output format).
func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %6s | %7s %7s %7s | %7s %7s %7s | %8s %8s %6s | %8s %6s\n", "path", "ops",
		"svc p50", "p95", "p99", "ceil p50", "p95", "p99", "svc/s", "ceil/s", "ratio", "calls/op", "+acq")
	for _, r := range rows {
		lat := func(x run) [3]string {
			if !r.latency {
				return [3]string{"-", "-", "-"}
			}
			return [3]string{ms(x.q(.5)), ms(x.q(.95)), ms(x.q(.99))}
		}
		s, c := lat(r.service), lat(r.ceiling)
		fmt.Fprintf(&b, "%-18s %6d | %7s %7s %7s | %8s %7s %7s | %8.0f %8.0f %6.2f | %8.2f %6.2f\n", r.path, r.ops,
			s[0], s[1], s[2], c[0], c[1], c[2], r.service.rate(), r.ceiling.rate(), r.service.rate()/r.ceiling.rate(), r.ceiling.calls, r.ceiling.acq)
	}
	return b.String()
}

// receiver is the merchant's notification endpoint: it records when each
// transaction's notification arrived.
type receiver struct {
	mu   sync.Mutex
	got  map[int64]time.Time
	more chan struct{}
}

func (rc *receiver) reset() { rc.mu.Lock(); rc.got = map[int64]time.Time{}; rc.mu.Unlock() }

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The merchant's format: form (the default) or JSON.
	var body map[string]any
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		_ = r.ParseForm()
		body = map[string]any{"transactionId": r.PostForm.Get("transactionId")}
	} else {
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body)
	}
	id := txIDOf(body)
	rc.mu.Lock()
	if _, ok := rc.got[id]; !ok && id != 0 {
		rc.got[id] = time.Now()
	}
	rc.mu.Unlock()
	select {
	case rc.more <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusOK)
}

func txIDOf(body map[string]any) int64 {
	for _, k := range []string{"transactionId", "paymentId"} {
		switch v := body[k].(type) {
		case float64:
			return int64(v)
		case string:
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	if d, ok := body["data"].(map[string]any); ok {
		return txIDOf(d)
	}
	return 0
}

// arrivals is wait that reports a shortfall as a failure but returns what
// arrived, so the table is still printed.
func (rc *receiver) arrivals(t *testing.T, ids []int64, limit time.Duration) []time.Time {
	t.Helper()
	out, ok := rc.await(ids, limit)
	if !ok {
		t.Errorf("%d of %d notifications arrived within %s", len(out), len(ids), limit)
	}
	return out
}

// wait returns the arrival times of ids' notifications, waiting up to limit.
func (rc *receiver) wait(t *testing.T, ids []int64, limit time.Duration) []time.Time {
	t.Helper()
	out, ok := rc.await(ids, limit)
	if !ok {
		t.Fatalf("%d of %d notifications arrived within %s", len(out), len(ids), limit)
	}
	return out
}

// await collects the arrival times of ids' notifications until all arrived
// (ok) or limit passed.
func (rc *receiver) await(ids []int64, limit time.Duration) ([]time.Time, bool) {
	deadline := time.Now().Add(limit)
	for {
		rc.mu.Lock()
		out := make([]time.Time, 0, len(ids))
		for _, id := range ids {
			if at, ok := rc.got[id]; ok {
				out = append(out, at)
			}
		}
		rc.mu.Unlock()
		if len(out) == len(ids) {
			return out, true
		}
		if time.Now().After(deadline) {
			return out, false
		}
		select {
		case <-rc.more:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestBench(t *testing.T) {
	n, conc, rows := envInt("PAYREQ_BENCH_N", 400), envInt("PAYREQ_BENCH_CONCURRENCY", 4), envInt("PAYREQ_BENCH_ROWS", 2000)
	st := testenv.Stack(t)
	rc := &receiver{got: map[int64]time.Time{}, more: make(chan struct{}, 1)}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	// A budget the load never reaches: the bench measures paths, not limits.
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL, m.RateLimitPerMinute = hook.URL+"/hook", 1_000_000 })
	base := st.Info.APIBase
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	call := func(method, path string, body any, want int) (map[string]any, error) {
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", m.APIKey)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out, nil
	}
	payer := map[string]any{"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
		"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE", "amount": "10.00", "unit": "EUR"}

	cfg, counter := testenv.CountingAWSConfig(t)
	store := dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{Merchants: st.Info.Tables["MerchantsTable"],
		PaymentRequests: st.Info.Tables["PaymentRequestsTable"], Operations: st.Info.Tables["OperationsTable"],
		Transactions: st.Info.Tables["TransactionsTable"]})
	sq := sqs.NewFromConfig(cfg)
	ctx := context.Background()
	qo, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-ceiling-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	ceilQueue := aws.ToString(qo.QueueUrl)
	qo, err = sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-ceiling-aside-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	asideQueue := aws.ToString(qo.QueueUrl) // sends nobody consumes: the one-client and batch ceilings
	rate := func() error {
		now := time.Now()
		w := now.Unix() / 60
		_, err := store.TakeRateLimit(ctx, m.ID, w, 1_000_000, now.Add(2*time.Minute))
		return err
	}
	ceiling := func(name string, conc int, op func(i int) error) run {
		counter.Reset()
		r := load(t, n, conc, op)
		own, acq := counter.Split()
		r.calls, r.acq = float64(len(own))/float64(n), float64(len(acq))/float64(n)
		t.Logf("ceiling %s: %v", name, callSummary(counter.Calls()))
		return r
	}
	newRequest := func() *payment.Request {
		now := time.Now().UTC()
		return &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("10.00"),
			Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	}
	var table1 []row
	// The ceiling's notifier (the 4-client payment's and the notification
	// row's) makes its calls through an own client: they stay out of the
	// payment's count, as the stack notifier's calls stay out of the
	// service's.
	uncounted, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	notifierStore := dynamo.New(dynamodb.NewFromConfig(uncounted), dynamo.Tables{Merchants: st.Info.Tables["MerchantsTable"],
		PaymentRequests: st.Info.Tables["PaymentRequestsTable"], Operations: st.Info.Tables["OperationsTable"],
		Transactions: st.Info.Tables["TransactionsTable"]})
	notifierSQS := sqs.NewFromConfig(uncounted)
	payEnv, err := st.Resources.Env("PaymentsFunction")
	if err != nil {
		t.Fatal(err)
	}
	notifyQueue := payEnv["NOTIFICATIONS_QUEUE_URL"]

	// ---- warm-up ----------------------------------------------------------
	// A fresh stack: DynamoDB Local's JVM compiles its hot paths over the
	// first thousands of calls, and the stack's function instances, key
	// caches and connection pools start cold. Whichever side ran first
	// would pay for it (the first row, create, measured 0.27 of its ceiling
	// on a fresh stack): both sides' paths run unmeasured first.
	warm := max(n/2, 50)
	load(t, warm, conc, func(int) error {
		_, err := call("POST", "/payment-requests", map[string]any{"amount": "10.00", "unit": "EUR"}, 201)
		return err
	})
	load(t, warm, conc, func(int) error { return store.CreatePaymentRequest(ctx, newRequest()) })
	load(t, warm, conc, func(int) error {
		_, err := call("POST", "/payments/h2h/27", payer, 200)
		return err
	})
	load(t, warm, conc, func(int) error {
		_, err := ceilingPayment(ctx, store, queue.New(sq), asideQueue, m.ID, newRequest(), nil)
		return err
	})
	drained(t, ctx, notifierSQS, notifyQueue, 2*time.Minute, 20*time.Millisecond) // the warm-up's notifications delivered

	// ---- create, status, checkout session --------------------------------
	created := make([]int64, n)
	svc := load(t, n, conc, func(i int) error {
		out, err := call("POST", "/payment-requests", map[string]any{"amount": "10.00", "unit": "EUR"}, 201)
		if err == nil {
			created[i] = int64(out["id"].(float64))
		}
		return err
	})
	ceilIDs := make([]int64, n)
	cl := ceiling("create", conc, func(i int) error {
		if err := rate(); err != nil {
			return err
		}
		r := newRequest()
		ceilIDs[i] = r.ID
		return store.CreatePaymentRequest(ctx, r)
	})
	table1 = append(table1, row{"create", n, svc, cl, true})
	svc = load(t, n, conc, func(i int) error {
		_, err := call("GET", "/payment-requests/status/"+strconv.FormatInt(created[i], 10), nil, 200)
		return err
	})
	cl = ceiling("status", conc, func(i int) error {
		if err := rate(); err != nil {
			return err
		}
		_, err := store.PaymentRequest(ctx, ceilIDs[i])
		return err
	})
	table1 = append(table1, row{"status", n, svc, cl, true})
	svc = load(t, n, conc, func(i int) error {
		_, err := call("POST", "/payment-requests/"+strconv.FormatInt(created[i], 10)+"/checkout-session", map[string]any{}, 201)
		return err
	})
	cl = ceiling("checkout session", conc, func(i int) error {
		if err := rate(); err != nil {
			return err
		}
		_, err := store.PaymentRequest(ctx, ceilIDs[i])
		return err
	})
	table1 = append(table1, row{"checkout session", n, svc, cl, true})

	// ---- payment (create and pay, approved) and its notification -------
	txs, reqs := make([]int64, n), make([]int64, n)
	svc = load(t, n, conc, func(i int) error {
		out, err := call("POST", "/payments/h2h/27", payer, 200)
		if err == nil {
			if out["transactionStatusId"] != 1.0 {
				return fmt.Errorf("payment not approved: %v", out)
			}
			txs[i], reqs[i] = int64(out["transactionId"].(float64)), int64(out["paymentRequestId"].(float64))
		}
		return err
	})
	// The service's payments share the emulators with the stack's notifier
	// delivering their notifications (a TransactWriteItems each for the
	// dashboard's overview, among others); the ceiling's are delivered
	// meanwhile by a notifier making the notifier's calls, as many at once
	// as the notifier's event source runs (the template's
	// MaximumConcurrency for the interactive queue), so both sides make
	// the same calls on the same emulators.
	events := make([]payment.NotifyEvent, n)
	drainedPay := make(chan error, 1)
	go func() {
		_, err := ceilingNotifier(ctx, notifierStore, notifierSQS, ceilQueue, hook.URL+"/ceiling", n, 10)
		drainedPay <- err
	}()
	cl = ceiling("payment", conc, func(i int) error {
		if err := rate(); err != nil {
			return err
		}
		ev, err := ceilingPayment(ctx, store, queue.New(sq), ceilQueue, m.ID, newRequest(), nil)
		events[i] = ev
		return err
	})
	if err := <-drainedPay; err != nil {
		t.Fatal(err)
	}
	table1 = append(table1, row{"payment", n, svc, cl, true})

	// One client: the service's latency against the sum of the same round
	// trips made back to back (the ceiling's latency). The 4-client
	// payments' notifications are delivered first: their backlog would
	// otherwise share the emulators with the single client's calls.
	rc.wait(t, txs, 2*time.Minute)
	one := max(n/4, 20)
	var txs1 []int64 // the single-client payments, awaited before the notification burst
	pay1 := func(do func() (map[string]any, error)) func(int) error {
		return func(int) error {
			out, err := do()
			if err == nil {
				txs1 = append(txs1, int64(out["transactionId"].(float64)))
			}
			return err
		}
	}
	viaGateway := func() (map[string]any, error) { return call("POST", "/payments/h2h/27", payer, 200) }
	svc1 := load(t, one, 1, pay1(viaGateway))
	ceilingTo := func(queueURL string) func() error {
		return func() error {
			if err := rate(); err != nil {
				return err
			}
			_, err := ceilingPayment(ctx, store, queue.New(sq), queueURL, m.ID, newRequest(), nil)
			return err
		}
	}
	// The ceiling's payments are notified as the service's are: a ceiling
	// notifier drains them meanwhile, with the notifier's calls and a POST
	// to the same receiver, so both sides share the emulators with the
	// previous payment's notification.
	qo, err = sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-ceiling-one-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	oneQueue := aws.ToString(qo.QueueUrl)
	notified := make(chan error, 1)
	go func() {
		_, err := ceilingNotifier(ctx, notifierStore, notifierSQS, oneQueue, hook.URL+"/ceiling", one, 1)
		notified <- err
	}()
	counter.Reset()
	cl1 := load(t, one, 1, func(int) error { return ceilingTo(oneQueue)() })
	own1, acq1 := counter.Split()
	if err := <-notified; err != nil {
		t.Fatal(err)
	}
	ceilingOne := ceilingTo(asideQueue) // not notified: the idle rows' ceiling
	cl1.calls, cl1.acq = float64(len(own1))/float64(one), float64(len(acq1))/float64(one)
	// The same single client, split by what the local stack adds around
	// the payment's calls (docs/testing.md): "1 client, idle" starts each
	// payment once the notifier has finished the previous one's
	// notification (delivered, message deleted), so the local notifier
	// does not share the emulators with it (on AWS it runs on its own); "1 client, no gw" is that and no local gateway either:
	// the function's Lambda handler invoked in-process with the event
	// bytes the gateway would build. Both alternate with a ceiling payment
	// made the same way, so the machine's load hits the three alike.
	queues := notifierSQS
	idle := func() {
		if len(txs1) == 0 {
			return
		}
		// Delivered, and the notifier's writes after the delivery done: it
		// deletes the message last.
		rc.wait(t, txs1[len(txs1)-1:], time.Minute)
		drained(t, ctx, queues, notifyQueue, time.Minute, 2*time.Millisecond)
	}
	direct := pay1(directPayment(t, ctx, st, m.APIKey, payer))
	for i := 0; i < 5; i++ { // a warm instance, like the stack's
		if err := direct(i); err != nil {
			t.Fatal(err)
		}
	}
	ceilIdle, svcIdle, svcNoGW := run{}, run{}, run{}
	for i := 0; i < one; i++ {
		for _, x := range []struct {
			r  *run
			op func(int) error
		}{{&ceilIdle, func(int) error { return ceilingOne() }}, {&svcIdle, pay1(viaGateway)}, {&svcNoGW, direct}} {
			idle()
			s := time.Now()
			if err := x.op(i); err != nil {
				t.Fatal(err)
			}
			x.r.lat = append(x.r.lat, time.Since(s))
			x.r.took += time.Since(s)
		}
	}
	ceilIdle.calls, ceilIdle.acq = cl1.calls, cl1.acq

	// Notifications, from a backlog on both sides: the payments' own
	// notifications are awaited first (the notifier idle again), then the
	// same n events are put on the queue the payments function sends to
	// (the seam: its NOTIFICATIONS_QUEUE_URL, whatever the notifier's queues
	// and pollers behind it) in one burst; latency is from the burst's start
	// to the merchant receiving each. The ceiling drains the same kind of
	// backlog of its own payments (delivered once during the payment row)
	// from its own queue.
	rc.wait(t, txs1, 2*time.Minute)
	rc.reset()
	// Each event is another event of its transaction (delivered again), put
	// in the outbox as a settle leaves it, so the notifier clears it as it
	// clears a first delivery's.
	burstEvents := make([]payment.NotifyEvent, n)
	for k := range burstEvents {
		ev, err := payment.NewNotifyEvent(&payment.Request{ID: reqs[k], MerchantID: m.ID}, txs[k], payment.TxApproved,
			payment.LastLog{TransactionStatusID: payment.TxApproved, Message: "Approved"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ev.EventID += "_bench"
		ev.PaymentRequestStatusID = payment.RequestPaid
		if err := store.PutOutbox(ctx, ev, time.Now()); err != nil {
			t.Fatal(err)
		}
		burstEvents[k] = ev
	}
	burst := time.Now()
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for k := i; k < min(i+10, n); k++ {
			body, _ := json.Marshal(burstEvents[k])
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), MessageBody: aws.String(string(body))})
		}
		out, err := sq.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &notifyQueue, Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("notification burst: %d messages refused: %+v", len(out.Failed), out.Failed)
		}
	}
	notifySvc := run{}
	last := burst
	for _, at := range rc.arrivals(t, txs, 2*time.Minute) {
		notifySvc.lat = append(notifySvc.lat, at.Sub(burst))
		if at.After(last) {
			last = at
		}
	}
	notifySvc.took = last.Sub(burst)
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for k := i; k < min(i+10, n); k++ {
			ev := events[k]
			ev.EventID += "_bench"
			if err := store.PutOutbox(ctx, ev, time.Now()); err != nil {
				t.Fatal(err)
			}
			events[k] = ev
			body, _ := json.Marshal(ev)
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), MessageBody: aws.String(string(body))})
		}
		out, err := sq.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &ceilQueue, Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("ceiling notification backlog: %d messages refused: %+v", len(out.Failed), out.Failed)
		}
	}
	counter.Reset()
	// As many receivers as the notifier's event source may run at once
	// (the template's MaximumConcurrency for the interactive queue).
	notifyCeil, err := ceilingNotifier(ctx, store, sq, ceilQueue, hook.URL+"/ceiling", len(events), 10)
	if err != nil {
		t.Fatal(err)
	}
	ownN, acqN := counter.Split()
	notifyCeil.calls, notifyCeil.acq = float64(len(ownN))/float64(len(events)), float64(len(acqN))/float64(len(events))
	t.Logf("ceiling notification: %v", callSummary(counter.Calls()))
	table1 = append(table1, row{"payment, 1 client", one, svc1, cl1, true},
		row{"1 client, idle", one, svcIdle, ceilIdle, true}, row{"1 client, no gw", one, svcNoGW, ceilIdle, true})
	table1 = append(table1, row{"notification", len(notifySvc.lat), notifySvc, notifyCeil, true})

	// ---- batch rows -----------------------------------------------------
	svcBatch, ceilBatch := benchBatch(t, ctx, st, store, sq, asideQueue, counter, rows)
	table1 = append(table1, row{"batch row", rows, svcBatch, ceilBatch, false})

	out := table(table1)
	// The single client's target is a latency one: p50 against the sum of
	// its round trips (the ceiling's p50).
	out += "\np50 service/ceiling:"
	for _, r := range table1 {
		if r.path == "payment, 1 client" || strings.HasPrefix(r.path, "1 client") {
			out += fmt.Sprintf(" %s %.2f;", r.path, float64(r.service.q(.5))/float64(r.ceiling.q(.5)))
		}
	}
	out = strings.TrimSuffix(out, ";") + "\n"
	t.Logf("local stack (DynamoDB %s, SQS and S3 %s), %d ops per path, %d clients, %d batch rows; latencies in ms\n%s",
		st.Info.Endpoints.DynamoDB, st.Info.Endpoints.SQS, n, conc, rows, out)
	fmt.Print("\n" + out)
}

// drained waits until queueURL holds no message, waiting or in flight,
// asking every poll for at most limit.
func drained(t *testing.T, ctx context.Context, sq *sqs.Client, queueURL string, limit, poll time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); ; {
		a, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		if a.Attributes["ApproximateNumberOfMessages"] == "0" && a.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s not drained: %v", queueURL, a.Attributes)
		}
		time.Sleep(poll)
	}
}

func callSummary(calls []string) string {
	by := map[string]int{}
	for _, c := range calls {
		by[c]++
	}
	var parts []string
	for k, v := range by {
		parts = append(parts, k+"="+strconv.Itoa(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// ceilingPayment makes an approved create-and-pay's AWS calls: the request
// (leased) with its write-ahead transaction, the sandbox acquirer's ledger
// entry, request commit + transaction settle, the notification send. claim,
// when set, is written first (a batch row's claim).
func ceilingPayment(ctx context.Context, store *dynamo.Store, sq sender, queueURL, merchantID string, r *payment.Request, claim *batch.RowRecord) (payment.NotifyEvent, error) {
	now := time.Now().UTC()
	if claim != nil {
		if _, err := store.ClaimBatchRow(ctx, claim, now); err != nil {
			return payment.NotifyEvent{}, err
		}
	}
	txID := ids.New(now)
	tx := &payment.Transaction{ID: txID, Number: paycore.NewTransactionNumber(), PaymentRequestID: r.ID, MerchantID: merchantID,
		Status: payment.TxWaiting, Method: string(provider.MethodAlternative), Amount: r.Amount, Unit: r.Unit,
		CreatedAt: now, UpdatedAt: now, Reference: payment.ChargeReference(txID), RecoverAfter: now.Add(30 * time.Second)}
	if err := store.CreateLeasedRequestWithTransaction(ctx, r, tx, now.Add(30*time.Second)); err != nil {
		return payment.NotifyEvent{}, err
	}
	if _, _, err := store.PutLedgerEntry(ctx, ledger.Entry{Reference: tx.Reference, Kind: ledger.KindCharge, TransactionID: txID,
		Method: provider.MethodAlternative, Amount: r.Amount.String(), Unit: r.Unit, Status: provider.Approved,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		return payment.NotifyEvent{}, err
	}
	ll := payment.LastLog{TransactionStatusID: payment.TxApproved, Message: "Approved"}
	ev, err := payment.NewNotifyEvent(&payment.Request{ID: r.ID, MerchantID: merchantID}, txID, payment.TxApproved, ll, now)
	if err != nil {
		return ev, err
	}
	ev.PaymentRequestStatusID = payment.RequestPaid
	if err := store.CommitAndSettle(ctx,
		payment.AttemptCommit{RequestID: r.ID, TransactionID: txID, TransactionNumber: tx.Number, Status: payment.TxApproved, Message: "Approved", Now: now},
		payment.Settlement{TransactionID: txID, Status: payment.TxApproved, Message: "Approved", Event: ev, Now: now}); err != nil {
		return ev, err
	}
	return ev, sq.Send(ctx, queueURL, ev, 0)
}

// sender is how a ceiling sends its notification: one SendMessage per
// payment (queue.Client), as the API functions do, or coalesced
// (queue.Coalescer), as the batch function does.
type sender interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// ceilingNotifier drains count notifications with the notifier's AWS calls:
// receive (10 at a time), then for the messages of a receive one read of
// their transactions, requests and merchants, the POSTs to the merchant at
// once (none when hookURL is empty: a merchant without a notify URL), one
// write of their delivery records with their outbox clears, and one batch
// delete. Latency is from the drain's start to each POST's answer.
func ceilingNotifier(ctx context.Context, store *dynamo.Store, sq *sqs.Client, queueURL, hookURL string, count, conc int) (run, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var done atomic.Int64
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Value
	handle := func(msgs []sqstypes.Message) error {
		evs := make([]payment.NotifyEvent, len(msgs))
		for i, msg := range msgs {
			if err := json.Unmarshal([]byte(aws.ToString(msg.Body)), &evs[i]); err != nil {
				return err
			}
		}
		subjects, err := store.NotificationSubjects(ctx, evs)
		if err != nil {
			return err
		}
		writes := make([]payment.DeliveryWrite, len(evs))
		var posts sync.WaitGroup
		for i, ev := range evs {
			sub := subjects[ev.TransactionID]
			if sub.Transaction == nil || sub.Request == nil || sub.Merchant == nil {
				return fmt.Errorf("ceiling notification %s: missing state", ev.EventID)
			}
			writes[i] = payment.DeliveryWrite{Attempt: payment.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID, Attempt: 1,
				URL: hookURL, Outcome: "skipped"}, ClearOutboxOf: ev.TransactionID}
			posts.Add(1)
			go func() {
				defer posts.Done()
				w := &writes[i]
				// The first attempt adds the transaction to the dashboard's overview, as the notifier does.
				if _, err := store.AggregateSettled(ctx, sub.Transaction, time.Now()); err != nil {
					failed.Store(err)
					return
				}
				if hookURL != "" {
					body, _ := json.Marshal(map[string]any{"transactionId": ev.TransactionID, "paymentRequestId": ev.RequestID,
						"transactionStatusId": sub.Transaction.Status})
					resp, err := client.Post(hookURL, "application/json", bytes.NewReader(body))
					if err != nil {
						failed.Store(err)
						return
					}
					resp.Body.Close()
					w.Attempt.StatusCode, w.Attempt.Outcome = resp.StatusCode, "delivered"
				}
				w.Attempt.At = time.Now().UTC()
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			}()
		}
		posts.Wait()
		return errors.Join(store.RecordDeliveries(ctx, writes)...)
	}
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(count) && time.Since(start) < 20*time.Minute && failed.Load() == nil {
				out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil {
					failed.Store(err)
					return
				}
				if len(out.Messages) == 0 {
					continue
				}
				if err := handle(out.Messages); err != nil {
					failed.Store(err)
					return
				}
				var del []sqstypes.DeleteMessageBatchRequestEntry
				for k, msg := range out.Messages {
					del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), ReceiptHandle: msg.ReceiptHandle})
				}
				if _, err := sq.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &queueURL, Entries: del}); err != nil {
					failed.Store(err)
					return
				}
				done.Add(int64(len(del)))
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return run{}, err
	}
	if done.Load() != int64(count) {
		return run{}, fmt.Errorf("ceiling notifier delivered %d of %d", done.Load(), count)
	}
	return run{lat: lat, took: time.Since(start)}, nil
}

// benchBatch charges a file of rows through the batch function's handler
// (one invocation, as deployed, continuations drained by the stack) and the
// same rows' AWS calls directly: claims (25 rows per write), request +
// write-ahead transaction, ledger, commit + settle, notification send
// (coalesced), one result write per 25 rows, and the notifier's calls for each row's notification, drained
// meanwhile (the merchant has no notify URL: recorded as skipped). Both
// sides are timed until every row is charged and every notification
// handled: the notifier shares the emulators with the rows on both.
func benchBatch(t *testing.T, ctx context.Context, st *devstack.Stack, store *dynamo.Store, sq *sqs.Client, queueURL string,
	counter *testenv.CallCounter, rows int) (run, run) {
	t.Helper()
	env, err := st.Resources.Env("BatchFunction")
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"] = "1"
	cfg, _ := testenv.CountingAWSConfig(t) // an own client: the ceiling's counter stays clean
	p, err := batchwire.Batch(ctx, func(k string) string { return env[k] }, wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	m := testenv.NewMerchant(t)
	var b strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "Holder %d;4111 1111 1111 1111;12/30;123;payer@example.com;4155550100;1 Main St;Springfield;IL;62701;US;10.50;EUR;BENCH-%d\n", i, i)
	}
	objects := s3store.New(s3store.NewClient(cfg), env["BATCH_BUCKET"])
	key := batchproc.IncomingPrefix + m.ID + "/bench.csv"
	etag, err := objects.PutBytes(ctx, key, []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	ev := devstack.UploadNotification(sftpd.UploadEvent{Bucket: env["BATCH_BUCKET"], Key: key, Size: int64(b.Len()), ETag: etag, MerchantID: m.ID})
	start := time.Now()
	if err := p.HandleS3(ctx, ev); err != nil {
		t.Fatal(err)
	}
	for {
		rc, err := objects.Get(ctx, batchproc.ResultKey(m.ID, "bench.csv"))
		if err == nil {
			rc.Close()
			break
		}
		if time.Since(start) > 20*time.Minute {
			t.Fatalf("no batch result after %s: %v", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	drained(t, ctx, sq, env["BATCH_NOTIFICATIONS_QUEUE_URL"], 20*time.Minute, 20*time.Millisecond)
	svc := run{lat: make([]time.Duration, rows), took: time.Since(start)}

	qo, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-ceiling-batch-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	queueURL = aws.ToString(qo.QueueUrl)
	coalesced := queue.NewCoalescer(sq)
	counter.Reset()
	notified := make(chan error, 1)
	go func() { // the batch notifier's concurrency in the template
		_, err := ceilingNotifier(ctx, store, sq, queueURL, "", rows, 5)
		notified <- err
	}()
	var wg sync.WaitGroup
	var failed atomic.Value
	var mu sync.Mutex
	var done []*batch.RowRecord
	start = time.Now()
	workers, err := strconv.Atoi(env["BATCH_CONCURRENCY"])
	if err != nil {
		t.Fatalf("BATCH_CONCURRENCY: %v", err)
	}
	// A producer claims the rows 25 at a time (one TransactWriteItems, as
	// the batch's producer does) and hands them to the row workers.
	type claimed struct {
		r     *payment.Request
		claim *batch.RowRecord
	}
	work := make(chan claimed, 2*workers)
	go func() {
		defer close(work)
		for i := 1; i <= rows && failed.Load() == nil; i += 25 {
			now := time.Now().UTC()
			var group []claimed
			var recs []*batch.RowRecord
			for k := i; k < i+25 && k <= rows; k++ {
				r := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("10.50"),
					Unit: "EUR", ReferenceID: "CEIL-" + strconv.Itoa(k), CreatedAt: now, UpdatedAt: now}
				c := &batch.RowRecord{MerchantID: m.ID, Key: batch.RowKeyOfReference(r.ReferenceID + "-" + strconv.FormatInt(start.UnixNano(), 36)),
					JobID: "ceiling", File: "ceiling.csv", Row: k, PaymentRequestID: r.ID, Owner: "ceiling",
					LeaseUntil: now.Add(time.Minute).UnixMilli(), CreatedAt: now, ExpiresAt: now.Add(time.Hour).Unix()}
				group, recs = append(group, claimed{r, c}), append(recs, c)
			}
			if _, err := store.ClaimBatchRows(ctx, recs, now); err != nil {
				failed.Store(err)
				return
			}
			for _, c := range group {
				work <- c
			}
		}
	}()
	for w := 0; w < workers; w++ { // the batch's row concurrency
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if _, err := ceilingPayment(ctx, store, coalesced, queueURL, m.ID, c.r, nil); err != nil {
					failed.Store(err)
					return
				}
				c.claim.Status = "approved"
				mu.Lock()
				done = append(done, c.claim)
				var full []*batch.RowRecord
				if len(done) >= 25 {
					full, done = done, nil
				}
				mu.Unlock()
				if full != nil {
					if err := store.CompleteBatchRows(ctx, full); err != nil {
						failed.Store(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	if len(done) > 0 {
		if err := store.CompleteBatchRows(ctx, done); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-notified; err != nil {
		t.Fatal(err)
	}
	own, acq := counter.Split()
	ceil := run{lat: make([]time.Duration, rows), took: time.Since(start), calls: float64(len(own)) / float64(rows), acq: float64(len(acq)) / float64(rows)}
	t.Logf("ceiling batch row: %v", callSummary(counter.Calls()))
	return svc, ceil
}
