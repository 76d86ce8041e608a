package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/problem"
	"github.com/payreq/payreq/internal/ratelimit"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var t0 = time.Date(2031, 5, 6, 12, 0, 0, 0, time.UTC)

type harness struct {
	url   string
	guard *idempotency.Guard
	clock *clock
	calls *testenv.CallCounter
	store *dynamo.Store // counted
	auth  *apikey.Authenticator
	raw   *dynamodb.Client // uncounted, for inspecting items
	ops   string
}

func tablesOf(t *testing.T) dynamo.Tables {
	st := testenv.Stack(t)
	return dynamo.Tables{
		Merchants:       st.Resources.Tables["MerchantsTable"],
		PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
		Operations:      st.Resources.Tables["OperationsTable"],
	}
}

// newHarness serves auth.Require(guard.Middleware(handler)): the real
// authenticator and a guard whose store counts its AWS calls
// (authentication uses the stack's own, uncounted client).
func newHarness(t *testing.T, handler http.Handler) *harness {
	t.Helper()
	st := testenv.Stack(t)
	cfg, calls := testenv.CountingAWSConfig(t)
	tables := tablesOf(t)
	h := &harness{clock: &clock{t: t0}, calls: calls, ops: tables.Operations}
	h.store = dynamo.New(dynamodb.NewFromConfig(cfg), tables)
	h.guard = idempotency.New(h.store, testFPKey, testSealer(t))
	h.guard.Now = h.clock.Now
	rawCfg, _ := testenv.CountingAWSConfig(t)
	h.raw = dynamodb.NewFromConfig(rawCfg)
	h.auth = apikey.New(st.Store)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(httpapi.Wrap(h.auth.Require(h.guard.Middleware(handler)), log))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// counter is a tiny handler: every execution gets a new number, visible in
// the body, the Location and a header that must not be replayed.
type counter struct {
	runs  atomic.Int64
	reply func(n int64, w http.ResponseWriter, r *http.Request) bool // true: handled
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.runs.Add(1)
	if c.reply != nil && c.reply(n, w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Location", fmt.Sprintf("/things/%d", n))
	w.Header().Set("X-Run", fmt.Sprint(n))
	httpapi.WriteJSON(w, http.StatusCreated, map[string]any{"run": n, "merchant": apikey.MerchantFrom(r.Context()).ID, "bodyLen": len(body)})
}

func key(t *testing.T) string {
	return "key-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + fmt.Sprint(time.Now().UnixNano())
}

func post(t *testing.T, url, apiKey, idemKey, body string) testenv.Response {
	t.Helper()
	if idemKey == "" {
		return testenv.Do(t, "POST", url, apiKey, body)
	}
	return testenv.Do(t, "POST", url, apiKey, body, idempotency.Header, idemKey)
}

func problemOf(t *testing.T, resp testenv.Response) problem.Problem {
	t.Helper()
	var p problem.Problem
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q (%d %s)", ct, resp.Status, resp.Body)
	}
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayReturnsTheFirstResponse(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	body := `{"amount": 10, "unit": "EUR"}`

	first := post(t, h.url+"/payment-requests", m.APIKey, k, body)
	if first.Status != http.StatusCreated || first.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("first: %d replayed=%q %s", first.Status, first.Header.Get(idempotency.ReplayedHeader), first.Body)
	}
	for i := 0; i < 2; i++ {
		again := post(t, h.url+"/payment-requests", m.APIKey, k, body)
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("replay: %d %s, want %d %s", again.Status, again.Body, first.Status, first.Body)
		}
		for _, hd := range []string{"Content-Type", "Location", "Cache-Control"} {
			if again.Header.Get(hd) != first.Header.Get(hd) {
				t.Errorf("replayed %s %q, want %q", hd, again.Header.Get(hd), first.Header.Get(hd))
			}
		}
		if again.Header.Get(idempotency.ReplayedHeader) != "true" {
			t.Errorf("replay lacks %s: true", idempotency.ReplayedHeader)
		}
		if again.Header.Get("X-Run") != "" {
			t.Errorf("a header outside the stored set was replayed: X-Run %q", again.Header.Get("X-Run"))
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	// Without a key every request executes.
	post(t, h.url+"/payment-requests", m.APIKey, "", body)
	post(t, h.url+"/payment-requests", m.APIKey, "", body)
	if n := c.runs.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
}

func TestSameKeyDifferentRequestIs422(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	if resp := post(t, h.url+"/payment-requests", m.APIKey, k, `{"amount": 10}`); resp.Status != http.StatusCreated {
		t.Fatalf("first: %d", resp.Status)
	}
	for name, send := range map[string]func() testenv.Response{
		"other body": func() testenv.Response { return post(t, h.url+"/payment-requests", m.APIKey, k, `{"amount": 11}`) },
		"other path": func() testenv.Response {
			return post(t, h.url+"/payment-requests/1/cancel", m.APIKey, k, `{"amount": 10}`)
		},
	} {
		resp := send()
		if resp.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d %s", name, resp.Status, resp.Body)
		}
		if p := problemOf(t, resp); p.Status != 422 || p.Type != problem.TypeBase+"idempotency-key-reused" {
			t.Errorf("%s: problem %+v", name, p)
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestSecondRequestWhileFirstRunsIs409(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	c := &counter{reply: func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			close(entered)
			<-release
		}
		return false
	}}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)

	firstDone := make(chan testenv.Response)
	go func() { firstDone <- post(t, h.url+"/payment-requests", m.APIKey, k, `{"a":1}`) }()
	<-entered
	resp := post(t, h.url+"/payment-requests", m.APIKey, k, `{"a":1}`)
	if resp.Status != http.StatusConflict {
		t.Fatalf("while in flight: %d %s", resp.Status, resp.Body)
	}
	if p := problemOf(t, resp); p.Type != problem.TypeBase+"idempotency-key-in-use" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("409 problem %+v Retry-After %q", p, resp.Header.Get("Retry-After"))
	}
	// A different body while in flight is still a misuse of the key.
	if resp := post(t, h.url+"/payment-requests", m.APIKey, k, `{"a":2}`); resp.Status != http.StatusUnprocessableEntity {
		t.Errorf("different body while in flight: %d", resp.Status)
	}
	close(release)
	first := <-firstDone
	if first.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := post(t, h.url+"/payment-requests", m.APIKey, k, `{"a":1}`)
	if again.Status != http.StatusCreated || !bytes.Equal(again.Body, first.Body) || again.Header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("after completion: %d %s", again.Status, again.Body)
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// Ten identical requests at once against the real create handler: exactly
// one payment request is created; every other caller gets 409 or the replay.
func TestConcurrentDuplicatesCreateOnePaymentRequest(t *testing.T) {
	st := testenv.Stack(t)
	var runs atomic.Int64
	var h *harness
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		time.Sleep(50 * time.Millisecond) // widen the race window
		merchantapi.New(merchantapi.Deps{Store: st.Store, Auth: h.auth,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), AllowHTTPURLs: true}).ServeHTTP(w, r)
	})
	h = newHarness(t, create)
	m := testenv.NewMerchant(t)
	k := key(t)
	body := `{"amount": 12.5, "unit": "EUR", "referenceId": "order-7"}`

	const n = 10
	resps := make([]testenv.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resps[i] = post(t, h.url+"/payment-requests", m.APIKey, k, body)
		})
	}
	close(start)
	wg.Wait()

	var created []byte
	originals, replays, conflicts := 0, 0, 0
	for _, r := range resps {
		switch {
		case r.Status == http.StatusCreated && r.Header.Get(idempotency.ReplayedHeader) == "true":
			replays++
		case r.Status == http.StatusCreated:
			originals++
			created = r.Body
		case r.Status == http.StatusConflict:
			conflicts++
		default:
			t.Fatalf("unexpected %d %s", r.Status, r.Body)
		}
	}
	if originals != 1 || runs.Load() != 1 {
		t.Fatalf("%d original responses, handler ran %d times; want 1 and 1 (replays %d, conflicts %d)", originals, runs.Load(), replays, conflicts)
	}
	for _, r := range resps {
		if r.Status == http.StatusCreated && !bytes.Equal(r.Body, created) {
			t.Errorf("replay differs: %s vs %s", r.Body, created)
		}
	}
	// A retry now replays the one payment request, which exists.
	again := post(t, h.url+"/payment-requests", m.APIKey, k, body)
	if again.Status != http.StatusCreated || !bytes.Equal(again.Body, created) {
		t.Fatalf("retry: %d %s", again.Status, again.Body)
	}
	id := int64(again.JSON(t)["id"].(float64))
	if _, err := st.Store.PaymentRequest(context.Background(), id); err != nil {
		t.Fatalf("created payment request %d: %v", id, err)
	}
	t.Logf("originals %d, replays %d, conflicts %d", originals, replays, conflicts)
}

