package provider

import (
	"errors"
	"net"
	"time"
)

// ErrNotProcessed: the acquirer refused the request before processing it
// (it was rate limited, HTTP 429, every time it was sent within the caller's
// budget, or no send could connect: Unsent), so nothing was charged and the reference was not used. It is not
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

// Unsent reports whether err is a failure to connect to the acquirer (its
// address not resolved, the connection refused or not established in
// time): the request never left this process, so the acquirer cannot have
// processed it. Any failure after the connection (a write, a read, a
// time-out waiting for the answer) may have been processed and is not
// Unsent.
func Unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
