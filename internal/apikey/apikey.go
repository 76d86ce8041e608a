// Package apikey authenticates merchant-server calls by X-API-Key. Keys are
// looked up by hash and the result cached briefly in-process, so a warm Lambda
// makes no database call for authentication.
//
// A merchant has its current key and, after a rotation with an overlap, the
// previous key until the overlap ends (merchant.RotateAPIKey). An instance
// trusts what it looked up for at most TTL: a key rotated out without an
// overlap, or whose overlap was ended early, keeps working on an instance
// that had it cached for at most TTL; an overlap's natural end is exact
// (the cache entry of a previous key never outlives it).
package apikey

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/merchant"
)

// Header carries the key.
const Header = "X-API-Key"

// Lookup finds a merchant by key hash — its current key, or a key rotated
// out with an overlap; it returns an errkind.NotFound error for unknown
// keys. Authenticate decides whether the key still works.
type Lookup interface {
	MerchantByAPIKeyHash(ctx context.Context, hash string) (*merchant.Merchant, error)
}

// ErrInvalidKey is returned for a missing, malformed or unknown key.
var ErrInvalidKey = errors.New("invalid API key")

type entry struct {
	m       *merchant.Merchant // nil: known to be invalid
	expires time.Time
}

// Authenticator resolves keys to merchants with a small TTL cache.
type Authenticator struct {
	lookup     Lookup
	TTL        time.Duration // positive answers (key rotation takes effect within it)
	NegTTL     time.Duration // unknown keys
	Now        func() time.Time
	maxEntries int

	mu    sync.Mutex
	cache map[string]entry
}

// DefaultTTL is how long an instance trusts a key it has looked up: after a
// rotation, the old key works on an instance that had cached it for at most
// this long (an instance that had not is refused at once).
const DefaultTTL = 30 * time.Second

// New returns an Authenticator.
func New(l Lookup) *Authenticator {
	return &Authenticator{lookup: l, TTL: DefaultTTL, NegTTL: 5 * time.Second,
		Now: time.Now, maxEntries: 10000, cache: map[string]entry{}}
}

// wellFormed rejects obvious garbage before any lookup.
func wellFormed(key string) bool {
	return len(key) == 49 && (strings.HasPrefix(key, "prk_test_") || strings.HasPrefix(key, "prk_live_"))
}

// Authenticate returns the merchant owning key, or ErrInvalidKey.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (*merchant.Merchant, error) {
	if !wellFormed(key) {
		return nil, ErrInvalidKey
	}
	hash := merchant.HashAPIKey(key)
	now := a.Now()
	a.mu.Lock()
	e, ok := a.cache[hash]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		if e.m == nil {
			return nil, ErrInvalidKey
		}
		return e.m, nil
	}
	m, err := a.lookup.MerchantByAPIKeyHash(ctx, hash)
	switch {
	case errkind.Is(err, errkind.NotFound):
		a.store(hash, entry{expires: now.Add(a.NegTTL)})
		return nil, ErrInvalidKey
	case err != nil:
		return nil, err
	}
	// The lookup matched on the hash; compare again in constant time so the
	// decision never depends on a non-constant-time path, and judge a
	// previous key's overlap.
	ok, previous := m.AcceptsKey(key, now)
	if !ok {
		a.store(hash, entry{expires: now.Add(a.NegTTL)})
		return nil, ErrInvalidKey
	}
	expires := now.Add(a.TTL)
	if previous && m.PrevAPIKeyUntil.Before(expires) {
		expires = m.PrevAPIKeyUntil
	}
	a.store(hash, entry{m: m, expires: expires})
	return m, nil
}

func (a *Authenticator) store(hash string, e entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= a.maxEntries {
		for k := range a.cache { // evict an arbitrary entry: bounded memory beats perfect LRU here
			delete(a.cache, k)
			break
		}
	}
	a.cache[hash] = e
}

type ctxKey struct{}

// MerchantFrom returns the authenticated merchant of the request.
func MerchantFrom(ctx context.Context) *merchant.Merchant {
	m, _ := ctx.Value(ctxKey{}).(*merchant.Merchant)
	return m
}

// WithMerchant returns ctx carrying m (used by tests and by other auth paths).
func WithMerchant(ctx context.Context, m *merchant.Merchant) context.Context {
	return context.WithValue(ctx, ctxKey{}, m)
}

// Require is middleware: 401 problem without a valid key.
func (a *Authenticator) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(Header)
		if key == "" {
			challenge(w, r, "The X-API-Key header is missing.")
			return
		}
		m, err := a.Authenticate(r.Context(), key)
		if errors.Is(err, ErrInvalidKey) {
			httpapi.Logger(r.Context()).Warn("invalid API key", "key_kind", keyKind(key))
			challenge(w, r, "The API key is invalid.")
			return
		}
		if err != nil {
			httpapi.Error(w, r, err)
			return
		}
		r = httpapi.AddLogAttrs(r, slog.String("merchant_id", m.ID))
		next.ServeHTTP(w, r.WithContext(WithMerchant(r.Context(), m)))
	})
}

func challenge(w http.ResponseWriter, r *http.Request, detail string) {
	w.Header().Set("Www-Authenticate", `APIKey header="X-API-Key"`)
	httpapi.Error(w, r, errkind.UnauthorizedErr(detail))
}

// keyKind describes a presented key for logs without revealing any of it.
func keyKind(key string) string {
	switch {
	case !wellFormed(key):
		return "malformed"
	case strings.HasPrefix(key, "prk_live_"):
		return "live"
	}
	return "test"
}