func TestExpiredRecordExecutesAgain(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	first := post(t, h.url+"/x", m.APIKey, k, `{}`)

	h.clock.Set(t0.Add(24*time.Hour - time.Second))
	if resp := post(t, h.url+"/x", m.APIKey, k, `{}`); resp.Header.Get(idempotency.ReplayedHeader) != "true" || !bytes.Equal(resp.Body, first.Body) {
		t.Fatalf("just before 24 h: %d %s", resp.Status, resp.Body)
	}
	h.clock.Set(t0.Add(24 * time.Hour))
	second := post(t, h.url+"/x", m.APIKey, k, `{}`)
	if second.Status != http.StatusCreated || second.Header.Get(idempotency.ReplayedHeader) != "" || bytes.Equal(second.Body, first.Body) {
		t.Fatalf("after 24 h: %d replayed=%q %s", second.Status, second.Header.Get(idempotency.ReplayedHeader), second.Body)
	}
	// An expired key may even be reused for a different request.
	h.clock.Set(t0.Add(48 * time.Hour))
	if resp := post(t, h.url+"/x", m.APIKey, k, `{"other":true}`); resp.Status != http.StatusCreated || resp.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("expired key, new body: %d %s", resp.Status, resp.Body)
	}
	if n := c.runs.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
}

