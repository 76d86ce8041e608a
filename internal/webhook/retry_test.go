package webhook

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

func TestDefaultSchedule(t *testing.T) {
	want := "1m0s,5m0s,30m0s,2h0m0s,6h0m0s,12h0m0s,24h0m0s"
	if got := DefaultSchedule.String(); got != want {
		t.Fatalf("DefaultSchedule = %s", got)
	}
	if DefaultSchedule.Attempts() != 8 {
		t.Fatalf("Attempts = %d", DefaultSchedule.Attempts())
	}
}

func TestNextJitterAndExhaustion(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for attempt, base := range DefaultSchedule {
		lo, hi := base, base
		for range 500 {
			d, ok := DefaultSchedule.Next(attempt+1, rnd)
			if !ok {
				t.Fatalf("attempt %d: ok=false", attempt+1)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		// Within ±20%, and actually spread (not a fixed offset).
		if float64(lo) < 0.8*float64(base) || float64(hi) > 1.2*float64(base) {
			t.Errorf("attempt %d: delays %v..%v outside ±20%% of %v", attempt+1, lo, hi, base)
		}
		if float64(lo) > 0.9*float64(base) || float64(hi) < 1.1*float64(base) {
			t.Errorf("attempt %d: delays %v..%v hardly jittered around %v", attempt+1, lo, hi, base)
		}
	}
	if _, ok := DefaultSchedule.Next(8, rnd); ok {
		t.Fatal("the 8th failed attempt must go to the dead-letter queue")
	}
	if d, ok := DefaultSchedule.Next(0, rnd); !ok || d > 72*time.Second {
		t.Fatalf("attempt 0 is treated as the first: %v %v", d, ok)
	}
	if _, ok := DefaultSchedule.Next(1, nil); !ok {
		t.Fatal("nil rand must work")
	}
}

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule("1s, 2s,500ms")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 3 || s[0] != time.Second || s[2] != 500*time.Millisecond {
		t.Fatalf("%v", s)
	}
	back, _ := ParseSchedule(DefaultSchedule.String())
	if back.String() != DefaultSchedule.String() {
		t.Fatalf("round trip %v", back)
	}
	for _, bad := range []string{"", "1s,,2s", "1x", "0s", "-1s"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"120":                           2 * time.Minute,
		" 0 ":                           0,
		"":                              0,
		"soon":                          0,
		"-5":                            0,
		"99999999999999999999":          MaxRetryAfter,
		"Sun, 01 Mar 2026 12:10:00 GMT": 10 * time.Minute,
		"Sun, 01 Mar 2026 11:00:00 GMT": 0, // in the past
		"Tue, 10 Mar 2026 12:00:00 GMT": MaxRetryAfter,
	}
	for v, want := range cases {
		if got := ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	if got := RetryDelay(time.Minute, 10*time.Minute); got != 10*time.Minute {
		t.Errorf("a larger Retry-After wins: %v", got)
	}
	if got := RetryDelay(30*time.Minute, 10*time.Minute); got != 30*time.Minute {
		t.Errorf("a smaller Retry-After never shortens the schedule: %v", got)
	}
	if got := RetryDelay(time.Minute, 72*time.Hour); got != MaxRetryAfter {
		t.Errorf("Retry-After is capped: %v", got)
	}
}

func TestSQSHop(t *testing.T) {
	cases := []struct{ in, now, left time.Duration }{
		{0, 0, 0},
		{-time.Second, 0, 0},
		{1500 * time.Millisecond, 2 * time.Second, 0}, // rounded up: never early
		{10 * time.Minute, 10 * time.Minute, 0},
		{15 * time.Minute, 15 * time.Minute, 0},
		{16 * time.Minute, 15 * time.Minute, time.Minute},
		{24 * time.Hour, 15 * time.Minute, 24*time.Hour - 15*time.Minute},
	}
	for _, c := range cases {
		now, left := SQSHop(c.in)
		if now != c.now || left != c.left {
			t.Errorf("SQSHop(%v) = %v, %v; want %v, %v", c.in, now, left, c.now, c.left)
		}
	}
}

// TestDeliveryLifecycle drives a delivery through failures the way the
// notifier does: attempt, NextAttempt, then SQS hops until due, then the DLQ.
func TestDeliveryLifecycle(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, due := Hop(time.Time{}, clock); !due {
		t.Fatal("a new delivery is due at once")
	}
	for attempt := 1; ; attempt++ {
		a := Attempt{At: clock, StatusCode: http.StatusServiceUnavailable, Err: "HTTP 503"}
		if attempt == 5 {
			a.RetryAfter = 20 * time.Hour // the receiver asks for more than the 6 h step
		}
		dueAt, ok := NextAttempt(attempt, a, DefaultSchedule, rnd)
		if !ok {
			if attempt != 8 {
				t.Fatalf("dead-lettered after attempt %d, want 8", attempt)
			}
			break
		}
		wait := dueAt.Sub(clock)
		base := DefaultSchedule[attempt-1]
		if attempt == 5 {
			base = 20 * time.Hour
			if wait != base {
				t.Fatalf("Retry-After not honoured: %v", wait)
			}
		}
		if float64(wait) < 0.8*float64(base) || float64(wait) > 1.2*float64(base) {
			t.Fatalf("attempt %d: wait %v for step %v", attempt, wait, base)
		}
		// Ride the queue: every hop within SQS's limit, never arriving early.
		hops := 0
		for {
			delay, due := Hop(dueAt, clock)
			if due {
				break
			}
			if delay <= 0 || delay > SQSMaxDelay {
				t.Fatalf("hop of %v", delay)
			}
			clock = clock.Add(delay)
			hops++
		}
		if clock.Before(dueAt) {
			t.Fatalf("attempted %v early", dueAt.Sub(clock))
		}
		if want := int((wait + SQSMaxDelay - 1) / SQSMaxDelay); hops > want+1 {
			t.Fatalf("%d hops for %v", hops, wait)
		}
	}
}
