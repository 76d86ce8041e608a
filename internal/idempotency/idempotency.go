// Package idempotency makes POST requests safe to retry (docs/idempotency.md): a
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
// The fingerprint is a keyed HMAC-SHA256 over the method, the path and a
// canonical form of the body with card data left out (so whitespace and key
// order do not matter, and no hash of a card number or security code is
// ever stored); the request body itself is never stored. A stored response
// is sealed (AES-GCM), since some carry a secret (a checkout token).
//
// Binding to resources: the first claim draws a random nonce, kept in the
// record. The handler derives the ids of what it creates from it (ids.Derive
// through ids.SeedFrom), so they are fixed before any money moves. A retry
// after a crash (the claim's lease lapsed, or it was released after a 5xx)
// takes the record over with the same fingerprint and keeps the nonce, so
// it finds and resumes the same payment request and transaction instead of
// creating a second one.
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
//	- If a request was interrupted (timeout, network error, 5xx), retry with
//	  the same key and the same body: you get the result of the first
//	  attempt, or the first attempt is resumed where it stopped. A payment is
//	  never made twice for one key. A first attempt that never finished
//	  blocks its key for at most 60 seconds (409 meanwhile).
//	- If the idempotency store is unavailable you get `503` and nothing was
//	  executed; retry with the same key.
package idempotency

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/seal"
)

// Header is the request header carrying the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// FingerprintKeyInfo derives the fingerprint key from the service secret.
const FingerprintKeyInfo = "payreq/idempotency-fingerprint/v1"

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
	ClaimIdempotencyKey(ctx context.Context, rec *payment.IdempotencyRecord, now time.Time) (*payment.IdempotencyRecord, error)
	IdempotencyRecord(ctx context.Context, merchantID, key string) (*payment.IdempotencyRecord, error)
	CompleteIdempotencyKey(ctx context.Context, rec *payment.IdempotencyRecord, now time.Time) error
	ReleaseIdempotencyKey(ctx context.Context, merchantID, key, token string) error
	TakeOverIdempotencyKey(ctx context.Context, rec, held *payment.IdempotencyRecord, now time.Time) error
}

// Guard is the Idempotency-Key middleware.
type Guard struct {
	store Store
	// FingerprintKey keys the request fingerprints (HMAC-SHA256).
	FingerprintKey []byte
	// Sealer seals stored responses; owner is the merchant and the key.
	Sealer *seal.Sealer
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

// New returns a Guard over s with the defaults. fingerprintKey keys the
// request fingerprints; sealer seals the stored responses.
func New(s Store, fingerprintKey []byte, sealer *seal.Sealer) *Guard {
	return &Guard{store: s, FingerprintKey: fingerprintKey, Sealer: sealer, Now: time.Now,
		Lease: DefaultLease, TTL: DefaultTTL, MaxResponse: DefaultMaxResponse}
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

// cardFields are the body members that carry card data: left out of the
// fingerprint wherever they appear.
var cardFields = map[string]bool{"card": true, "cardNumber": true, "number": true, "cvv": true, "cvc": true, "securityCode": true}

// Canonical returns body with card data removed and a canonical JSON
// encoding (sorted keys, no insignificant whitespace; numbers as written).
// A body that is not JSON is returned as it is.
func Canonical(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	out, err := json.Marshal(stripCard(v))
	if err != nil {
		return body
	}
	return out
}

func stripCard(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if cardFields[k] {
				delete(t, k)
				continue
			}
			t[k] = stripCard(x)
		}
	case []any:
		for i, x := range t {
			t[i] = stripCard(x)
		}
	}
	return v
}

// Fingerprint identifies a request: HMAC-SHA256 keyed with key over the
// length-prefixed method, path and canonical body (hex).
func Fingerprint(key []byte, method, path string, body []byte) string {
	h := hmac.New(sha256.New, key)
	var n [8]byte
	for _, part := range [][]byte{[]byte(method), []byte(path), Canonical(body)} {
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
			httpapi.Error(w, r, httpapi.BadIdempotencyKey("Send one Idempotency-Key header of 1 to 255 printable ASCII characters.",
				"must be 1 to 255 printable ASCII characters"))
			return
		}
		m := apikey.MerchantFrom(r.Context())
		if m == nil {
			httpapi.Error(w, r, errors.New("idempotency: no authenticated merchant in the request context"))
			return
		}
		body, err := httpapi.ReadBody(w, r, httpapi.MaxBody)
		if err != nil {
			httpapi.Error(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r = httpapi.AddLogAttrs(r, slog.String("idempotency_key", key))

		now := g.Now()
		rec := &payment.IdempotencyRecord{
			MerchantID: m.ID, Key: key, Fingerprint: Fingerprint(g.FingerprintKey, r.Method, r.URL.Path, body),
			Token: newToken(), Nonce: newToken(), LeaseUntil: now.Add(g.Lease), ExpiresAt: now.Add(g.TTL), CreatedAt: now,
		}
		if g.claimOrAnswer(w, r, rec, now) {
			crashpoint.Hit(crashpoint.AfterIdemBind)
			r = r.WithContext(ids.WithSeed(r.Context(), []byte(rec.Nonce)))
			g.execute(w, r, rec, next)
		}
	})
}

