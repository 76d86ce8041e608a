// Package idempotency makes POST requests safe to retry (DESIGN §3): a
// client sends an Idempotency-Key header, and every later request with the
// same key gets the first request's response instead of doing the work again.
//
// Records live in DynamoDB (dynamo.Store), scoped per merchant, with three
// steps per executed request and no read-then-write anywhere:
//
//  1. claim: one conditional PutItem stores the key as in_progress with a
//     random claim token and a lease (60 s by default, longer than the
//     function timeout). It succeeds when the key is absent, expired (24 h;
//     TTL deletion is lazy, so expiry is checked here, not left to TTL), or
//     in_progress with a lapsed lease, so a crashed first attempt blocks
//     retries for at most one lease.
//  2. the handler runs with its response captured in memory.
//  3. complete: one UpdateItem, conditional on the claim token, stores the
//     status, the body and the Content-Type, Location and Cache-Control
//     headers; or, for responses that must not be replayed, one conditional
//     DeleteItem releases the key.
//
// When the claim fails, the record that holds the key decides (AWS returns it
// with the failed PutItem; otherwise one consistent GetItem reads it): a
// different fingerprint is 422, in_progress is 409, completed is a replay.
// The fingerprint is SHA-256 over the method, the path and the raw body; the
// request body itself is never stored (it may carry card data).
//
// Which responses are kept (Stripe-like): every response that reflects a
// decision the API made about the request — 2xx, and 4xx such as 400
// validation errors or 404 — is stored and replayed for 24 h, so a retry can
// never turn a rejected request into an accepted one. Not stored (the key is
// released, and a retry executes again): 5xx (the failure may be transient;
// a retry should get another chance), 409 (a conflict with the current
// state of another resource, which may change) and 429 (the request was not
// processed), plus responses larger than MaxResponse (logged as an error)
// and requests whose handler panicked.
//
// Failure behaviour (fail closed): if the claim or the read cannot reach
// DynamoDB the request is not executed and the client gets 503 — executing a
// payment operation without its guard could charge twice, and the handler
// depends on the same database anyway. If the completing write fails after
// the handler ran, the client still gets the real response, the error is
// logged, and the record stays in_progress: retries get 409 until the lease
// lapses and then execute again. The DynamoDB calls after the handler run
// detached from the request's cancellation, so a client that hangs up does
// not leave a half-finished record behind.
//
// # Documentation
//
// The section below is meant for the integration guide.
//
//	## Idempotent requests
//
//	Every POST accepts an optional `Idempotency-Key` header: 1 to 255
//	printable ASCII characters (a UUID v4 is a good choice). Keys are scoped
//	to your merchant account and kept for 24 hours. Send exactly one such
//	header; an empty, too long or non-ASCII key, or several keys, is
//	`400 Bad Request`.
//
//	- Same key, same request (method, path and byte-identical body): you get
//	  the stored first response — the same status, body, `Content-Type` and
//	  `Location` — with `Idempotent-Replayed: true`. Nothing is executed again.
//	- Same key, different request: `422 Unprocessable Content`
//	  (problem type `idempotency-key-reused`). Use a new key for a new request.
//	- Same key while the first request is still being processed:
//	  `409 Conflict` (problem type `idempotency-key-in-use`, `Retry-After: 1`).
//	  Retry shortly with the same key.
//	- Responses with status 5xx, 409 or 429 are not stored: retrying with the
//	  same key executes the request again. All other responses, including
//	  400 validation errors, are replayed.
//	- After 24 hours the key is forgotten and may be used again.
//	- If a request was interrupted (timeout, network error), retry with the
//	  same key: you either get the result of the first attempt or the request
//	  runs once. A first attempt that never finished blocks its key for at
//	  most 60 seconds (409 meanwhile).
//	- If the idempotency store is unavailable you get `503` and nothing was
//	  executed; retry with the same key.
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/problem"
)

// Header is the request header carrying the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLength is the longest accepted key.
const MaxKeyLength = 255

// Defaults of a Guard.
const (
	DefaultLease       = 60 * time.Second
	DefaultTTL         = 24 * time.Hour
	DefaultMaxResponse = 64 << 10
)

