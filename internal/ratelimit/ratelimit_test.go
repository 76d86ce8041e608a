package ratelimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/problem"
	"github.com/payreq/payreq/internal/ratelimit"
	"github.com/payreq/payreq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clock is a settable injected clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time   { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)  { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func newClock(t time.Time) *clock { return &clock{t: t} }

type harness struct {
	url     string
	limiter *ratelimit.Limiter
	calls   *testenv.CallCounter
	runs    atomic.Int64
}

// newHarness serves auth.Require(limiter.Middleware(handler)) as the lead
// wires it: the real authenticator over the emulator, a limiter whose store
// counts its AWS calls (authentication uses another, uncounted client).
func newHarness(t *testing.T, opts ...func(*dynamo.Tables)) *harness {
	t.Helper()
	st := testenv.Stack(t)
	cfg, calls := testenv.CountingAWSConfig(t)
	tables := dynamo.Tables{
		Merchants:       st.Resources.Tables["MerchantsTable"],
		PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
		Operations:      st.Resources.Tables["OperationsTable"],
	}
	for _, o := range opts {
		o(&tables)
	}
	h := &harness{calls: calls}
	h.limiter = ratelimit.New(dynamo.New(dynamodb.NewFromConfig(cfg), tables))
	auth := apikey.New(st.Store)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.runs.Add(1)
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(httpapi.Wrap(auth.Require(h.limiter.Middleware(handler)), log))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/payment-requests"
	return h
}

func withLimit(n int) func(*merchant.Merchant) {
	return func(m *merchant.Merchant) { m.RateLimitPerMinute = n }
}

// windowStart is a fixed minute far from the real clock, so tests never
// straddle a real window boundary.
var windowStart = time.Date(2031, 3, 4, 10, 0, 0, 0, time.UTC)