// A first attempt that died after claiming the key (Lambda timeout, crash)
// blocks the key for one lease, then a retry executes.
func TestCrashedAttemptBlocksOnlyForTheLease(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	body := `{"amount": 5}`
	crashed := &payment.IdempotencyRecord{MerchantID: m.ID, Key: k, Token: "dead",
		Fingerprint: idempotency.Fingerprint(testFPKey, "POST", "/x", []byte(body)),
		LeaseUntil:  t0.Add(idempotency.DefaultLease), ExpiresAt: t0.Add(24 * time.Hour), CreatedAt: t0}
	if _, err := h.store.ClaimIdempotencyKey(context.Background(), crashed, t0); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(t0.Add(idempotency.DefaultLease - time.Second))
	if resp := post(t, h.url+"/x", m.APIKey, k, body); resp.Status != http.StatusConflict {
		t.Fatalf("within the lease: %d %s", resp.Status, resp.Body)
	}
	h.clock.Set(t0.Add(idempotency.DefaultLease))
	resp := post(t, h.url+"/x", m.APIKey, k, body)
	if resp.Status != http.StatusCreated || resp.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("after the lease: %d %s", resp.Status, resp.Body)
	}
	if again := post(t, h.url+"/x", m.APIKey, k, body); !bytes.Equal(again.Body, resp.Body) || again.Header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay after takeover: %d %s", again.Status, again.Body)
	}
	// The crashed holder can no longer settle the key.
	if err := h.store.ReleaseIdempotencyKey(context.Background(), m.ID, k, "dead"); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("stale release: %v", err)
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestKeysAreScopedPerMerchant(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	k := key(t)
	ra := post(t, h.url+"/x", a.APIKey, k, `{}`)
	rb := post(t, h.url+"/x", b.APIKey, k, `{}`)
	if ra.Status != http.StatusCreated || rb.Status != http.StatusCreated || rb.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("A %d, B %d replayed=%q", ra.Status, rb.Status, rb.Header.Get(idempotency.ReplayedHeader))
	}
	if ra.JSON(t)["merchant"] != a.ID || rb.JSON(t)["merchant"] != b.ID {
		t.Fatalf("responses crossed merchants: %s / %s", ra.Body, rb.Body)
	}
	// B's different body under the same key is not a conflict with A's.
	if resp := post(t, h.url+"/x", b.APIKey, k+"-2", `{"b":1}`); resp.Status != http.StatusCreated {
		t.Fatalf("B: %d", resp.Status)
	}
	if resp := post(t, h.url+"/x", a.APIKey, k+"-2", `{"a":1}`); resp.Status != http.StatusCreated || resp.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("A, key used by B with another body: %d %s", resp.Status, resp.Body)
	}
	if n := c.runs.Load(); n != 4 {
		t.Fatalf("handler ran %d times, want 4", n)
	}
}