// storedHeaders are the response headers kept and replayed.
var storedHeaders = []string{"Content-Type", "Location", "Cache-Control"}

// Store keeps idempotency records (*dynamo.Store).
type Store interface {
	ClaimIdempotencyKey(ctx context.Context, rec *dynamo.IdempotencyRecord, now time.Time) (*dynamo.IdempotencyRecord, error)
	IdempotencyRecord(ctx context.Context, merchantID, key string) (*dynamo.IdempotencyRecord, error)
	CompleteIdempotencyKey(ctx context.Context, rec *dynamo.IdempotencyRecord, now time.Time) error
	ReleaseIdempotencyKey(ctx context.Context, merchantID, key, token string) error
}

// Guard is the Idempotency-Key middleware.
type Guard struct {
	store Store
	// Now is the clock (tests inject one).
	Now func() time.Time
	// Lease is how long an in-progress claim blocks the key; it must exceed
	// the function timeout (10 s), or a slow first attempt could be taken
	// over while it still runs.
	Lease time.Duration
	// TTL is how long a key is remembered.
	TTL time.Duration
	// MaxResponse is the largest response body stored; larger responses are
	// sent but not kept (the key is released).
	MaxResponse int
}

// New returns a Guard over s with the defaults.
func New(s Store) *Guard {
	return &Guard{store: s, Now: time.Now, Lease: DefaultLease, TTL: DefaultTTL, MaxResponse: DefaultMaxResponse}
}

// ValidKey reports whether key is 1 to 255 printable ASCII characters.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Fingerprint identifies a request: SHA-256 over the length-prefixed method,
// path and raw body (hex).
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(method), []byte(path), body} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Middleware applies Idempotency-Key semantics to POST requests that carry
// the header; other requests pass through untouched. It must run inside
// apikey's Require (keys are scoped to the authenticated merchant).
func (g *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || len(r.Header.Values(Header)) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Header.Get(Header)
		if len(r.Header.Values(Header)) > 1 || !ValidKey(key) {
			p := problem.New(http.StatusBadRequest, "invalid-idempotency-key", "Bad Request",
				"Send one Idempotency-Key header of 1 to 255 printable ASCII characters.", "")
			p.Errors = []problem.FieldError{{Field: Header, Detail: "must be 1 to 255 printable ASCII characters"}}
			problem.Write(w, r, p)
			return
		}
		m := apikey.MerchantFrom(r.Context())
		if m == nil {
			httpapi.Error(w, r, errors.New("idempotency: no authenticated merchant in the request context"))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, httpapi.MaxBody+1))
		if err != nil {
			problem.Write(w, r, problem.BadRequest("The request body could not be read.", ""))
			return
		}
		if len(body) > httpapi.MaxBody {
			problem.Write(w, r, problem.TooLarge(httpapi.MaxBody))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r = httpapi.AddLogAttrs(r, slog.String("idempotency_key", key))

		now := g.Now()
		rec := &dynamo.IdempotencyRecord{
			MerchantID: m.ID, Key: key, Fingerprint: Fingerprint(r.Method, r.URL.Path, body),
			Token: newToken(), LeaseUntil: now.Add(g.Lease), ExpiresAt: now.Add(g.TTL), CreatedAt: now,
		}
		if g.claimOrAnswer(w, r, rec, now) {
			g.execute(w, r, rec, next)
		}
	})
}

