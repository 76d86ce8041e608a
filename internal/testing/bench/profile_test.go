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
	"net/http/httptrace"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/merchantapiwire"
	"github.com/payreq/payreq/internal/wire/paymentswire"
)

// awsClock sums the time spent in AWS calls made through a config: the
// whole SDK operation (serialize, sign, send, deserialize) and the HTTP
// round trip alone.
type awsClock struct {
	mu       sync.Mutex
	sdk, rtt time.Duration
	calls    int
	newConns int                        // connections the SDK had to open (not reused from its pool)
	byOp     map[string][]time.Duration // round trips by operation
}

func (c *awsClock) reset() {
	c.mu.Lock()
	c.sdk, c.rtt, c.calls, c.newConns = 0, 0, 0, 0
	c.mu.Unlock()
}

func (c *awsClock) ops() map[string][]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.byOp
	c.byOp = map[string][]time.Duration{}
	return out
}

func (c *awsClock) read() (sdk, rtt time.Duration, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sdk, c.rtt, c.calls
}

func (c *awsClock) instrument(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchClockSDK",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				start := time.Now()
				ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
					if !ci.Reused {
						c.mu.Lock()
						c.newConns++
						c.mu.Unlock()
					}
				}})
				out, md, err := next.HandleInitialize(ctx, in)
				c.mu.Lock()
				c.sdk += time.Since(start)
				c.calls++
				c.mu.Unlock()
				return out, md, err
			}), middleware.Before); err != nil {
			return err
		}
		return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("benchClockRTT",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				start := time.Now()
				out, md, err := next.HandleDeserialize(ctx, in)
				d := time.Since(start)
				op := awsmiddleware.GetOperationName(ctx)
				c.mu.Lock()
				c.rtt += d
				if c.byOp == nil {
					c.byOp = map[string][]time.Duration{}
				}
				c.byOp[op] = append(c.byOp[op], d)
				c.mu.Unlock()
				return out, md, err
			}), middleware.After)
	})
}

// layered is one HTTP operation of a function, profiled by layer.
type layered struct {
	what     string // the table's title
	function string // the template's function name
	lambda   func(context.Context, config.Getenv, wire.Options) (wire.HTTPLambda, error)
	handler  func(context.Context, config.Getenv, wire.Options) (http.Handler, error)
	method   string
	path     string   // the request's path
	route    string   // its route key's path, with parameters in braces
	params   []string // the route's parameter names, set from param
	param    func(name string) string
	body     []byte
	status   int
	want     []byte // in the answer's body
	notifies bool   // each operation sends a notification: add the quiet stages
	// ceiling makes the same AWS calls directly through store and sq.
	ceiling func(ctx context.Context, m testenv.Merchant, store *dynamo.Store, sq *sqs.Client, aside string) error
}

// TestProfilePayment profiles a single-client approved create-and-pay and
// splits its latency by layer (profileLayers). With PAYREQ_BENCH_PROFILE=<dir>
// it writes CPU, block and mutex profiles of the loop there.
//
//	go test -tags bench -count=1 -run '^TestProfilePayment$' -v ./internal/testing/bench/
func TestProfilePayment(t *testing.T) {
	payer := map[string]any{"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
		"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE", "amount": "10.00", "unit": "EUR"}
	body, _ := json.Marshal(payer)
	profileLayers(t, layered{what: "single-client approved payment", function: "PaymentsFunction",
		lambda: paymentswire.PaymentsLambda, handler: paymentswire.Payments,
		method: "POST", path: "/payments/h2h/27", route: "/payments/h2h/{n}", params: []string{"n"},
		param: func(string) string { return "27" }, body: body, status: 200, want: []byte(`"transactionStatusId":1`), notifies: true,
		ceiling: func(ctx context.Context, m testenv.Merchant, store *dynamo.Store, sq *sqs.Client, aside string) error {
			r, err := ceilingRate(ctx, store, m)
			if err != nil {
				return err
			}
			_, err = ceilingPayment(ctx, store, queue.New(sq), aside, m.ID, r, nil)
			return err
		}})
}

