package stripe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// rateLimitedStripe is stripe-mock (its intent patched to succeeded) behind
// a front that answers Stripe's 429 rate_limit.
func rateLimitedStripe(t *testing.T) *stripetest.Front {
	t.Helper()
	f, err := stripetest.NewFront(stripetest.Start(t, stripemock.Succeeded))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// A charge rate limited on its first sends succeeds once the limiter lets
// it through: retried with the same key, one confirmed intent at Stripe,
// no lookup. stripe-go alone gives up on the first 429 (the old behaviour:
// an error, then a lookup).
func TestRateLimitedChargeIsRetriedAndChargesOnce(t *testing.T) {
	t.Parallel()
	f := rateLimitedStripe(t)
	p, _ := newProvider(t, f.URL, func(o *Options) { o.RateLimitBase = 20 * time.Millisecond })
	f.RefuseNext(3) // the payment method twice, then the intent once, say
	req := chargeReq("4242424242424242", true)
	out, err := p.Charge(context.Background(), req)
	if err != nil || out.Status != provider.Approved {
		t.Fatalf("charge after 429s: %+v %v", out, err)
	}
	if f.Limited.Load() != 3 || p.RateLimited() != 3 {
		t.Fatalf("429s answered %d, seen by the connector %d, want 3", f.Limited.Load(), p.RateLimited())
	}
	if n := f.Confirmed.Load(); n != 1 {
		t.Fatalf("confirmed intents at Stripe: %d, want 1", n)
	}
	if keys := f.Charges()["7"]; keys != 1 {
		t.Fatalf("idempotency keys that confirmed payment request 7: %d, want 1", keys)
	}
	if n := f.Lookups.Load(); n != 0 {
		t.Fatalf("lookups: %d, want none", n)
	}
}

// When every send is rate limited the charge is "not processed" with a
// retry hint, within its wait budget, and nothing else is sent: no lookup.
func TestRateLimitExhaustedIsNotProcessed(t *testing.T) {
	t.Parallel()
	f := rateLimitedStripe(t)
	p, _ := newProvider(t, f.URL, func(o *Options) {
		o.RateLimitBase, o.RateLimitCap, o.RateLimitRetries = 10*time.Millisecond, 40*time.Millisecond, 4
	})
	f.RefuseNext(1 << 30)
	start := time.Now()
	_, err := p.Charge(context.Background(), chargeReq("4242424242424242", false))
	if !errors.Is(err, provider.ErrNotProcessed) {
		t.Fatalf("charge against an exhausted limit: %v, want ErrNotProcessed", err)
	}
	if d := provider.RetryAfterOf(err); d < time.Second {
		t.Fatalf("retry hint %v", d)
	}
	if n := f.Total.Load(); n != 5 {
		t.Fatalf("sends: %d, want 1 + 4 retries", n)
	}
	if f.Lookups.Load() != 0 || f.Confirmed.Load() != 0 {
		t.Fatalf("lookups %d, confirmed %d: want none", f.Lookups.Load(), f.Confirmed.Load())
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("gave up after %v", time.Since(start))
	}

	// Retry-After is honoured: longer than the budget left, so it gives up
	// at once and passes the hint on.
	f.SetRetryAfter("30")
	_, err = p.Charge(context.Background(), chargeReq("4242424242424242", false))
	if !errors.Is(err, provider.ErrNotProcessed) || provider.RetryAfterOf(err) != 30*time.Second {
		t.Fatalf("with Retry-After 30: %v (hint %v)", err, provider.RetryAfterOf(err))
	}

	// The caller's deadline bounds the retries.
	f.SetRetryAfter("")
	p2, _ := newProvider(t, f.URL, func(o *Options) { o.RateLimitBase, o.RateLimitCap = time.Second, 4*time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := p2.Charge(ctx, chargeReq("4242424242424242", false)); !errors.Is(err, provider.ErrNotProcessed) {
		t.Fatalf("with a deadline: %v", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("ran %v past a 1.5 s deadline", d)
	}
}

// A 429 after a send that got no answer proves nothing about that send:
// the outcome stays unknown (an error that is not ErrNotProcessed, so the
// service looks the reference up as before).
func TestRateLimitAfterAnUnansweredSendIsUnknown(t *testing.T) {
	t.Parallel()
	f := rateLimitedStripe(t)
	sends := 0
	flaky := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sends++
		if r.URL.Path == "/v1/payment_intents" && sends == 2 {
			// The intent's first send is lost (it may have charged), and
			// from then on Stripe rate limits.
			f.RefuseNext(1 << 30)
			return nil, errors.New("connection reset")
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	one := int64(1)
	p, _ := newProvider(t, f.URL, func(o *Options) {
		o.HTTPClient.Transport, o.MaxNetworkRetries = flaky, &one
		o.RateLimitBase, o.RateLimitRetries = 5*time.Millisecond, 2
	})
	_, err := p.Charge(context.Background(), chargeReq("4242424242424242", false))
	if err == nil || errors.Is(err, provider.ErrNotProcessed) {
		t.Fatalf("429 after a lost send: %v, want an unknown outcome", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "x": 0, "-1": 0,
		now.Add(7 * time.Second).Format(http.TimeFormat): 7 * time.Second,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// A charge whose key was already used (Stripe: idempotency_error) is looked
// up by search; a search that stays rate limited leaves the outcome
// unknown, never "not processed": the key's charge may exist.
func TestRateLimitedSearchAfterAUsedKeyIsUnknown(t *testing.T) {
	_, base := newFake(t)
	limitSearch := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/v1/payment_intents/search" {
			return &http.Response{StatusCode: http.StatusTooManyRequests, Request: r,
				Header: http.Header{"Content-Type": {"application/json"}},
				Body:   io.NopCloser(strings.NewReader(stripetest.RateLimitBody))}, nil
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	p, _ := newProvider(t, base, func(o *Options) {
		o.HTTPClient.Transport = limitSearch
		o.RateLimitBase, o.RateLimitRetries = time.Millisecond, 2
	})
	req := chargeReq("4242424242424242", true)
	if _, err := p.Lookup(context.Background(), req.Reference); !errors.Is(err, provider.ErrUnknownReference) {
		t.Fatalf("lookup: %v", err) // spends the key
	}
	_, err := p.Charge(context.Background(), req)
	if err == nil || errors.Is(err, provider.ErrNotProcessed) {
		t.Fatalf("charge of a used key, search rate limited: %v, want an unknown outcome", err)
	}
}

// closedAddress is an address nothing listens on: a connection to it is
// refused.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// Stripe refusing connections: no send left this process, so the charge
// is not processed (the service may send the attempt to another
// connector); stripe-go's own connection retries ran first.
func TestUnreachableStripeIsNotProcessed(t *testing.T) {
	t.Parallel()
	two := int64(2)
	p, ct := newProvider(t, closedAddress(t), func(o *Options) { o.MaxNetworkRetries = &two })
	_, err := p.Charge(context.Background(), chargeReq("4242424242424242", true))
	if !errors.Is(err, provider.ErrNotProcessed) || p.Unreachable() != 1 {
		t.Fatalf("charge against a closed port: %v (unreachable %d), want not processed once", err, p.Unreachable())
	}
	if n := ct.n.Load(); n != 3 {
		t.Fatalf("%d sends, want stripe-go's first and its 2 retries", n)
	}
}

// A connection that was made and then lost may have carried the request:
// that is an unknown outcome, never "not processed".
func TestConnectionLostAfterConnectingIsUnknown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512)) // the request arrives, the answer never does
			c.Close()
		}
	}()
	p, _ := newProvider(t, "http://"+l.Addr().String())
	_, err = p.Charge(context.Background(), chargeReq("4242424242424242", true))
	if err == nil || errors.Is(err, provider.ErrNotProcessed) {
		t.Fatalf("charge whose connection dropped after the request: %v, want an unknown outcome", err)
	}
}