// claimOrAnswer claims the key (true: the caller executes the request) or
// answers from the record holding it.
func (g *Guard) claimOrAnswer(w http.ResponseWriter, r *http.Request, rec *payment.IdempotencyRecord, now time.Time) bool {
	ctx := r.Context()
	for attempt := 0; attempt < 2; attempt++ {
		held, err := g.store.ClaimIdempotencyKey(ctx, rec, now)
		if err == nil {
			return true
		}
		if !errkind.Is(err, errkind.Conflict) {
			// The claim may have been applied with every answer lost: free
			// it, so that the client's retry runs at once instead of
			// waiting out the lease.
			g.releaseIfOurs(ctx, rec)
			g.unavailable(w, r, "claim", err)
			return false
		}
		if held == nil {
			held, err = g.store.IdempotencyRecord(ctx, rec.MerchantID, rec.Key)
			if errkind.Is(err, errkind.NotFound) {
				held, err = nil, nil
			}
			if err != nil {
				g.unavailable(w, r, "read", err)
				return false
			}
		}
		if held == nil || held.Expired(now) {
			continue // freed between the claim and the read: claim again
		}
		if held.Token == rec.Token {
			// This request's own claim: the store applied it and its answer
			// was lost. It is ours to run, with the nonce it holds.
			rec.Nonce = held.Nonce
			return true
		}
		if held.LeaseExpired(now) && held.Fingerprint == rec.Fingerprint {
			// A retry of a request a crash (or a 5xx) cut short: take it over
			// with its nonce, so the work it began is resumed, not repeated.
			err := g.store.TakeOverIdempotencyKey(ctx, rec, held, now)
			if err == nil {
				return true
			}
			if !errkind.Is(err, errkind.Conflict) {
				g.unavailable(w, r, "take over", err)
				return false
			}
			continue // another retry took it: look again
		}
		switch {
		case held.Fingerprint != rec.Fingerprint:
			httpapi.Error(w, r, errkind.Because(errkind.IdempotencyKeyReused,
				"This Idempotency-Key was already used for a different request (method, path or body). Use a new key for a new request.", ""))
		case held.State == payment.IdempotencyCompleted:
			body, err := g.open(held)
			if err != nil {
				g.unavailable(w, r, "open", err)
				return false
			}
			httpapi.AddLogAttrs(r, slog.Bool("idempotent_replay", true))
			h := w.Header()
			for k, v := range held.Headers {
				h.Set(k, v)
			}
			h.Set(ReplayedHeader, "true")
			w.WriteHeader(held.Status)
			_, _ = w.Write(body)
		default:
			g.inProgress(w, r)
		}
		return false
	}
	g.inProgress(w, r) // the key keeps changing hands; let the client retry
	return false
}

// releaseIfOurs frees rec's key if the store holds rec's own claim (a
// claim applied whose answers were all lost), with its own short budget.
func (g *Guard) releaseIfOurs(ctx context.Context, rec *payment.IdempotencyRecord) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	held, err := g.store.IdempotencyRecord(ctx, rec.MerchantID, rec.Key)
	if err == nil && held.Token == rec.Token && held.State == payment.IdempotencyInProgress {
		_ = g.store.ReleaseIdempotencyKey(ctx, rec.MerchantID, rec.Key, rec.Token)
	}
}

func (g *Guard) inProgress(w http.ResponseWriter, r *http.Request) {
	e := errkind.Because(errkind.IdempotencyKeyInUse,
		"A request with this Idempotency-Key is still being processed. Retry shortly with the same key.", "")
	e.RetryAfter = time.Second
	httpapi.Error(w, r, e)
}

func (g *Guard) unavailable(w http.ResponseWriter, r *http.Request, step string, err error) {
	httpapi.Logger(r.Context()).Error("idempotency store unavailable; request not executed", "step", step, "error", err.Error())
	httpapi.Error(w, r, errkind.UnavailableErr("The request was not processed. Retry with the same Idempotency-Key."))
}

// execute runs next with the response captured, stores or releases the
// record, then sends the response.
func (g *Guard) execute(w http.ResponseWriter, r *http.Request, rec *payment.IdempotencyRecord, next http.Handler) {
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
		rec.Status, rec.Body, rec.Headers = status, g.seal(rec, body), map[string]string{}
		for _, k := range storedHeaders {
			if v := w.Header().Get(k); v != "" {
				rec.Headers[k] = v
			}
		}
		err := g.store.CompleteIdempotencyKey(ctx, rec, g.Now())
		switch {
		case errkind.Is(err, errkind.Conflict):
			log.Warn("idempotency claim lost before completion (lease lapsed); response not stored")
		case err != nil:
			log.Error("store idempotent response; the key stays in progress until its lease lapses", "error", err.Error())
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// seal protects a stored response: some carry a secret (a checkout
// session's token), and none needs to be readable at rest.
func (g *Guard) seal(rec *payment.IdempotencyRecord, body []byte) []byte {
	if g.Sealer == nil || len(body) == 0 {
		return body
	}
	return []byte(g.Sealer.Seal(string(body), sealOwner(rec)))
}

func (g *Guard) open(rec *payment.IdempotencyRecord) ([]byte, error) {
	if g.Sealer == nil || len(rec.Body) == 0 {
		return rec.Body, nil
	}
	b, err := g.Sealer.Open(string(rec.Body), sealOwner(rec))
	return []byte(b), err
}

func sealOwner(rec *payment.IdempotencyRecord) string {
	return "idem:" + rec.MerchantID + ":" + rec.Key
}

func (g *Guard) release(ctx context.Context, log *slog.Logger, rec *payment.IdempotencyRecord) {
	err := g.store.ReleaseIdempotencyKey(ctx, rec.MerchantID, rec.Key, rec.Token)
	if err != nil && !errkind.Is(err, errkind.Conflict) {
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