func TestInvalidKeyIs400(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	for name, k := range map[string]string{
		"empty":     "",
		"too long":  strings.Repeat("k", 256),
		"non-ASCII": "schlüssel",
	} {
		resp := testenv.Do(t, "POST", h.url+"/x", m.APIKey, `{}`, idempotency.Header, k)
		if resp.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, resp.Status, resp.Body)
			continue
		}
		if p := problemOf(t, resp); p.Type != problem.TypeBase+"invalid-idempotency-key" || len(p.Errors) != 1 || p.Errors[0].Field != idempotency.Header {
			t.Errorf("%s: problem %+v", name, p)
		}
	}
	// Two keys: refused rather than silently using the first.
	req, _ := http.NewRequest("POST", h.url+"/x", strings.NewReader(`{}`))
	req.Header.Set("X-API-Key", m.APIKey)
	req.Header.Add(idempotency.Header, "one")
	req.Header.Add(idempotency.Header, "two")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("two keys: %d", resp.StatusCode)
	}
	if n := c.runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times for invalid keys", n)
	}
	// The longest key, and keys with spaces and quotes, are fine. (A comma is
	// refused by httpapi.Wrap: API Gateway joins repeated headers with one.)
	for _, k := range []string{strings.Repeat("k", 255), `a b; "c" =d`, "~"} {
		first := post(t, h.url+"/x", m.APIKey, k, `{}`)
		again := post(t, h.url+"/x", m.APIKey, k, `{}`)
		if first.Status != http.StatusCreated || again.Header.Get(idempotency.ReplayedHeader) != "true" {
			t.Errorf("key %q: %d then %d replayed=%q", k, first.Status, again.Status, again.Header.Get(idempotency.ReplayedHeader))
		}
	}
}

func TestOnlyPOSTIsGuarded(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	h.calls.Reset()
	for i := 0; i < 2; i++ {
		resp := testenv.Do(t, "GET", h.url+"/x", m.APIKey, nil, idempotency.Header, "get-key")
		if resp.Header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatal("GET replayed")
		}
	}
	if n := c.runs.Load(); n != 2 || len(h.calls.Calls()) != 0 {
		t.Fatalf("GET: %d runs, AWS calls %v", n, h.calls.Calls())
	}
}

// Responses that must not be replayed release the key: the retry executes,
// with the same nonce, so it resumes what the first try began.
func TestFailuresAreNotStored(t *testing.T) {
	for _, status := range []int{500, 502, 503, http.StatusConflict, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			c := &counter{reply: func(n int64, w http.ResponseWriter, r *http.Request) bool {
				if n == 1 {
					httpapi.WriteJSON(w, status, map[string]int{"status": status})
					return true
				}
				return false
			}}
			h := newHarness(t, c)
			m := testenv.NewMerchant(t)
			k := key(t)
			h.calls.Reset()
			if resp := post(t, h.url+"/x", m.APIKey, k, `{}`); resp.Status != status {
				t.Fatalf("first: %d", resp.Status)
			}
			if calls := h.calls.Calls(); strings.Join(calls, ",") != "DynamoDB.PutItem,DynamoDB.UpdateItem" {
				t.Errorf("AWS calls for a %d: %v, want claim + release", status, calls)
			}
			item := h.item(t, m.ID, k)
			if item == nil || item["body"] != nil || item["nonce"] == nil {
				t.Fatalf("after %d the record must stay, released, with its nonce and no response: %v", status, item)
			}
			nonce := item["nonce"].(*types.AttributeValueMemberS).Value
			retry := post(t, h.url+"/x", m.APIKey, k, `{}`)
			if got := h.item(t, m.ID, k)["nonce"].(*types.AttributeValueMemberS).Value; got != nonce {
				t.Errorf("retry drew a new nonce: the key lost its binding")
			}
			if retry.Status != http.StatusCreated || retry.Header.Get(idempotency.ReplayedHeader) != "" {
				t.Fatalf("retry: %d replayed=%q", retry.Status, retry.Header.Get(idempotency.ReplayedHeader))
			}
			if n := c.runs.Load(); n != 2 {
				t.Fatalf("handler ran %d times, want 2", n)
			}
		})
	}
}

