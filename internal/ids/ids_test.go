package ids

import (
	"testing"
	"time"
)

func TestNewIsPositiveOrderedAndJSSafe(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	seen := map[int64]bool{}
	prev := int64(0)
	for i := 0; i < 2000; i++ {
		id := New(now.Add(time.Duration(i) * time.Millisecond))
		if id <= 0 || id > MaxSafe {
			t.Fatalf("id %d out of range", id)
		}
		if id>>randomBits <= prev>>randomBits && i > 0 {
			t.Fatalf("ids not time ordered: %d after %d", id, prev)
		}
		if seen[id] {
			t.Fatalf("duplicate id %d", id)
		}
		seen[id] = true
		prev = id
	}
}
