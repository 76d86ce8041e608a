// Package ratelimit enforces each merchant's request budget (docs/ratelimits.md:
// 100 requests per minute per API key by default) across every Lambda
// instance. Requests are counted in fixed one-minute windows in DynamoDB with
// one atomic conditional UpdateItem per request, so the shared budget costs
// exactly one AWS call and concurrent instances can never admit more than
// the limit.
//
// The middleware runs after API-key authentication: a request with a missing
// or wrong key is refused with 401 before it is counted, so nobody can spend
// a merchant's budget without its key. The budget belongs to the merchant
// (merchant.RateLimit(), 100 unless configured), so a rotated key keeps the
// same budget.
//
// # DynamoDB failures: fail open
//
// When the counter cannot be updated (throttling, timeout, outage) the
// request is let through and the error is logged at ERROR level. The limit
// exists to protect the service from runaway clients, not to meter billing;
// refusing every call because the counter is unavailable would turn a
// partial outage into a full one and tell well-behaved merchants to back off
// for a fault that is not theirs. A DynamoDB outage also stops the handlers'
// own reads and writes, so a client cannot use the gap to do real work at
// scale, and API Gateway's stage throttling stays in place as a coarse
// backstop. Such responses carry RateLimit-Policy but no RateLimit field,
// because the remaining budget is unknown.
//
// # Documentation
//
// The section below is meant for the integration guide.
//
//	## Rate limits
//
//	Every call that carries an API key counts against the merchant's budget:
//	100 requests per fixed one-minute window unless a different limit was
//	agreed. The budget is shared by all of the merchant's servers and is not
//	consumed by requests with a missing or invalid key (those get 401).
//	Replays of idempotent requests count like any other request.
//
//	Every response to an authenticated call carries the IETF
//	draft-ietf-httpapi-ratelimit-headers fields:
//
//	    RateLimit-Policy: "default";q=100;w=60
//	    RateLimit: "default";r=42;t=17
//
//	`q` is the budget per window, `w` the window length in seconds, `r` the
//	requests left in the current window and `t` the seconds until it resets.
//
//	The 101st request in a window is refused with `429 Too Many Requests`, an
//	`application/problem+json` body (type `.../problems/rate-limited`) and
//	`Retry-After: <seconds>` (the start of the next window). A refused request
//	does nothing and consumes nothing; retry it after `Retry-After`.
//
//	If the service cannot reach its counter store it admits the request
//	rather than failing it; such a response has `RateLimit-Policy` but no
//	`RateLimit` field.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
)

// Window is the length of one counting window.
const Window = time.Minute

// Policy is the name of the quota policy in the RateLimit headers.
const Policy = "default"

// Counter counts one request of a client in a window (see
// dynamo.Store.TakeRateLimit): the count including this request, or
// a RateLimited error (errkind) when the limit is already reached.
type Counter interface {
	TakeRateLimit(ctx context.Context, client string, window int64, limit int, expiresAt time.Time) (int, error)
}

// Limiter is the per-merchant rate-limiting middleware.
type Limiter struct {
	counter Counter
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// New returns a Limiter counting in c (a *dynamo.Store).
func New(c Counter) *Limiter { return &Limiter{counter: c, Now: time.Now} }

// Middleware admits or refuses each request against the authenticated
// merchant's budget. It must run inside apikey's Require, which puts the
// merchant in the context.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := apikey.MerchantFrom(r.Context())
		if m == nil {
			// A wiring mistake, not a client error: make it loud.
			httpapi.Error(w, r, errors.New("ratelimit: no authenticated merchant in the request context"))
			return
		}
		now := l.Now()
		window := windowOf(now)
		end := time.Unix((window+1)*int64(Window/time.Second), 0)
		reset := secondsUntil(now, end)
		limit := m.RateLimit()

		h := w.Header()
		h.Set("RateLimit-Policy", fmt.Sprintf(`%q;q=%d;w=%d`, Policy, limit, int(Window/time.Second)))
		// Keep the counter a little past the window end: TTL sweeps it later.
		count, err := l.counter.TakeRateLimit(r.Context(), m.ID, window, limit, end.Add(Window))
		switch {
		case errkind.Is(err, errkind.RateLimited):
			h.Set("RateLimit", fmt.Sprintf(`%q;r=0;t=%d`, Policy, reset))
			httpapi.Logger(r.Context()).Info("rate limited", "limit", limit, "retry_after", reset)
			httpapi.Error(w, r, errkind.RateLimitedErr(
				fmt.Sprintf("The limit of %d requests per minute is reached. Retry after %d seconds.", limit, reset),
				time.Duration(reset)*time.Second))
			return
		case err != nil:
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client is gone; nobody reads a response
			}
			httpapi.Logger(r.Context()).Error("rate limit counter unavailable; admitting the request (fail open)",
				"error", err.Error())
		default:
			h.Set("RateLimit", fmt.Sprintf(`%q;r=%d;t=%d`, Policy, max(limit-count, 0), reset))
		}
		next.ServeHTTP(w, r)
	})
}

// windowOf numbers fixed windows since the Unix epoch (the Unix minute).
func windowOf(t time.Time) int64 {
	s := t.Unix()
	w := int64(Window / time.Second)
	if s < 0 {
		return (s - w + 1) / w
	}
	return s / w
}

// secondsUntil is end-now rounded up to whole seconds, at least 1: a client
// that waits that long is in the next window.
func secondsUntil(now, end time.Time) int {
	d := end.Sub(now)
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
