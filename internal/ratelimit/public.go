package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
)

// Default budgets of the unauthenticated endpoints (payment links and the
// hosted page's API), per fixed one-minute window. The hosted page polls its
// status every 1.5 s (40 calls a minute), so one checkout stays well inside
// PerKey; PerIP leaves room for several payers behind one NAT.
const (
	DefaultPerIP  = 300
	DefaultPerKey = 120
)

// Public limits requests that carry no API key: per client IP and per
// credential (a payment link's slug or a checkout token), in the same
// DynamoDB counters as the merchant budget, so the limit holds across every
// Lambda instance. The counters are keyed by a SHA-256 of the credential,
// never the credential itself. Like the merchant limiter it fails open when
// the counter store is unavailable; API Gateway's stage throttling stays the
// outer guard.
type Public struct {
	counter       Counter
	PerIP, PerKey int
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// NewPublic returns a Public limiter with the default budgets.
func NewPublic(c Counter) *Public {
	return &Public{counter: c, PerIP: DefaultPerIP, PerKey: DefaultPerKey, Now: time.Now}
}

// Middleware admits or refuses each request; key returns the request's
// credential ("" when it has none: only the IP budget applies).
func (p *Public) Middleware(key func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := p.Now()
			window := windowOf(now)
			end := time.Unix((window+1)*int64(Window/time.Second), 0)
			checks := []struct {
				client string
				limit  int
			}{{"public#ip#" + ClientIP(r), p.PerIP}}
			if k := key(r); k != "" {
				sum := sha256.Sum256([]byte(k))
				checks = append(checks, struct {
					client string
					limit  int
				}{"public#key#" + hex.EncodeToString(sum[:16]), p.PerKey})
			}
			for _, c := range checks {
				_, err := p.counter.TakeRateLimit(r.Context(), c.client, window, c.limit, end.Add(Window))
				switch {
				case errkind.Is(err, errkind.RateLimited):
					reset := secondsUntil(now, end)
					httpapi.Logger(r.Context()).Info("public rate limit reached", "limit", c.limit, "retry_after", reset)
					httpapi.Error(w, r, errkind.RateLimitedErr(fmt.Sprintf("Too many requests. Retry after %d seconds.", reset),
						time.Duration(reset)*time.Second))
					return
				case err != nil:
					if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
						return
					}
					httpapi.Logger(r.Context()).Error("rate limit counter unavailable; admitting the request (fail open)",
						"error", err.Error())
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ClientIP is the caller's address as API Gateway saw it (the TCP peer of
// the gateway, which a client cannot forge with X-Forwarded-For), else the
// connection's peer.
func ClientIP(r *http.Request) string {
	if gw, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok && gw.HTTP.SourceIP != "" {
		return gw.HTTP.SourceIP
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