func TestClientErrorsAreReplayed(t *testing.T) {
	c := &counter{reply: func(n int64, w http.ResponseWriter, r *http.Request) bool {
		problem.Write(w, r, problem.From(errkind.BadInput(fmt.Sprintf("run %d: amount is invalid", n), "026")))
		return true
	}}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	first := post(t, h.url+"/x", m.APIKey, k, `{"amount": -1}`)
	again := post(t, h.url+"/x", m.APIKey, k, `{"amount": -1}`)
	if first.Status != 400 || again.Status != 400 || !bytes.Equal(first.Body, again.Body) ||
		again.Header.Get("Content-Type") != "application/problem+json" || again.Header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("400 replay: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestPanicReleasesTheKey(t *testing.T) {
	c := &counter{reply: func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			panic("boom")
		}
		return false
	}}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	if resp := post(t, h.url+"/x", m.APIKey, k, `{}`); resp.Status != 500 {
		t.Fatalf("panic: %d", resp.Status)
	}
	if resp := post(t, h.url+"/x", m.APIKey, k, `{}`); resp.Status != http.StatusCreated || resp.Header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("retry after panic: %d %s", resp.Status, resp.Body)
	}
}

func TestOversizedResponseIsNotStored(t *testing.T) {
	c := &counter{reply: func(n int64, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(200)
		_, _ = w.Write(bytes.Repeat([]byte("x"), idempotency.DefaultMaxResponse+1))
		return true
	}}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	for i := 1; i <= 2; i++ {
		resp := post(t, h.url+"/x", m.APIKey, k, `{}`)
		if resp.Status != 200 || len(resp.Body) != idempotency.DefaultMaxResponse+1 || resp.Header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("request %d: %d, %d bytes", i, resp.Status, len(resp.Body))
		}
	}
	if n := c.runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestAWSCallsPerRequest(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	testenv.Do(t, "GET", h.url+"/warm-auth-cache", m.APIKey, nil)

	// DynamoDB returns the held record with the failed put
	// (ReturnValuesOnConditionCheckFailure: ALL_OLD): no GetItem.
	held := []string{"DynamoDB.PutItem"}
	for _, step := range []struct {
		name, body string
		want       []string
	}{
		{"first", `{}`, []string{"DynamoDB.PutItem", "DynamoDB.UpdateItem"}},
		{"replay", `{}`, held},
		{"mismatch", `{"x":1}`, held},
	} {
		h.calls.Reset()
		resp := post(t, h.url+"/x", m.APIKey, k, step.body)
		if got := h.calls.Calls(); strings.Join(got, ",") != strings.Join(step.want, ",") {
			t.Errorf("%s (%d): AWS calls %v, want %v", step.name, resp.Status, got, step.want)
		}
	}
}

