//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paymentswire"
)

// TestProfilePaymentConcurrent splits the payment path with several clients
// (PAYREQ_BENCH_CONCURRENCY, 4) by what shares the emulators with it: the
// stack's own instance through HTTP, an own instance of the payments
// handler (AWS calls timed) whose notifications the stack's notifier
// delivers meanwhile, the same handler sending its notifications to a
// queue nobody drains, and the ceiling both ways (not drained; drained
// meanwhile by a notifier making the notifier's calls). Stages alternate
// over two rounds so the machine's load hits each alike. With
// PAYREQ_BENCH_PROFILE=<dir> it writes CPU and block profiles of the
// handler stages.
//
//	go test -tags bench -count=1 -run '^TestProfilePaymentConcurrent$' -v ./internal/testing/bench/
func TestProfilePaymentConcurrent(t *testing.T) {
	n, conc := envInt("PAYREQ_BENCH_N", 400), envInt("PAYREQ_BENCH_CONCURRENCY", 4)
	st := testenv.Stack(t)
	rc := &receiver{got: map[int64]time.Time{}, more: make(chan struct{}, 1)}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL, m.RateLimitPerMinute = hook.URL+"/hook", 1_000_000 })
	ctx := context.Background()

	cfg, counter := testenv.CountingAWSConfig(t)
	clock := &awsClock{}
	clock.instrument(&cfg)
	sq := sqs.NewFromConfig(cfg)
	newQueue := func(name string) string {
		qo, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-" + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(qo.QueueUrl)
	}
	aside := newQueue("aside")
	handler := func(notifyQueue string) http.Handler {
		env, err := st.Resources.Env("PaymentsFunction")
		if err != nil {
			t.Fatal(err)
		}
		env["LOG_LEVEL"] = "WARN"
		if notifyQueue != "" {
			env["NOTIFICATIONS_QUEUE_URL"] = notifyQueue
		}
		h, err := paymentswire.Payments(ctx, func(k string) string { return env[k] }, wire.Options{AWSConfig: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	notified, undrained := handler(""), handler(aside)
	payer := map[string]any{"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
		"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE", "amount": "10.00", "unit": "EUR"}
	body, _ := json.Marshal(payer)
	newReq := func(base string) *http.Request {
		req, _ := http.NewRequest("POST", base+"/payments/h2h/27", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", m.APIKey)
		return req
	}
	check := func(status int, raw []byte) error {
		if status != 200 || !bytes.Contains(raw, []byte(`"transactionStatusId":1`)) {
			return fmt.Errorf("payment: %d %s", status, raw)
		}
		return nil
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	viaStack := func(int) error {
		resp, err := client.Do(newReq(st.Info.APIBase))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return check(resp.StatusCode, raw)
	}
	viaHandler := func(h http.Handler) func(int) error {
		return func(int) error {
			rec := httptest.NewRecorder()
			req := newReq("http://127.0.0.1:1")
			req.RemoteAddr = "127.0.0.1:50000"
			h.ServeHTTP(rec, req)
			return check(rec.Code, rec.Body.Bytes())
		}
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{Merchants: st.Info.Tables["MerchantsTable"],
		PaymentRequests: st.Info.Tables["PaymentRequestsTable"], Operations: st.Info.Tables["OperationsTable"],
		Transactions: st.Info.Tables["TransactionsTable"]})
	ceilingTo := func(queueURL string) func(int) error {
		return func(int) error {
			now := time.Now()
			if _, err := store.TakeRateLimit(ctx, m.ID, now.Unix()/60, 1_000_000, now.Add(2*time.Minute)); err != nil {
				return err
			}
			r := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("10.00"),
				Unit: "EUR", CreatedAt: now.UTC(), UpdatedAt: now.UTC()}
			_, err := ceilingPayment(ctx, store, queue.New(sq), queueURL, m.ID, r, nil)
			return err
		}
	}
	// The ceiling notifier's calls go through an own, untimed client.
	uncounted, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	notifierStore := dynamo.New(dynamodb.NewFromConfig(uncounted), dynamo.Tables{Merchants: st.Info.Tables["MerchantsTable"],
		PaymentRequests: st.Info.Tables["PaymentRequestsTable"], Operations: st.Info.Tables["OperationsTable"],
		Transactions: st.Info.Tables["TransactionsTable"]})
	payEnv, _ := st.Resources.Env("PaymentsFunction")
	stackQueue := payEnv["NOTIFICATIONS_QUEUE_URL"]
	plainSQS := sqs.NewFromConfig(uncounted)

	type stage struct {
		name    string
		op      func(int) error
		drain   bool // a ceiling notifier drains the stage's queue meanwhile
		queue   string
		profile bool
		runs    []run
		sdk     time.Duration
		rtt     time.Duration
		calls   int
		ops     map[string][]time.Duration
		own     []string
	}
	drainedQueue := newQueue("drained")
	stages := []*stage{
		{name: "stack HTTP, notified", op: viaStack},
		{name: "handler, notified", op: viaHandler(notified), profile: true},
		{name: "handler, not drained", op: viaHandler(undrained), profile: true},
		{name: "ceiling, not drained", op: ceilingTo(aside)},
		{name: "ceiling, drained", op: ceilingTo(drainedQueue), drain: true, queue: drainedQueue},
	}
	for _, s := range stages { // warm
		for i := 0; i < 10; i++ {
			if err := s.op(i); err != nil {
				t.Fatal(s.name, err)
			}
		}
	}
	// Warm-up notifications of the drained ceiling: drain them now.
	if _, err := ceilingNotifier(ctx, notifierStore, plainSQS, drainedQueue, hook.URL+"/ceiling", 10, 10); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("PAYREQ_BENCH_PROFILE")
	if dir != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond))
		f, err := os.Create(filepath.Join(dir, "cpu4.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 2; round++ {
		for _, s := range stages {
			// The stack's notifier idle first: its backlog would share the
			// emulators with the next stage.
			drained(t, ctx, plainSQS, stackQueue, 2*time.Minute, 20*time.Millisecond)
			clock.reset()
			clock.ops()
			counter.Reset()
			done := make(chan error, 1)
			if s.drain {
				go func() {
					_, err := ceilingNotifier(ctx, notifierStore, plainSQS, s.queue, hook.URL+"/ceiling", n, 10)
					done <- err
				}()
			}
			r := load(t, n, conc, s.op)
			if s.drain {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			sd, rt, c := clock.read()
			s.sdk, s.rtt, s.calls = s.sdk+sd, s.rtt+rt, s.calls+c
			if s.ops == nil {
				s.ops = map[string][]time.Duration{}
			}
			for op, ds := range clock.ops() {
				s.ops[op] = append(s.ops[op], ds...)
			}
			s.own = counter.Calls()
			s.runs = append(s.runs, r)
		}
	}
	if dir != "" {
		pprof.StopCPUProfile()
		f, _ := os.Create(filepath.Join(dir, "block4.pprof"))
		_ = pprof.Lookup("block").WriteTo(f, 0)
		f.Close()
		runtime.SetBlockProfileRate(0)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-24s %7s %7s %7s %7s %7s %6s | round trip p50 by operation (per op)\n", "stage", "ops/s", "p50", "p95", "sdk/op", "rtt/op", "calls")
	ops := float64(2 * n)
	for _, s := range stages {
		all := run{}
		for _, r := range s.runs {
			all.lat, all.took = append(all.lat, r.lat...), all.took+r.took
		}
		var names []string
		for op := range s.ops {
			names = append(names, op)
		}
		sort.Strings(names)
		var per []string
		for _, op := range names {
			per = append(per, fmt.Sprintf("%s %s×%.1f", op, ms(p50(s.ops[op])), float64(len(s.ops[op]))/ops))
		}
		fmt.Fprintf(&b, "%-24s %7.0f %7s %7s %7s %7s %6.1f | %s\n", s.name, all.rate(), ms(all.q(.5)), ms(all.q(.95)),
			ms(time.Duration(float64(s.sdk)/ops)), ms(time.Duration(float64(s.rtt)/ops)), float64(s.calls)/ops, strings.Join(per, ", "))
		t.Logf("%s calls (last round): %s", s.name, callSummary(s.own))
	}
	t.Logf("approved h2h payment, %d clients, %d ops per stage and round, 2 rounds\n%s", conc, n, b.String())
}
