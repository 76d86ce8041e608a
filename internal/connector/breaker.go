package connector

import (
	"sync"
	"time"
)

// Breaker is a circuit breaker per connector, in one process (one Lambda
// execution environment): after Threshold charges in a row that a
// connector did not process (unreachable, or refused unprocessed), it is
// open for Cooldown; while open, attempts whose routing has a failover
// skip it and start on the next connector. After the cool-down one
// attempt is let through (half open): processed, the circuit closes;
// not, it opens for another cool-down. A connector's own answers (a
// decline included) close it: it is up. An unknown outcome counts neither
// way, since it may have been processed.
//
// Each environment learns on its own: a breaker shared through the
// database would cost a write per charge, and an environment that has not
// seen the outage yet pays at most Threshold unprocessed tries (each one
// failed over, never charged twice) before it skips the connector too.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration
	// Changed, when set, is told each time a connector's circuit opens
	// or closes (the state metric).
	Changed func(name string, open bool)

	mu    sync.Mutex
	state map[string]*circuit
}

type circuit struct {
	failures  int
	openUntil time.Time // zero: closed
	trial     bool      // half open: one attempt is out
}

// Defaults of a Breaker.
const (
	DefaultThreshold = 5
	DefaultCooldown  = 30 * time.Second
)

// NewBreaker returns a Breaker with the defaults.
func NewBreaker(changed func(name string, open bool)) *Breaker {
	return &Breaker{Threshold: DefaultThreshold, Cooldown: DefaultCooldown, Changed: changed}
}

func (b *Breaker) circuit(name string) *circuit {
	if b.state == nil {
		b.state = map[string]*circuit{}
	}
	c := b.state[name]
	if c == nil {
		c = &circuit{}
		b.state[name] = c
	}
	return c
}

// Allow reports whether an attempt may start on connector name at now:
// the circuit is closed, or it is half open and this is its one trial.
func (b *Breaker) Allow(name string, now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(name)
	switch {
	case c.openUntil.IsZero():
		return true
	case now.Before(c.openUntil) || c.trial:
		return false
	default:
		c.trial = true
		return true
	}
}

// Open reports whether connector name's circuit is open at now (a
// half-open circuit whose trial is out counts as open).
func (b *Breaker) Open(name string, now time.Time) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(name)
	return !c.openUntil.IsZero() && (now.Before(c.openUntil) || c.trial)
}

// NotProcessed records a charge connector name did not process.
func (b *Breaker) NotProcessed(name string, now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	c := b.circuit(name)
	c.failures++
	opened := false
	if c.trial || (c.openUntil.IsZero() && c.failures >= b.Threshold) {
		opened = c.openUntil.IsZero()
		c.openUntil, c.trial = now.Add(b.Cooldown), false
	}
	b.mu.Unlock()
	if opened && b.Changed != nil {
		b.Changed(name, true)
	}
}

// Processed records an answer of connector name (any outcome).
func (b *Breaker) Processed(name string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	c := b.circuit(name)
	closed := !c.openUntil.IsZero()
	*c = circuit{}
	b.mu.Unlock()
	if closed && b.Changed != nil {
		b.Changed(name, false)
	}
}
