package dashboard

import (
	"context"
	"errors"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/lockout"
)

// Counting sign-in attempts (internal/lockout): every password or TOTP
// attempt is counted as a failure with one version-conditional write of its
// counter BEFORE its secret is checked, and only when no lock is in force.
// The counter belongs to the address (one identity per address, whatever
// its merchants), not to the identity record, and is keyed by a keyed hash
// of the address: an attempt for an address that is nobody's makes the same
// reads and writes (the person's read, the counter's read and write) and
// the same Argon2id check as one for a person with a wrong password. A right secret takes back the failures
// counted up to its own admission and the lock that admission set.

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

// errCountBusy and errCountDown refuse an attempt that could not be counted:
// its secret was not checked.
var (
	errCountBusy = refuse(errkind.RateLimited, "Too many sign-in attempts for this account at once. Wait a moment and try again.")
	errCountDown = refuse(errkind.Unavailable, "Sign-in is unavailable for a moment. Try again shortly.")
)

// attemptKey names the counter of an address.
func (h *handler) attemptKey(email string) string {
	return h.AttemptKeys.Key("dashboard", email)
}

func (h *handler) counting() *lockout.Counting {
	return &lockout.Counting{Store: h.Store, Now: h.Now}
}

// admit counts an attempt on an address before its secret is checked (see
// lockout.Counting.Admit); a refused admission (lock in force) is not an
// error.
func (h *handler) admit(ctx context.Context, email string) (lockout.Admission, error) {
	a, err := h.counting().Admit(ctx, h.attemptKey(email))
	if err != nil {
		return a, countErr(ctx, err)
	}
	return a, nil
}

// settle records a right secret of the admitted attempt a.
func (h *handler) settle(ctx context.Context, a lockout.Admission) error {
	if err := h.counting().Settle(ctx, a); err != nil {
		return countErr(ctx, err)
	}
	return nil
}

// countErr turns a store failure while counting into a refusal: the
// attempt's secret is not checked, so nothing escapes the count. Running
// out of the counting time (many attempts at once on a slow store) is
// "busy", 429; any other store failure is 503.
func countErr(ctx context.Context, err error) error {
	var se *pageError
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, lockout.ErrBusy) || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errCountBusy
	}
	return &countFailure{err}
}

type countFailure struct{ err error }

func (e *countFailure) Error() string { return "count sign-in attempt: " + e.err.Error() }
func (e *countFailure) Unwrap() error { return e.err }
