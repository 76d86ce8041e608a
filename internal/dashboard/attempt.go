package dashboard

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"
)

// Counting sign-in attempts. Every password or TOTP attempt is counted as a
// failure with one version-conditional write of the user BEFORE its secret
// is checked, and only when no lock is in force: of any number of attempts
// at once, at most MaxFailures are admitted before the lock (each admission
// is a write the next one must see), and none is checked while locked. A
// right secret then takes back the failures counted up to its own
// admission; failures counted after it stay, and a lock in force stays.

// answerReserve is the part of a request's deadline kept for checking the
// secret and answering: counting stops this long before the deadline and
// refuses the attempt as busy, rather than letting the invocation time out
// (a gateway 5xx with nothing said).
const answerReserve = 2500 * time.Millisecond

// countCtx bounds the counting of one attempt to its request's deadline
// less answerReserve.
func countCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-answerReserve))
	}
	return context.WithCancel(ctx)
}

// countTries bounds the conditional writes one attempt makes before it is
// refused as busy; each lost race means another attempt was counted.
const countTries = 40

// errCountBusy and errCountDown refuse an attempt that could not be counted:
// its secret was not checked.
var (
	errCountBusy = errStatus(http.StatusTooManyRequests, "Too many sign-in attempts for this account at once. Wait a moment and try again.")
	errCountDown = errStatus(http.StatusServiceUnavailable, "Sign-in is unavailable for a moment. Try again shortly.")
)

// admit counts an attempt on u (as read) before its secret is checked. It
// returns the failure count the attempt was admitted with (its own
// included), or 0 when a lock is in force (refused, not counted, nothing
// checked). u is updated to the stored user; a user gone meanwhile is
// refused like a locked one.
func (h *handler) admit(ctx context.Context, u *User) (int, error) {
	for try := 0; ; try++ {
		now := h.Now()
		if now.Before(u.LockedUntil) {
			return 0, nil
		}
		next := *u
		next.Failures++
		if d := LockFor(next.Failures); d > 0 {
			next.LockedUntil = now.Add(d)
		}
		next.UpdatedAt = now
		err := h.Store.UpdateDashboardUser(ctx, &next) // guard: version unchanged since u was read
		if err == nil {
			*u = next
			return next.Failures, nil
		}
		if !h.IsConflict(err) {
			return 0, countErr(ctx, err)
		}
		if try == countTries {
			return 0, errCountBusy
		}
		fresh, err := h.reload(ctx, u, try)
		if err != nil {
			return 0, err
		}
		if fresh == nil {
			return 0, nil
		}
		*u = *fresh
	}
}

// settle records a right secret of an attempt admitted with n failures:
// those n are taken back, later ones stay, a lock in force stays. apply
// makes the success's own change (the TOTP step) on the fresh user and
// reports false when it no longer holds (the code was used meanwhile): the
// attempt is then a failure, already counted.
func (h *handler) settle(ctx context.Context, u *User, n int, apply func(*User) bool) (bool, error) {
	for try := 0; ; try++ {
		now := h.Now()
		next := *u
		if apply != nil && !apply(&next) {
			return false, nil
		}
		next.Failures = max(0, next.Failures-n)
		if !now.Before(next.LockedUntil) {
			next.LockedUntil = time.Time{}
		}
		next.UpdatedAt = now
		err := h.Store.UpdateDashboardUser(ctx, &next) // guard: version unchanged since u was read
		if err == nil {
			*u = next
			return true, nil
		}
		if !h.IsConflict(err) {
			return false, countErr(ctx, err)
		}
		if try == countTries {
			return false, errCountBusy
		}
		fresh, err := h.reload(ctx, u, try)
		if err != nil {
			return false, err
		}
		if fresh == nil {
			return false, nil
		}
		*u = *fresh
	}
}

// reload reads u again after a lost race, after a short random pause so
// that racing attempts spread out; nil when the user is gone.
func (h *handler) reload(ctx context.Context, u *User, try int) (*User, error) {
	select {
	case <-ctx.Done():
		return nil, errCountBusy
	case <-time.After(time.Duration(1+rand.IntN(5*min(try+1, 8))) * time.Millisecond):
	}
	fresh, err := h.Store.DashboardUser(ctx, u.MerchantID, u.Email)
	if h.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, countErr(ctx, err)
	}
	if fresh.MerchantID != u.MerchantID || !fresh.CreatedAt.Equal(u.CreatedAt) {
		return nil, nil
	}
	return fresh, nil
}

// countErr turns a store failure while counting into a refusal: the
// attempt's secret is not checked, so nothing escapes the count. Running
// out of the counting time (many attempts at once on a slow store) is
// "busy", 429; any other store failure is 503.
func countErr(ctx context.Context, err error) error {
	var se *statusError
	if errors.As(err, &se) {
		return err
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errCountBusy
	}
	return &countFailure{err}
}

type countFailure struct{ err error }

func (e *countFailure) Error() string { return "count sign-in attempt: " + e.err.Error() }
func (e *countFailure) Unwrap() error { return e.err }
