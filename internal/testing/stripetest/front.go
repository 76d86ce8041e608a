package stripetest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RateLimitBody is what Stripe answers a rate-limited request with: HTTP
// 429 and an error object of type invalid_request_error, code rate_limit
// (Stripe's API reference, Errors, and error code rate_limit in Stripe's
// OpenAPI description: "Too many requests hit the API too quickly").
const RateLimitBody = `{"error":{"code":"rate_limit","doc_url":"https://stripe.com/docs/error-codes/rate-limit",` +
	`"message":"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.",` +
	`"type":"invalid_request_error"}}`

// Front is a reverse proxy in front of stripe-mock that plays Stripe's rate
// limiter: it refuses the next N requests, or every request beyond a
// requests-per-second budget (a token bucket holding one second's worth),
// with Stripe's 429 rate_limit answer; the rest reach stripe-mock. It
// counts what it saw, so a test can tell what reached "Stripe".
type Front struct {
	URL string

	srv *http.Server
	ln  net.Listener

	mu         sync.Mutex
	refuse     int     // refuse the next refuse requests
	rate       float64 // requests per second allowed; 0: no limit
	tokens     float64
	last       time.Time
	retryAfter string
	// charges: payment request id → Idempotency-Keys of confirmed
	// intents forwarded for it.
	charges map[string]map[string]int

	Total   atomic.Int64 // requests received
	Limited atomic.Int64 // answered 429
	// Lookups counts the service's Lookup requests (the inert close-intent
	// create, metadata payreq_closed=1) and searches, refused or not.
	Lookups atomic.Int64
	// Confirmed counts confirmed PaymentIntent creates forwarded to stripe-mock.
	Confirmed atomic.Int64
	// RefundPosts counts refund requests (POST /v1/refunds) received,
	// replays and rate-limited ones included; RefundReads refund reads.
	RefundPosts atomic.Int64
	RefundReads atomic.Int64
	// IntentReads counts PaymentIntent reads (GET /v1/payment_intents/{id}).
	IntentReads atomic.Int64

	st *state // KeepState: what "Stripe" remembers (state.go); nil: stateless

	seen []Request
}

// Request is what the front saw of one request: which key it was made
// with (the bearer of its Authorization: which Stripe account), and what.
type Request struct {
	Method, Path, Key string
	Reference         string // metadata[payreq_reference] of a create
}

// Requests lists the requests the front received, in order.
func (f *Front) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.seen...)
}

// NewFront starts a Front before target (stripe-mock's base URL).
func NewFront(target string) (*Front, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Front{URL: "http://" + ln.Addr().String(), ln: ln, charges: map[string]map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, proxy)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Close stops the front.
func (f *Front) Close() { _ = f.srv.Close() }

// RefuseNext makes the next n requests rate limited.
func (f *Front) RefuseNext(n int) { f.mu.Lock(); f.refuse = n; f.mu.Unlock() }

// SetRate limits the requests per second (0: no limit).
func (f *Front) SetRate(perSecond float64) {
	f.mu.Lock()
	f.rate, f.tokens, f.last = perSecond, perSecond, time.Now()
	f.mu.Unlock()
}

// SetRetryAfter sets the Retry-After header of 429 answers ("" for none).
func (f *Front) SetRetryAfter(v string) { f.mu.Lock(); f.retryAfter = v; f.mu.Unlock() }

// admit decides whether a request may pass.
func (f *Front) admit() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse > 0 {
		f.refuse--
		return false, f.retryAfter
	}
	if f.rate <= 0 {
		return true, ""
	}
	now := time.Now()
	f.tokens += now.Sub(f.last).Seconds() * f.rate
	f.last = now
	if f.tokens > f.rate {
		f.tokens = f.rate
	}
	if f.tokens < 1 {
		return false, f.retryAfter
	}
	f.tokens--
	return true, ""
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request, proxy *httputil.ReverseProxy) {
	f.Total.Add(1)
	var form url.Values
	if r.Method == http.MethodPost && r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		form, _ = url.ParseQuery(string(b))
	}
	f.mu.Lock()
	f.seen = append(f.seen, Request{Method: r.Method, Path: r.URL.Path, Key: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
		Reference: form.Get("metadata[payreq_reference]")})
	f.mu.Unlock()
	if r.URL.Path == "/v1/payment_intents/search" || form.Get("metadata[payreq_closed]") == "1" {
		f.Lookups.Add(1)
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/refunds":
		f.RefundPosts.Add(1)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/refunds/"):
		f.RefundReads.Add(1)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/payment_intents/pi_"):
		f.IntentReads.Add(1)
	}
	if ok, ra := f.admit(); !ok {
		f.Limited.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", fmt.Sprintf("req_front_%d", f.Total.Load()))
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, RateLimitBody)
		return
	}
	if r.URL.Path == "/v1/payment_intents" && form.Get("confirm") == "true" {
		f.Confirmed.Add(1)
		f.mu.Lock()
		pr := form.Get("metadata[payreq_payment_request_id]")
		if f.charges[pr] == nil {
			f.charges[pr] = map[string]int{}
		}
		f.charges[pr][r.Header.Get("Idempotency-Key")]++
		f.mu.Unlock()
	}
	f.mu.Lock()
	stateful := f.st != nil
	f.mu.Unlock()
	if !stateful {
		proxy.ServeHTTP(w, r)
		return
	}
	body := []byte(form.Encode())
	f.serveStateful(w, r, form, func() (int, http.Header, []byte) {
		rec := httptest.NewRecorder()
		up := r.Clone(r.Context())
		if r.Method == http.MethodPost {
			up.Body, up.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			up.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		// stripe-mock keeps no keys: the front's idempotency layer answers.
		up.Header.Del("Idempotency-Key")
		proxy.ServeHTTP(rec, up)
		return rec.Code, rec.Header(), rec.Body.Bytes()
	})
}

// Charges returns, per payment request id, how many distinct
// Idempotency-Keys confirmed an intent for it at "Stripe" (Stripe answers a
// repeated key with its first answer, so a request charged exactly once
// has one key however often it was sent).
func (f *Front) Charges() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.charges))
	for pr, keys := range f.charges {
		out[pr] = len(keys)
	}
	return out
}
