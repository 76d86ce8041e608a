package webhook

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Schedule is the wait before each retry: s[0] after the first failed
// attempt, s[1] after the second, and so on. len(s)+1 attempts in all.
type Schedule []time.Duration

// DefaultSchedule (docs/notifications.md): 8 attempts spread over about 45 hours.
var DefaultSchedule = Schedule{
	time.Minute, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// Jitter is the largest relative deviation Next applies, either way. It keeps
// the retries of many notifications that failed together (a merchant outage)
// from arriving together when the receiver comes back.
const Jitter = 0.2

// MaxRetryAfter caps how long a receiver's Retry-After can push a retry out.
const MaxRetryAfter = 24 * time.Hour

// Next returns the jittered wait after failed attempt number attempt
// (1-based), or ok=false when that was the last attempt and the delivery
// goes to the dead-letter queue. rnd nil uses the global source.
func (s Schedule) Next(attempt int, rnd *rand.Rand) (delay time.Duration, ok bool) {
	attempt = max(attempt, 1)
	if attempt > len(s) {
		return 0, false
	}
	base := s[attempt-1]
	f := rand.Float64
	if rnd != nil {
		f = rnd.Float64
	}
	return base + time.Duration((2*f()-1)*Jitter*float64(base)), true
}

// Attempts is the total number of attempts the schedule allows.
func (s Schedule) Attempts() int { return len(s) + 1 }

// ParseSchedule reads a comma-separated list of Go durations ("1s,2s,5s"),
// so that tests and the local stack can run the schedule scaled down.
func ParseSchedule(v string) (Schedule, error) {
	var s Schedule
	for part := range strings.SplitSeq(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("webhook: schedule %q: %w", v, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("webhook: schedule %q: delays must be positive", v)
		}
		s = append(s, d)
	}
	return s, nil
}

// String renders s in ParseSchedule's syntax.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// RetryDelay honours a receiver's Retry-After when it asks for more than the
// schedule, up to MaxRetryAfter; it never shortens the schedule.
func RetryDelay(scheduled, retryAfter time.Duration) time.Duration {
	return max(scheduled, min(retryAfter, MaxRetryAfter))
}

// ParseRetryAfter reads a Retry-After value, delay-seconds or HTTP-date,
// relative to now. Unreadable or past values are 0; values are capped at
// MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	// An out-of-range number of seconds parses as the largest uint64: capped below.
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		d = time.Duration(min(secs, uint64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// SQS limits that shape how a long wait is realised.
const (
	SQSMaxDelay      = 15 * time.Minute // SendMessage DelaySeconds
	SQSMaxVisibility = 12 * time.Hour   // ChangeMessageVisibility
)

// SQSHop splits a remaining wait into the DelaySeconds of the next SQS hop
// and what is left after it. SQS cannot delay a message longer than
// SQSMaxDelay, so a 24 h retry is a chain of re-enqueued messages that carry
// their due time (Delivery.DueAt). The hop is rounded up to whole seconds, as
// DelaySeconds is, so a delivery is never attempted early.
func SQSHop(remaining time.Duration) (now, left time.Duration) {
	if remaining <= 0 {
		return 0, 0
	}
	ceil := (remaining + time.Second - 1).Truncate(time.Second)
	now = min(ceil, SQSMaxDelay)
	return now, max(remaining-now, 0)
}

// NextAttempt schedules the attempt after failed attempt a, which was
// attempt number attempts (1-based). ok=false means the schedule is
// exhausted: the event goes to the dead-letter queue. A receiver's
// Retry-After longer than the scheduled wait is honoured.
func NextAttempt(attempts int, a Attempt, s Schedule, rnd *rand.Rand) (dueAt time.Time, ok bool) {
	delay, ok := s.Next(attempts, rnd)
	if !ok {
		return time.Time{}, false
	}
	return a.At.Add(RetryDelay(delay, a.RetryAfter)), true
}

// Hop tells a queue consumer what to do at now with a delivery due at
// dueAt: attempt it (due), or re-enqueue it with DelaySeconds = delay.
func Hop(dueAt, now time.Time) (delay time.Duration, due bool) {
	if !dueAt.After(now) {
		return 0, true
	}
	delay, _ = SQSHop(dueAt.Sub(now))
	return delay, false
}