func TestHundredAndFirstRequestIsRefused(t *testing.T) {
	h := newHarness(t)
	c := newClock(windowStart.Add(15 * time.Second))
	h.limiter.Now = c.Now
	m := testenv.NewMerchant(t) // default limit: 100

	for i := 1; i <= 100; i++ {
		resp := testenv.Do(t, "GET", h.url, m.APIKey, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
		}
		if got, want := resp.Header.Get("RateLimit-Policy"), `"default";q=100;w=60`; got != want {
			t.Fatalf("request %d: RateLimit-Policy %q, want %q", i, got, want)
		}
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"default";r=%d;t=45`, 100-i); got != want {
			t.Fatalf("request %d: RateLimit %q, want %q", i, got, want)
		}
	}
	resp := testenv.Do(t, "GET", h.url, m.APIKey, nil)
	if resp.Status != http.StatusTooManyRequests {
		t.Fatalf("101st request: %d %s", resp.Status, resp.Body)
	}
	for k, want := range map[string]string{
		"Retry-After":      "45",
		"RateLimit":        `"default";r=0;t=45`,
		"RateLimit-Policy": `"default";q=100;w=60`,
		"Content-Type":     "application/problem+json",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("429 %s = %q, want %q", k, got, want)
		}
	}
	var p problem.Problem
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status != 429 || p.Type != problem.TypeBase+"rate-limited" || p.Title == "" || p.Instance != "/payment-requests" {
		t.Errorf("429 problem = %+v", p)
	}
	if n := h.runs.Load(); n != 100 {
		t.Errorf("handler ran %d times, want 100", n)
	}

	// Later in the same window: still refused, Retry-After counts down
	// (rounded up to whole seconds).
	c.Set(windowStart.Add(59*time.Second + 500*time.Millisecond))
	resp = testenv.Do(t, "POST", h.url, m.APIKey, `{}`)
	if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("RateLimit") != `"default";r=0;t=1` {
		t.Fatalf("end of window: %d Retry-After=%q RateLimit=%q", resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
	}

	// The next window admits again with a full budget.
	c.Set(windowStart.Add(time.Minute))
	resp = testenv.Do(t, "GET", h.url, m.APIKey, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("next window: %d %s", resp.Status, resp.Body)
	}
	if got, want := resp.Header.Get("RateLimit"), `"default";r=99;t=60`; got != want {
		t.Errorf("next window RateLimit %q, want %q", got, want)
	}
	if n := h.runs.Load(); n != 101 {
		t.Errorf("handler ran %d times, want 101", n)
	}
}

func TestMerchantsDoNotShareBudgets(t *testing.T) {
	h := newHarness(t)
	h.limiter.Now = newClock(windowStart.Add(30 * time.Second)).Now
	a := testenv.NewMerchant(t, withLimit(3))
	b := testenv.NewMerchant(t, withLimit(5))

	for i := 0; i < 3; i++ {
		if resp := testenv.Do(t, "GET", h.url, a.APIKey, nil); resp.Status != http.StatusOK {
			t.Fatalf("A request %d: %d", i+1, resp.Status)
		}
	}
	if resp := testenv.Do(t, "GET", h.url, a.APIKey, nil); resp.Status != http.StatusTooManyRequests {
		t.Fatalf("A's 4th request: %d", resp.Status)
	}
	resp := testenv.Do(t, "GET", h.url, b.APIKey, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("B after A is exhausted: %d %s", resp.Status, resp.Body)
	}
	if got, want := resp.Header.Get("RateLimit-Policy"), `"default";q=5;w=60`; got != want {
		t.Errorf("B's RateLimit-Policy %q, want %q (the per-merchant limit)", got, want)
	}
	if got, want := resp.Header.Get("RateLimit"), `"default";r=4;t=30`; got != want {
		t.Errorf("B's RateLimit %q, want %q", got, want)
	}
}

func TestWrongKeyNeverConsumesBudget(t *testing.T) {
	h := newHarness(t)
	h.limiter.Now = newClock(windowStart.Add(10 * time.Second)).Now
	m := testenv.NewMerchant(t, withLimit(2))
	wrong := m.APIKey[:len(m.APIKey)-1] + map[bool]string{true: "B", false: "A"}[m.APIKey[len(m.APIKey)-1] == 'A']

	h.calls.Reset()
	for i := 0; i < 5; i++ {
		resp := testenv.Do(t, "GET", h.url, wrong, nil)
		if resp.Status != http.StatusUnauthorized {
			t.Fatalf("wrong key: %d %s", resp.Status, resp.Body)
		}
		if resp.Header.Get("RateLimit") != "" {
			t.Errorf("a 401 carries RateLimit %q", resp.Header.Get("RateLimit"))
		}
	}
	if resp := testenv.Do(t, "GET", h.url, "", nil); resp.Status != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.Status)
	}
	if calls := h.calls.Calls(); len(calls) != 0 {
		t.Errorf("unauthenticated requests reached the counter: %v", calls)
	}
	for i, want := range []string{`"default";r=1;t=50`, `"default";r=0;t=50`} {
		resp := testenv.Do(t, "GET", h.url, m.APIKey, nil)
		if resp.Status != http.StatusOK || resp.Header.Get("RateLimit") != want {
			t.Fatalf("valid request %d: %d RateLimit %q, want 200 %q", i+1, resp.Status, resp.Header.Get("RateLimit"), want)
		}
	}
}

func TestConcurrentRequestsNeverExceedLimit(t *testing.T) {
	h := newHarness(t)
	m := testenv.NewMerchant(t, withLimit(20))
	// Warm the authenticator's cache so all 50 race on the counter itself.
	h.limiter.Now = newClock(windowStart.Add(-time.Minute)).Now
	testenv.Do(t, "GET", h.url, m.APIKey, nil)
	h.limiter.Now = newClock(windowStart.Add(5 * time.Second)).Now

	const n = 50
	statuses := make([]int, n)
	remaining := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp := testenv.Do(t, "GET", h.url, m.APIKey, nil)
			statuses[i], remaining[i] = resp.Status, resp.Header.Get("RateLimit")
		})
	}
	close(start)
	wg.Wait()

	admitted, refused := 0, 0
	seen := map[string]bool{}
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			admitted++
			if seen[remaining[i]] {
				t.Errorf("two admitted requests saw the same %q", remaining[i])
			}
			seen[remaining[i]] = true
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Errorf("unexpected status %d", s)
		}
	}
	if admitted != 20 || refused != 30 {
		t.Fatalf("admitted %d, refused %d; want exactly 20 and 30", admitted, refused)
	}
	if got := h.runs.Load(); got != 21 { // 20 + the warm-up request
		t.Errorf("handler ran %d times, want 21", got)
	}
}

func TestOneAWSCallPerRequest(t *testing.T) {
	h := newHarness(t)
	h.limiter.Now = newClock(windowStart.Add(20 * time.Second)).Now
	m := testenv.NewMerchant(t, withLimit(3))
	// (Authentication uses its own, uncounted client; its result is cached.)
	for i := 0; i < 5; i++ { // 3 admitted, 2 refused
		h.calls.Reset()
		resp := testenv.Do(t, "GET", h.url, m.APIKey, nil)
		calls := h.calls.Calls()
		if len(calls) != 1 || calls[0] != "DynamoDB.UpdateItem" {
			t.Errorf("request %d (%d): AWS calls %v, want exactly one UpdateItem", i+1, resp.Status, calls)
		}
	}
}

func TestFailsOpenWhenCounterUnavailable(t *testing.T) {
	h := newHarness(t, func(tb *dynamo.Tables) { tb.Operations = "no-such-table" })
	m := testenv.NewMerchant(t, withLimit(1))
	for i := 0; i < 3; i++ {
		resp := testenv.Do(t, "GET", h.url, m.APIKey, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("request %d with the counter down: %d %s", i+1, resp.Status, resp.Body)
		}
		if resp.Header.Get("RateLimit-Policy") != `"default";q=1;w=60` || resp.Header.Get("RateLimit") != "" {
			t.Errorf("fail-open headers: Policy %q RateLimit %q", resp.Header.Get("RateLimit-Policy"), resp.Header.Get("RateLimit"))
		}
	}
}

func TestRequiresAuthenticatedMerchant(t *testing.T) {
	l := ratelimit.New(nil)
	rec := httptest.NewRecorder()
	l.Middleware(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("without a merchant: %d", rec.Code)
	}
}

// fakeCounter checks the window arithmetic without the emulator.
type fakeCounter struct {
	window  int64
	expires time.Time
}

func (f *fakeCounter) TakeRateLimit(_ context.Context, _ string, window int64, _ int, expiresAt time.Time) (int, error) {
	f.window, f.expires = window, expiresAt
	return 1, nil
}

func TestWindowArithmetic(t *testing.T) {
	for _, tc := range []struct {
		now    time.Time
		window int64
		reset  int
	}{
		{windowStart, windowStart.Unix() / 60, 60},
		{windowStart.Add(time.Nanosecond), windowStart.Unix() / 60, 60},
		{windowStart.Add(59 * time.Second), windowStart.Unix() / 60, 1},
		{windowStart.Add(59*time.Second + 999*time.Millisecond), windowStart.Unix() / 60, 1},
		{windowStart.Add(60 * time.Second), windowStart.Unix()/60 + 1, 60},
	} {
		f := &fakeCounter{}
		l := ratelimit.New(f)
		l.Now = func() time.Time { return tc.now }
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/x", nil)
		req = req.WithContext(apikey.WithMerchant(req.Context(), &merchant.Merchant{ID: "mer_x"}))
		l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, req)
		if f.window != tc.window {
			t.Errorf("%v: window %d, want %d", tc.now, f.window, tc.window)
		}
		wantEnd := time.Unix((tc.window+1)*60, 0)
		if !f.expires.After(wantEnd) {
			t.Errorf("%v: counter expires %v, not after the window end %v", tc.now, f.expires, wantEnd)
		}
		if got, want := rec.Header().Get("RateLimit"), `"default";r=99;t=`+strconv.Itoa(tc.reset); got != want {
			t.Errorf("%v: RateLimit %q, want %q", tc.now, got, want)
		}
	}
}
