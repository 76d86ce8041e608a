package ids

import (
	"testing"
	"time"
)

// At the rate that collided before (2,000 creates in one millisecond burst),
// 200,000 ids are all distinct and JS-safe.
func TestNewIsPositiveJSSafeAndDoesNotCollideAtVolume(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	seen := make(map[int64]bool, 200_000)
	for i := 0; i < 200_000; i++ {
		id := New(now)
		if id <= 0 || id > MaxSafe {
			t.Fatalf("id %d out of range", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %d after %d ids", id, i)
		}
		seen[id] = true
	}
}

func TestDeriveIsStableAndPurposeBound(t *testing.T) {
	seed := []byte("nonce-1")
	a, b := Derive(seed, "request"), Derive(seed, "request")
	if a != b {
		t.Fatalf("Derive not stable: %d vs %d", a, b)
	}
	if a == Derive(seed, "transaction") || a == Derive([]byte("nonce-2"), "request") {
		t.Fatal("Derive ignores its purpose or its seed")
	}
	if a <= 0 || a > MaxSafe {
		t.Fatalf("derived id %d out of range", a)
	}
}
