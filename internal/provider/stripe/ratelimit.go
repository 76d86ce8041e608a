package stripe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	sg "github.com/stripe/stripe-go/v83"

	"github.com/payreq/payreq/internal/provider"
)

// A send that could not connect to Stripe (refused, unresolved, not
// established in time) never reached it: a call whose every send failed so,
// or was rate limited, is not processed either.
//
// A 429 from Stripe's rate limiter means the request was not processed:
// Stripe's rate limiters refuse a request before any endpoint runs
// (docs.stripe.com/rate-limits), and Stripe saves an idempotent result only
// once an endpoint began executing (docs.stripe.com/api/idempotent_requests),
// so a retry with the same key is a first try. stripe-go does not retry it:
// (*Error).canRetry in stripe-go v83.2.1 (error.go) retries a 429 only when
// its code is lock_timeout, so an ordinary rate_limit comes straight back.
// The connector retries it here, with exponential back-off and full jitter,
// honouring Retry-After, bounded by RateLimitRetries, RateLimitWait and the
// caller's deadline, always with the same Idempotency-Key (the same params
// are sent again).

// Defaults of the rate-limit retries (Options).
const (
	DefaultRateLimitRetries = 6
	DefaultRateLimitBase    = 100 * time.Millisecond
	DefaultRateLimitCap     = 2 * time.Second
	DefaultRateLimitWait    = 8 * time.Second
	// deadlineReserve is kept free before the caller's deadline for the
	// retried call itself and the service's write of its outcome.
	deadlineReserve = time.Second
)

// callLog is what the transport saw of one logical call (every send of it,
// stripe-go's own retries included).
type callLog struct {
	mu         sync.Mutex
	unanswered bool          // a send got no definite answer: it may have been processed
	retryAfter time.Duration // Retry-After of the last 429
	// sends counts every send; unsent those that could not connect
	// (provider.Unsent) and limited those answered 429: when they are all
	// of them, Stripe processed none.
	sends, unsent, limited int
}

// noneProcessed: every send of the call failed to connect or was rate
// limited, and at least one failed to connect.
func (l *callLog) noneProcessed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unsent > 0 && l.unsent+l.limited == l.sends
}

type callLogKey struct{}

// watchTransport records, per logical call, whether any send went
// unanswered (network error, timeout, 5xx, 409 "a request with this key is
// in flight") and the Retry-After of a 429. A 429 proves only that its own
// send was not processed: after an unanswered send of the same key it
// proves nothing about that one, and the outcome stays unknown.
type watchTransport struct{ next http.RoundTripper }

func (w watchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(r)
	l, _ := r.Context().Value(callLogKey{}).(*callLog)
	if l == nil {
		return resp, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sends++
	switch {
	case err != nil && provider.Unsent(err):
		l.unsent++ // never left: not processed
	case err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusConflict:
		l.unanswered = true
	case resp.StatusCode == http.StatusTooManyRequests:
		l.limited++
		l.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return resp, err
}

// parseRetryAfter reads seconds or an HTTP date (RFC 9110 §10.2.3); 0 when
// absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// rateLimited reports whether err is Stripe's 429: rate_limit, or a
// lock_timeout stripe-go already retried (neither was processed).
func rateLimited(err error) bool {
	var se *sg.Error
	return errors.As(err, &se) && se.HTTPStatusCode == http.StatusTooManyRequests
}

// backoff is the full-jitter delay before retry n (0-based): uniform in
// [0, min(cap, base·2ⁿ)), as in AWS's "Exponential Backoff And Jitter".
func backoff(n int, base, ceil time.Duration) time.Duration {
	d := ceil
	if n < 30 && base<<n < ceil {
		d = base << n
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// do runs call (one Stripe request, sent again as it is) until it is not
// rate limited or the retry budget is spent. A budget spent on 429s alone is
// a *provider.NotProcessedError; after an unanswered send it is the plain
// error (the outcome is unknown: the service looks the reference up).
func (p *Provider) do(ctx context.Context, call func(ctx context.Context) error) error {
	l := &callLog{}
	ctx = context.WithValue(ctx, callLogKey{}, l)
	start := time.Now()
	for n := 0; ; n++ {
		err := call(ctx)
		if err != nil && !rateLimited(err) && l.noneProcessed() {
			// Stripe could not be reached (stripe-go retried the
			// connection already): nothing was sent, nothing charged.
			p.unreachable.Add(1)
			return &provider.NotProcessedError{RetryAfter: time.Second, Cause: redact(err)}
		}
		if !rateLimited(err) {
			return err
		}
		p.rateLimited.Add(1)
		l.mu.Lock()
		unanswered, ra := l.unanswered, l.retryAfter
		l.retryAfter = 0
		l.mu.Unlock()
		wait := backoff(n, p.opts.RateLimitBase, p.opts.RateLimitCap)
		if ra > wait {
			wait = ra
		}
		give := n >= p.opts.RateLimitRetries || time.Since(start)+wait > p.opts.RateLimitWait
		if d, ok := ctx.Deadline(); ok && time.Now().Add(wait+deadlineReserve).After(d) {
			give = true
		}
		if !give {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				give = true
			case <-t.C:
			}
		}
		if give {
			if unanswered {
				return fmt.Errorf("stripe: rate limited after a send without answer (outcome unknown): %w", redact(err))
			}
			return &provider.NotProcessedError{RetryAfter: max(wait, ra, time.Second), Cause: redact(err)}
		}
	}
}

// Unreachable is how many calls found Stripe unreachable (not processed).
func (p *Provider) Unreachable() int64 { return p.unreachable.Load() }

// RateLimited is how many 429 answers the connector has seen (each retried
// or given up); for tests and the bench.
func (p *Provider) RateLimited() int64 { return p.rateLimited.Load() }
