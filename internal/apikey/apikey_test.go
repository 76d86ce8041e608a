package apikey

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
)

var errUnknown = errkind.NotFoundErr("unknown")

// lookup finds a merchant by its current or previous key hash, as the
// store does; calls counts the lookups.
type lookup struct {
	m     *merchant.Merchant
	calls int
}

func (l *lookup) MerchantByAPIKeyHash(_ context.Context, hash string) (*merchant.Merchant, error) {
	l.calls++
	if hash == l.m.APIKeyHash || (hash == l.m.PrevAPIKeyHash && hash != "") {
		c := *l.m
		return &c, nil
	}
	return nil, errUnknown
}

// A previous key is accepted until its overlap ends and its cache entry
// never outlives the overlap; a key ended early stops within TTL.
func TestPreviousKeyWorksUntilTheOverlapEnds(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := start
	oldKey, newKey := merchant.NewAPIKey(true), merchant.NewAPIKey(true)
	m := &merchant.Merchant{ID: "mer_x", APIKeyHash: merchant.HashAPIKey(oldKey)}
	m.RotateAPIKey(newKey, "sealed", 10*time.Second, start) // an overlap shorter than the cache time
	l := &lookup{m: m}
	a := New(l)
	a.Now = func() time.Time { return now }
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, oldKey); err != nil {
		t.Fatalf("previous key within the overlap: %v", err)
	}
	now = start.Add(9 * time.Second)
	if _, err := a.Authenticate(ctx, oldKey); err != nil || l.calls != 1 {
		t.Fatalf("previous key, cached: %v (%d lookups)", err, l.calls)
	}
	now = start.Add(10 * time.Second) // the overlap's end, well within TTL of the cached entry
	if _, err := a.Authenticate(ctx, oldKey); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("previous key at the overlap's end: %v", err)
	}
	if _, err := a.Authenticate(ctx, newKey); err != nil {
		t.Errorf("current key: %v", err)
	}
	// Ended early: a cached entry lasts at most TTL.
	now = start
	m.RotateAPIKey(merchant.NewAPIKey(true), "sealed", time.Hour, start) // newKey is now the previous one
	b := New(l)
	b.Now = func() time.Time { return now }
	if _, err := b.Authenticate(ctx, newKey); err != nil {
		t.Fatal(err)
	}
	m.EndPreviousAPIKey()
	now = start.Add(b.TTL - time.Second)
	if _, err := b.Authenticate(ctx, newKey); err != nil {
		t.Errorf("ended key within the cache time: %v", err)
	}
	now = start.Add(b.TTL)
	if _, err := b.Authenticate(ctx, newKey); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("ended key after the cache time: %v", err)
	}
}