// claimOrAnswer claims the key (true: the caller executes the request) or
// answers from the record holding it.
func (g *Guard) claimOrAnswer(w http.ResponseWriter, r *http.Request, rec *dynamo.IdempotencyRecord, now time.Time) bool {
	ctx := r.Context()
	for attempt := 0; attempt < 2; attempt++ {
		held, err := g.store.ClaimIdempotencyKey(ctx, rec, now)
		if err == nil {
			return true
		}
		if !errors.Is(err, dynamo.ErrConflict) {
			g.unavailable(w, r, "claim", err)
			return false
		}
		if held == nil {
			held, err = g.store.IdempotencyRecord(ctx, rec.MerchantID, rec.Key)
			if errors.Is(err, dynamo.ErrNotFound) {
				held, err = nil, nil
			}
			if err != nil {
				g.unavailable(w, r, "read", err)
				return false
			}
		}
		if held == nil || held.Expired(now) || held.LeaseExpired(now) {
			continue // freed between the claim and the read: claim again
		}
		switch {
		case held.Fingerprint != rec.Fingerprint:
			problem.Write(w, r, problem.New(http.StatusUnprocessableEntity, "idempotency-key-reused", "Unprocessable Content",
				"This Idempotency-Key was already used for a different request (method, path or body). Use a new key for a new request.", ""))
		case held.State == dynamo.IdempotencyCompleted:
			httpapi.AddLogAttrs(r, slog.Bool("idempotent_replay", true))
			h := w.Header()
			for k, v := range held.Headers {
				h.Set(k, v)
			}
			h.Set(ReplayedHeader, "true")
			w.WriteHeader(held.Status)
			_, _ = w.Write(held.Body)
		default:
			g.inProgress(w, r)
		}
		return false
	}
	g.inProgress(w, r) // the key keeps changing hands; let the client retry
	return false
}

func (g *Guard) inProgress(w http.ResponseWriter, r *http.Request) {
	p := problem.New(http.StatusConflict, "idempotency-key-in-use", "Conflict",
		"A request with this Idempotency-Key is still being processed. Retry shortly with the same key.", "")
	p.Headers = http.Header{"Retry-After": {"1"}}
	problem.Write(w, r, p)
}

func (g *Guard) unavailable(w http.ResponseWriter, r *http.Request, step string, err error) {
	httpapi.Logger(r.Context()).Error("idempotency store unavailable; request not executed", "step", step, "error", err.Error())
	problem.Write(w, r, problem.Unavailable("The request was not processed. Retry with the same Idempotency-Key."))
}

// execute runs next with the response captured, stores or releases the
// record, then sends the response.
func (g *Guard) execute(w http.ResponseWriter, r *http.Request, rec *dynamo.IdempotencyRecord, next http.Handler) {
	// The record must be settled even if the client hangs up meanwhile.
	ctx := context.WithoutCancel(r.Context())
	log := httpapi.Logger(r.Context())
	cw := &captureWriter{header: w.Header()}
	settled := false
	defer func() {
		if !settled { // the handler panicked: free the key, let the panic go on
			g.release(ctx, log, rec)
		}
	}()
	next.ServeHTTP(cw, r)
	settled = true

	status := cw.status
	if status == 0 {
		status = http.StatusOK
	}
	body := cw.body.Bytes()
	switch {
	case status >= 500 || status == http.StatusConflict || status == http.StatusTooManyRequests:
		g.release(ctx, log, rec)
	case len(body) > g.MaxResponse:
		log.Error("response too large to keep for idempotent replay; key released", "bytes", len(body), "max", g.MaxResponse)
		g.release(ctx, log, rec)
	default:
		rec.Status, rec.Body, rec.Headers = status, body, map[string]string{}
		for _, k := range storedHeaders {
			if v := w.Header().Get(k); v != "" {
				rec.Headers[k] = v
			}
		}
		err := g.store.CompleteIdempotencyKey(ctx, rec, g.Now())
		switch {
		case errors.Is(err, dynamo.ErrConflict):
			log.Warn("idempotency claim lost before completion (lease lapsed); response not stored")
		case err != nil:
			log.Error("store idempotent response; the key stays in progress until its lease lapses", "error", err.Error())
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (g *Guard) release(ctx context.Context, log *slog.Logger, rec *dynamo.IdempotencyRecord) {
	err := g.store.ReleaseIdempotencyKey(ctx, rec.MerchantID, rec.Key, rec.Token)
	if err != nil && !errors.Is(err, dynamo.ErrConflict) {
		log.Error("release idempotency key; it stays in progress until its lease lapses", "error", err.Error())
	}
}

// captureWriter buffers a response; headers go straight to the real writer's
// map, so headers set by outer middleware and by the handler end up together.
type captureWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captureWriter) Header() http.Header { return c.header }

func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}
