package lockout

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/errkind"
)

var errConflict = errkind.New(errkind.Conflict, "conflict", "")

// memStore is a version-conditional map: the pure logic's fake (the
// DynamoDB store is tested through the dashboard and SFTP suites).
type memStore struct {
	mu sync.Mutex
	m  map[string]Counter
}

func (s *memStore) LoginAttempts(_ context.Context, key string) (Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[key]
	c.Key = key
	return c, nil
}

func (s *memStore) PutLoginAttempts(_ context.Context, c *Counter, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]Counter{}
	}
	if cur := s.m[c.Key]; cur.Version != c.Version {
		if slices.Contains(cur.Writes, c.Write) {
			return nil
		}
		return errConflict
	}
	n := *c
	n.Version++
	n.Writes = Remember(c.Writes, c.Write)
	s.m[c.Key] = n
	return nil
}

func counting(now *time.Time) (*Counting, *memStore) {
	st := &memStore{}
	return &Counting{Store: st, Now: func() time.Time { return *now }}, st
}

func TestLockForDoublesUpToAnHour(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 0, 4: 0, 5: 30 * time.Second, 6: time.Minute, 7: 2 * time.Minute, 11: 1920 * time.Second, 12: time.Hour, 100: time.Hour} {
		if got := LockFor(n); got != want {
			t.Errorf("LockFor(%d) = %v, want %v", n, got, want)
		}
	}
}

// The attack round's case: five failures, the lock waited out, the right
// secret's admission is failure 6 and sets a 60 s lock; its success takes
// that lock back with the failures.
func TestSettleTakesBackItsOwnAdmissionsLock(t *testing.T) {
	now := time.Now()
	l, st := counting(&now)
	ctx := context.Background()
	for range MaxFailures {
		if a, err := l.Admit(ctx, "k"); err != nil || !a.Admitted() {
			t.Fatal(a, err)
		}
	}
	if a, _ := l.Admit(ctx, "k"); a.Admitted() {
		t.Fatal("admitted while locked")
	}
	now = now.Add(FirstLock + time.Second)
	a, err := l.Admit(ctx, "k")
	if err != nil || a.Failures != 6 {
		t.Fatal(a, err)
	}
	if err := l.Settle(ctx, a); err != nil {
		t.Fatal(err)
	}
	if c := st.m["k"]; c.Failures != 0 || !c.LockedUntil.IsZero() {
		t.Errorf("after the success: %+v", c)
	}
}

// A success takes back the failures up to its admission; failures admitted
// after it, and the lock one of them set, stay.
func TestSettleKeepsLaterFailuresAndTheirLock(t *testing.T) {
	now := time.Now()
	l, st := counting(&now)
	ctx := context.Background()
	var right Admission
	for i := 1; i <= MaxFailures; i++ {
		a, _ := l.Admit(ctx, "k")
		if i == 3 {
			right = a
		}
	}
	if err := l.Settle(ctx, right); err != nil {
		t.Fatal(err)
	}
	if c := st.m["k"]; c.Failures != 2 || !c.Locked(now) {
		t.Errorf("after a success admitted third of five: %+v; want 2 failures and the fifth's lock", c)
	}
	// Settling again (a retried answer) changes nothing.
	before := st.m["k"]
	_ = l.Settle(ctx, right)
	if c := st.m["k"]; c.Version != before.Version {
		t.Errorf("a repeated settle wrote: %+v", c)
	}
}

// 30 at once: exactly MaxFailures admitted, the lock set; then 30 at once
// while locked: none admitted, nothing written.
func TestThirtyAtOnceAdmitExactlyTheSchedule(t *testing.T) {
	now := time.Now()
	l, st := counting(&now)
	admitted := burst(t, l, 30)
	if admitted != MaxFailures {
		t.Errorf("%d of 30 admitted, want %d", admitted, MaxFailures)
	}
	c := st.m["k"]
	if c.Failures != MaxFailures || !c.Locked(now) {
		t.Errorf("after the burst: %+v", c)
	}
	if n := burst(t, l, 30); n != 0 || st.m["k"].Version != c.Version {
		t.Errorf("while locked: %d admitted, version %d → %d", n, c.Version, st.m["k"].Version)
	}
}

func burst(t *testing.T, l *Counting, n int) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a, err := l.Admit(context.Background(), "k")
			if err != nil {
				t.Error(err)
			}
			if a.Admitted() {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return admitted
}

func TestKeyerIsKeyedAndSeparatesParts(t *testing.T) {
	a, _ := NewKeyer("secret one")
	b, _ := NewKeyer("secret two")
	if a.Key("dashboard", "m", "x@y") == b.Key("dashboard", "m", "x@y") {
		t.Error("the key does not depend on the secret")
	}
	if a.Key("dashboard", "ab", "c") == a.Key("dashboard", "a", "bc") {
		t.Error("parts run together")
	}
}