// TestProfileCreate profiles a single-client create of a payment request
// (POST /payment-requests, the merchant API) by layer, against its ceiling:
// the rate-limit counter and the request's conditional put.
//
//	go test -tags bench -count=1 -run '^TestProfileCreate$' -v ./internal/testing/bench/
func TestProfileCreate(t *testing.T) {
	profileLayers(t, layered{what: "create of a payment request", function: "MerchantApiFunction",
		lambda: merchantapiwire.MerchantAPILambda, handler: merchantapiwire.MerchantAPI,
		method: "POST", path: "/payment-requests", route: "/payment-requests",
		body: []byte(`{"amount":"10.00","unit":"EUR"}`), status: 201, want: []byte(`"id":`),
		ceiling: func(ctx context.Context, m testenv.Merchant, store *dynamo.Store, _ *sqs.Client, _ string) error {
			r, err := ceilingRate(ctx, store, m)
			if err != nil {
				return err
			}
			return store.CreatePaymentRequest(ctx, r)
		}})
}

// ceilingRate takes the merchant's rate-limit counter, as every API call
// does, and returns a new unpaid request of 10.00 EUR.
func ceilingRate(ctx context.Context, store *dynamo.Store, m testenv.Merchant) (*payment.Request, error) {
	now := time.Now()
	if _, err := store.TakeRateLimit(ctx, m.ID, now.Unix()/60, 1_000_000, now.Add(2*time.Minute)); err != nil {
		return nil, err
	}
	return &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("10.00"),
		Unit: "EUR", CreatedAt: now.UTC(), UpdatedAt: now.UTC()}, nil
}

