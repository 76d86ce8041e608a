// Package lockout counts password attempts and locks a login out with a
// doubling back-off. The dashboard's sign-in (passwords and TOTP codes, one
// counter per address) and the SFTP identity provider
// (passwords, one counter per user name) share it. It has no AWS imports:
// internal/dynamo stores the counters.
//
// Rules it keeps:
//   - An attempt is counted as a failure BEFORE its secret is checked, by
//     one version-conditional write of its counter, and only while no lock
//     is in force. So of any number of attempts at once at most MaxFailures
//     are admitted before the lock (each admission is a write the next one
//     must see), and none while it lasts: a locked login does not check even
//     the right secret.
//   - A counter exists for every name tried, known or not (the caller keys
//     it by a hash of the name): an unknown name costs the same reads and
//     writes as a known one, so neither the answer nor its time tells them
//     apart.
//   - A right secret takes back every failure counted up to its own
//     admission and the lock that admission (or an earlier, expired one) set:
//     a successful sign-in leaves no lock behind. Failures admitted after it,
//     and a lock one of them set, stay.
//   - Every write is safe to send twice: it carries a token that the stored
//     counter keeps among its last writes, so a retry whose first send was
//     applied (its answer lost) recognises its own write.
package lockout

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/payreq/payreq/internal/errkind"
)

// The schedule: after MaxFailures consecutive failures a login is locked
// for FirstLock, doubling with every further failure up to MaxLock.
const (
	MaxFailures = 5
	FirstLock   = 30 * time.Second
	MaxLock     = time.Hour
	// Retention is how long a counter is kept after its last failure or the
	// end of its lock (the store's TTL removes it then).
	Retention = 24 * time.Hour
	// KeptWrites is how many write tokens a counter keeps.
	KeptWrites = 16
)

// LockFor is how long the failures-th consecutive failure locks a login out.
func LockFor(failures int) time.Duration {
	if failures < MaxFailures {
		return 0
	}
	d := FirstLock
	for i := MaxFailures; i < failures && d < MaxLock; i++ {
		d *= 2
	}
	return min(d, MaxLock)
}

// Counter is the stored attempts of one login.
type Counter struct {
	Key         string
	Failures    int       // consecutive failures counted
	LockedUntil time.Time // no attempt is admitted before this
	Seq         int64     // admissions ever counted; never taken back
	LockSeq     int64     // the admission that set LockedUntil
	// Writes are the tokens of the last KeptWrites writes (the newest last);
	// Write is the token of the write being made.
	Writes  []string
	Write   string
	Version int64 // 0: not stored yet
}

// Locked reports whether a lock is in force at now.
func (c Counter) Locked(now time.Time) bool { return now.Before(c.LockedUntil) }

// Store keeps counters (internal/dynamo.Store).
type Store interface {
	// LoginAttempts reads key's counter (a consistent read); a Counter of
	// Version 0 when none is stored.
	LoginAttempts(ctx context.Context, key string) (Counter, error)
	// PutLoginAttempts stores c (Write among Writes, Version+1) if the
	// stored version is still c.Version (none stored for 0), to be kept
	// until expires; a conflict otherwise. When the condition fails on a
	// counter that already holds c.Write (this write, applied by an earlier
	// send whose answer was lost), it succeeds.
	PutLoginAttempts(ctx context.Context, c *Counter, expires time.Time) error
}

// ErrBusy refuses an attempt that could not be counted: other attempts won
// every race in its time, or its time ran out. Its secret was not checked.
var ErrBusy = errors.New("lockout: too many attempts at once")

// Tries bounds the conditional writes of one count before ErrBusy.
const Tries = 40

// Counting counts attempts on a Store.
type Counting struct {
	Store Store // PutLoginAttempts answers errkind.Conflict when another attempt wrote first
	Now   func() time.Time
}

// Admission is an attempt counted (Failures > 0: its secret may be
// checked) or refused because a lock is in force (Failures == 0).
type Admission struct {
	Key      string
	Failures int   // the failure count it was admitted with, its own included
	Seq      int64 // its admission's number
	// LockedUntil is when the lock in force ends, for a refused attempt.
	LockedUntil time.Time
}