// The whole chain as the lead composes it: auth, then rate limit, then
// idempotency. Replays carry fresh rate-limit headers and count against
// the budget.
func TestComposedWithRateLimiter(t *testing.T) {
	st := testenv.Stack(t)
	c := &counter{}
	store := dynamo.New(dynamodb.NewFromConfig(mustCfg(t)), tablesOf(t))
	limiter := ratelimit.New(store)
	clk := &clock{t: t0.Add(10 * time.Second)}
	limiter.Now = clk.Now
	guard := idempotency.New(store, []byte("k"), nil)
	guard.Now = clk.Now
	auth := apikey.New(st.Store)
	srv := httptest.NewServer(httpapi.Wrap(auth.Require(limiter.Middleware(guard.Middleware(c))), slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	m := testenv.NewMerchant(t, func(mm *merchant.Merchant) { mm.RateLimitPerMinute = 2 })
	k := key(t)
	first := post(t, srv.URL+"/x", m.APIKey, k, `{}`)
	replay := post(t, srv.URL+"/x", m.APIKey, k, `{}`)
	third := post(t, srv.URL+"/x", m.APIKey, k, `{}`)
	if first.Header.Get("RateLimit") != `"default";r=1;t=50` || replay.Header.Get("RateLimit") != `"default";r=0;t=50` {
		t.Errorf("RateLimit first %q, replay %q", first.Header.Get("RateLimit"), replay.Header.Get("RateLimit"))
	}
	if replay.Header.Get(idempotency.ReplayedHeader) != "true" || !bytes.Equal(replay.Body, first.Body) {
		t.Errorf("replay: %d %s", replay.Status, replay.Body)
	}
	if third.Status != http.StatusTooManyRequests {
		t.Errorf("third: %d", third.Status)
	}
}

func TestStoreUnavailableIs503AndNothingRuns(t *testing.T) {
	c := &counter{}
	st := testenv.Stack(t)
	tables := tablesOf(t)
	tables.Operations = "no-such-table"
	guard := idempotency.New(dynamo.New(dynamodb.NewFromConfig(mustCfg(t)), tables), []byte("k"), nil)
	auth := apikey.New(st.Store)
	srv := httptest.NewServer(httpapi.Wrap(auth.Require(guard.Middleware(c)), slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	m := testenv.NewMerchant(t)
	resp := post(t, srv.URL+"/x", m.APIKey, key(t), `{}`)
	if resp.Status != http.StatusServiceUnavailable || c.runs.Load() != 0 {
		t.Fatalf("store down: %d, %d runs", resp.Status, c.runs.Load())
	}
	// Without a key the guard is not involved.
	if resp := post(t, srv.URL+"/x", m.APIKey, "", `{}`); resp.Status != http.StatusCreated {
		t.Fatalf("no key, store down: %d", resp.Status)
	}
}

// The request body may carry card data: only its hash is stored.
func TestRequestBodyIsNeverStored(t *testing.T) {
	c := &counter{}
	h := newHarness(t, c)
	m := testenv.NewMerchant(t)
	k := key(t)
	const pan = "4111111111111111"
	body := `{"card": {"number": "` + pan + `", "cvv": "737"}}`
	post(t, h.url+"/payments/h2h/1", m.APIKey, k, body)
	item := h.item(t, m.ID, k)
	if item == nil {
		t.Fatal("no record stored")
	}
	dump := fmt.Sprintf("%#v", item)
	if strings.Contains(dump, pan) || strings.Contains(dump, "737\"") {
		t.Fatalf("the record contains request data: %s", dump)
	}
	if fp := item["fingerprint"].(*types.AttributeValueMemberS).Value; fp != idempotency.Fingerprint(testFPKey, "POST", "/payments/h2h/1", []byte(body)) {
		t.Fatalf("fingerprint %s", fp)
	}
}

func TestValidKey(t *testing.T) {
	for k, want := range map[string]bool{
		"": false, "a": true, " ": true, "~": true, strings.Repeat("k", 255): true, strings.Repeat("k", 256): false,
		"a\x7fb": false, "a\tb": false, "a\nb": false, "\x00": false, "é": false, "550e8400-e29b-41d4-a716-446655440000": true,
	} {
		if got := idempotency.ValidKey(k); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(method, path, body string) string {
		return idempotency.Fingerprint(testFPKey, method, path, []byte(body))
	}
	a := fp("POST", "/a", "b")
	if a != fp("POST", "/a", "b") || len(a) != 64 {
		t.Fatal("fingerprint not stable")
	}
	// Field boundaries matter: no two different requests share a fingerprint
	// by shifting bytes between path and body.
	if a == fp("POST", "/ab", "") || a == fp("POST/", "a", "b") {
		t.Fatal("fingerprint ignores field boundaries")
	}
	// Keyed: without the service's key nobody can recompute it.
	if a == idempotency.Fingerprint([]byte("another key"), "POST", "/a", []byte("b")) {
		t.Fatal("fingerprint is not keyed")
	}
	// Canonical: whitespace and member order do not matter; card data is
	// left out, so two bodies differing only in the card share it.
	x := fp("POST", "/p", `{"amount": 1, "unit":"EUR", "card": {"number": "4111111111111111", "cvv": "123"}}`)
	if y := fp("POST", "/p", `{"unit":"EUR","amount":1,"card":{"number":"4000000000000002","cvv":"999"}}`); x != y {
		t.Fatal("fingerprint depends on whitespace, order or card data")
	}
	if x == fp("POST", "/p", `{"unit":"EUR","amount":2}`) {
		t.Fatal("fingerprint ignores the amount")
	}
}

func (h *harness) item(t *testing.T, merchantID, k string) map[string]types.AttributeValue {
	t.Helper()
	out, err := h.raw.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(h.ops), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "idem#" + merchantID},
			"sk": &types.AttributeValueMemberS{Value: k},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

var testFPKey = []byte("test-fingerprint-key")

func testSealer(t *testing.T) *seal.Sealer {
	s, err := seal.New(seal.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCfg(t *testing.T) aws.Config {
	cfg, _ := testenv.CountingAWSConfig(t)
	return cfg
}
