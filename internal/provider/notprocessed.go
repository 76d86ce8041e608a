package provider

import (
	"errors"
	"time"
)

// ErrNotProcessed: the acquirer refused the request before processing it
// (it was rate limited, HTTP 429, every time it was sent within the caller's
// budget), so nothing was charged and the reference was not used. It is not
// an unknown outcome: the service neither looks the reference up (another
// request into the exhausted budget) nor declines; it gives the attempt back
// and asks the payer to try again. A provider returns it only when every
// earlier send of the same request was answered, so none can be in flight.
var ErrNotProcessed = errors.New("provider: the acquirer did not process the request; nothing was charged")

// NotProcessedError is ErrNotProcessed with the acquirer's advice on when to
// try again.
type NotProcessedError struct {
	RetryAfter time.Duration // at least a second
	Cause      error         // the acquirer's last answer, redacted
}

func (e *NotProcessedError) Error() string {
	if e.Cause == nil {
		return ErrNotProcessed.Error()
	}
	return ErrNotProcessed.Error() + ": " + e.Cause.Error()
}

// Is makes a NotProcessedError an ErrNotProcessed.
func (e *NotProcessedError) Is(target error) bool { return target == ErrNotProcessed }

// Unwrap returns the cause.
func (e *NotProcessedError) Unwrap() error { return e.Cause }

// RetryAfterOf is how long err advises to wait (a second when it does not
// say).
func RetryAfterOf(err error) time.Duration {
	var np *NotProcessedError
	if errors.As(err, &np) && np.RetryAfter > time.Second {
		return np.RetryAfter
	}
	return time.Second
}