// Admitted reports whether the attempt's secret may be checked.
func (a Admission) Admitted() bool { return a.Failures > 0 }

// Admit counts an attempt on key as a failure before its secret is
// checked, unless a lock is in force (then nothing is written). An error
// means the attempt was neither counted nor admitted: ErrBusy, a context
// error, or the store's.
func (l *Counting) Admit(ctx context.Context, key string) (Admission, error) {
	var a Admission
	err := l.update(ctx, key, func(c *Counter, now time.Time) bool {
		if c.Locked(now) {
			a = Admission{Key: key, LockedUntil: c.LockedUntil}
			return false
		}
		c.Failures++
		c.Seq++
		if d := LockFor(c.Failures); d > 0 {
			c.LockedUntil, c.LockSeq = now.Add(d), c.Seq
		}
		a = Admission{Key: key, Failures: c.Failures, Seq: c.Seq}
		return true
	})
	return a, err
}

// Settle records a right secret of an admitted attempt: the failures
// counted up to its admission are taken back (those admitted after it
// stay), and so is a lock that its admission or an earlier one set; a lock
// set by a later admission stays.
func (l *Counting) Settle(ctx context.Context, a Admission) error {
	return l.update(ctx, a.Key, func(c *Counter, _ time.Time) bool {
		after := int(c.Seq - a.Seq) // admissions since this one: failures until they settle
		failures := min(c.Failures, max(0, after))
		unlock := !c.LockedUntil.IsZero() && c.LockSeq <= a.Seq
		if failures == c.Failures && !unlock {
			return false
		}
		c.Failures = failures
		if unlock {
			c.LockedUntil, c.LockSeq = time.Time{}, 0
		}
		return true
	})
}

// Clear takes back every failure and lock of key (a new password was set).
func (l *Counting) Clear(ctx context.Context, key string) error {
	return l.update(ctx, key, func(c *Counter, _ time.Time) bool {
		if c.Failures == 0 && c.LockedUntil.IsZero() {
			return false
		}
		c.Failures, c.LockedUntil, c.LockSeq = 0, time.Time{}, 0
		return true
	})
}

// update reads key's counter and writes change's result (when it reports
// a change), reading again after every lost race, up to Tries writes.
func (l *Counting) update(ctx context.Context, key string, change func(c *Counter, now time.Time) bool) error {
	for try := 0; ; try++ {
		c, err := l.Store.LoginAttempts(ctx, key)
		if err != nil {
			return err
		}
		now := l.now()
		c.Key = key
		if !change(&c, now) {
			return nil
		}
		c.Write = newToken()
		expires := now
		if c.LockedUntil.After(expires) {
			expires = c.LockedUntil
		}
		err = l.Store.PutLoginAttempts(ctx, &c, expires.Add(Retention))
		if err == nil {
			return nil
		}
		if !errkind.Is(err, errkind.Conflict) {
			return err
		}
		if try == Tries {
			return ErrBusy
		}
		// Racing attempts spread out before reading again.
		select {
		case <-ctx.Done():
			return ErrBusy
		case <-time.After(time.Duration(1+mrand.IntN(5*min(try+1, 8))) * time.Millisecond):
		}
	}
}

func (l *Counting) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Remember adds token to the kept writes (the store calls it as it writes).
func Remember(writes []string, token string) []string {
	out := append(slices.Clone(writes), token)
	if len(out) > KeptWrites {
		out = out[len(out)-KeptWrites:]
	}
	return out
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// Keyer names counters by a keyed hash of what identifies the login, so
// that no name tried (an e-mail address of nobody's account, say) is stored
// in clear.
type Keyer struct{ key []byte }

// NewKeyer derives a Keyer's key from the service's secret (the seal key).
func NewKeyer(secret string) (*Keyer, error) {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, "payreq/login-attempts/v1", 32)
	if err != nil {
		return nil, err
	}
	return &Keyer{key: k}, nil
}

// Key is the counter key of parts (e.g. "dashboard" and an address).
func (k *Keyer) Key(parts ...string) string {
	m := hmac.New(sha256.New, k.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}