// profileLayers runs op through every layer a request crosses, one
// operation per stage in turn (the machine's load hits every stage alike),
// and logs each stage's p50 split into the SDK's time, the AWS round trips
// and the rest: the stack's shared instance over HTTP, its own instance
// (AWS calls timed) behind the local gateway over HTTP, the gateway without
// TCP, a Lambda invocation with a prepared event, the plain http.Handler,
// and the ceiling.
func profileLayers(t *testing.T, op layered) {
	n := envInt("PAYREQ_BENCH_N", 200)
	st := testenv.Stack(t)
	var hooked, sent atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hooked.Add(1); w.WriteHeader(http.StatusOK) }))
	defer hook.Close()
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL, m.RateLimitPerMinute = hook.URL+"/hook", 1_000_000 })

	cfg, _ := testenv.CountingAWSConfig(t)
	clock := &awsClock{}
	clock.instrument(&cfg)
	env, err := st.Resources.Env(op.function)
	if err != nil {
		t.Fatal(err)
	}
	env["LOG_LEVEL"] = "WARN"
	getenv := func(k string) string { return env[k] }
	ctx := context.Background()
	entry, err := op.lambda(ctx, getenv, wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	lh := lambda.NewHandler(entry)
	timeout := st.Resources.Timeout(op.function)
	gw := devstack.NewGateway(st.Resources.Functions, map[string]devstack.HTTPTarget{op.function: {Handler: lh, Timeout: timeout}})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	hh, err := op.handler(ctx, getenv, wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}

	newReq := func(base string) *http.Request {
		req, _ := http.NewRequest(op.method, base+op.path, bytes.NewReader(op.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", m.APIKey)
		return req
	}
	check := func(status int, raw []byte) error {
		if status != op.status || !bytes.Contains(raw, op.want) {
			return fmt.Errorf("%s %s: %d %s", op.method, op.path, status, raw)
		}
		return nil
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	viaHTTP := func(base string) func() error {
		return func() error {
			resp, err := client.Do(newReq(base))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			return check(resp.StatusCode, raw)
		}
	}
	viaHandler := func(h http.Handler) func() error {
		return func() error {
			rec := httptest.NewRecorder()
			req := newReq("http://127.0.0.1:1")
			req.RemoteAddr = "127.0.0.1:50000"
			h.ServeHTTP(rec, req)
			return check(rec.Code, rec.Body.Bytes())
		}
	}
	// ToEvent reads path parameters from the request's route match, which
	// a request built by hand lacks.
	viaInvokeEvent := func() error {
		req := newReq("http://127.0.0.1:1")
		req.RemoteAddr = "127.0.0.1:50000"
		for _, p := range op.params {
			req.SetPathValue(p, op.param(p))
		}
		payload, _ := json.Marshal(devstack.ToEvent(req, op.method+" "+op.route, op.params, op.body))
		var resp struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := devstack.InvokeBytes(ctx, lh, op.function, timeout, payload, &resp); err != nil {
			return err
		}
		return check(resp.StatusCode, []byte(resp.Body))
	}

	// The ceiling's calls through the same timed config.
	store := dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{Merchants: st.Info.Tables["MerchantsTable"],
		PaymentRequests: st.Info.Tables["PaymentRequestsTable"], Operations: st.Info.Tables["OperationsTable"],
		Transactions: st.Info.Tables["TransactionsTable"]})
	sq := sqs.NewFromConfig(cfg)
	qo, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-profile-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	aside := aws.ToString(qo.QueueUrl)
	ceiling := func() error { return op.ceiling(ctx, m, store, sq, aside) }

	type stage struct {
		name                string
		op                  func() error
		quiet               bool // wait for the operation's notification before the next one
		lat, sdk, rtt, rest []time.Duration
		ops                 map[string][]time.Duration
		calls, conns        int
	}
	stages := []*stage{
		{name: "stack HTTP (shared instance)", op: viaHTTP(st.Info.APIBase)},
		{name: "HTTP + gateway", op: viaHTTP(srv.URL)},
		{name: "HTTP + gateway, quiet", op: viaHTTP(srv.URL), quiet: true},
		{name: "gateway, no TCP", op: viaHandler(gw)},
		{name: "Lambda invoke", op: viaInvokeEvent},
		{name: "http.Handler", op: viaHandler(hh)},
		{name: "http.Handler, quiet", op: viaHandler(hh), quiet: true},
		{name: "ceiling", op: ceiling},
		{name: "ceiling, quiet", op: ceiling, quiet: true},
	}
	if !op.notifies {
		kept := stages[:0]
		for _, s := range stages {
			if !s.quiet {
				kept = append(kept, s)
			}
		}
		stages = kept
	}
	for _, s := range stages { // warm every path
		for i := 0; i < 10; i++ {
			if err := s.op(); err != nil {
				t.Fatal(s.name, err)
			}
			if !strings.HasPrefix(s.name, "ceiling") {
				sent.Add(1)
			}
		}
	}
	quiet := func() {
		// The notifier has delivered everything sent so far (an
		// operation's notification arrives once; the queue is then empty).
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			before := hooked.Load()
			time.Sleep(20 * time.Millisecond)
			if hooked.Load() == before && hooked.Load() >= sent.Load() {
				return
			}
		}
	}
	dir := os.Getenv("PAYREQ_BENCH_PROFILE")
	if dir != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond))
		runtime.SetMutexProfileFraction(1)
		f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		for _, s := range stages {
			if s.quiet {
				quiet()
			}
			clock.reset()
			clock.ops()
			start := time.Now()
			if err := s.op(); err != nil {
				t.Fatal(s.name, err)
			}
			d := time.Since(start)
			if op.notifies && !strings.HasPrefix(s.name, "ceiling") {
				sent.Add(1)
			}
			sd, rt, c := clock.read()
			s.lat, s.sdk, s.rtt, s.rest = append(s.lat, d), append(s.sdk, sd), append(s.rtt, rt), append(s.rest, d-sd)
			s.calls += c
			clock.mu.Lock()
			s.conns += clock.newConns
			clock.mu.Unlock()
			if s.ops == nil {
				s.ops = map[string][]time.Duration{}
			}
			for op, ds := range clock.ops() {
				s.ops[op] = append(s.ops[op], ds...)
			}
		}
	}
	if dir != "" {
		pprof.StopCPUProfile()
		for _, p := range []string{"block", "mutex"} {
			f, _ := os.Create(filepath.Join(dir, p+".pprof"))
			_ = pprof.Lookup(p).WriteTo(f, 0)
			f.Close()
		}
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-30s %7s %7s %7s %7s %5s %5s | round trip p50 by operation\n", "stage", "p50", "sdk", "rtt", "rest", "calls", "conns")
	for _, s := range stages {
		var names []string
		for op := range s.ops {
			names = append(names, op)
		}
		sort.Strings(names)
		var per []string
		for _, op := range names {
			per = append(per, fmt.Sprintf("%s %s×%d", op, ms(p50(s.ops[op])), len(s.ops[op])/n))
		}
		fmt.Fprintf(&b, "%-30s %7s %7s %7s %7s %5.1f %5d | %s\n", s.name, ms(p50(s.lat)), ms(p50(s.sdk)), ms(p50(s.rtt)), ms(p50(s.rest)),
			float64(s.calls)/float64(n), s.conns, strings.Join(per, ", "))
	}
	t.Logf("%s, %d ops per stage (interleaved), ms\n%s", op.what, n, b.String())
}

func p50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)/2]
}
