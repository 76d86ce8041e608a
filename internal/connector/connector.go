// Package connector names the acquirer connections a stage has configured
// (a Set: name → provider.Provider, and the default). The payments core
// charges an attempt through the connector its routing picked, records that
// connector's name on the transaction, and sends every later call about the
// transaction (lookup, 3-D Secure completion, refund, void, close) to the
// connector recorded there, never to the one that is the default now: a
// charge is only known to the acquirer that made it.
//
// A transaction stored before connectors were recorded has no name; it
// belongs to the Set's legacy connector (the default unless WithLegacy
// says otherwise). A name the Set does not hold gets Missing: a provider
// that refuses every call with ErrNotConfigured (a lookup included, so an
// open attempt stays open for the reconciler instead of being closed as a
// charge that never happened).
package connector

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/payreq/payreq/internal/provider"
)

// Names of the connectors the service knows.
const (
	Sandbox = "sandbox" // the simulated acquirer of a sandbox stage
	Stripe  = "stripe"  // Stripe PaymentIntents (internal/provider/stripe)
	Adyen   = "adyen"   // Adyen Checkout (internal/provider/adyen)
)

var validName = regexp.MustCompile(`^[a-z][a-z0-9]{0,19}$`)

// ValidName reports whether name can name a connector: lower-case letters
// and digits, starting with a letter, at most 20 characters (it names the
// overview's counters too).
func ValidName(name string) bool { return validName.MatchString(name) }

// Set is the connectors of a stage. The zero Set is empty.
type Set struct {
	def, legacy string
	byName      map[string]provider.Provider
}

// New returns the Set of conns with def as the default; def must be one of
// them, and every name valid.
func New(def string, conns map[string]provider.Provider) (Set, error) {
	if len(conns) == 0 {
		return Set{}, errors.New("connector: no connector is configured")
	}
	byName := make(map[string]provider.Provider, len(conns))
	for name, p := range conns {
		if !ValidName(name) {
			return Set{}, fmt.Errorf("connector: invalid name %q", name)
		}
		if p == nil {
			return Set{}, fmt.Errorf("connector: %q has no provider", name)
		}
		byName[name] = p
	}
	if _, ok := byName[def]; !ok {
		return Set{}, fmt.Errorf("connector: the default %q is not configured", def)
	}
	return Set{def: def, legacy: def, byName: byName}, nil
}

// Single is the Set of one connector, the default.
func Single(name string, p provider.Provider) Set {
	return Set{def: name, legacy: name, byName: map[string]provider.Provider{name: p}}
}

// WithLegacy returns s where transactions recorded without a connector
// belong to name (which need not be configured any more: they then get
// Missing).
func (s Set) WithLegacy(name string) Set {
	s.legacy = name
	return s
}

// Empty reports whether s holds no connector.
func (s Set) Empty() bool { return len(s.byName) == 0 }

// Default is the name of the connector an attempt no rule routes goes to.
func (s Set) Default() string { return s.def }

// Has reports whether name is configured.
func (s Set) Has(name string) bool {
	_, ok := s.byName[name]
	return ok
}

// Get returns the provider of name, or Missing(name) and false.
func (s Set) Get(name string) (provider.Provider, bool) {
	if p, ok := s.byName[name]; ok {
		return p, true
	}
	return Missing(name), false
}

// Recorded is the connector a transaction belongs to: recorded, or the
// legacy connector when the transaction has none.
func (s Set) Recorded(recorded string) string {
	if recorded == "" {
		return s.legacy
	}
	return recorded
}

// Names lists the configured connectors, sorted.
func (s Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrNotConfigured: a call for a connector the stage does not have.
var ErrNotConfigured = errors.New("connector: not configured")

// Missing is the provider of a connector that is not configured: every
// call fails with ErrNotConfigured (never provider.ErrUnknownReference,
// which would close an attempt the missing acquirer may have charged).
func Missing(name string) provider.Provider { return missing(name) }

type missing string

func (m missing) err() error { return fmt.Errorf("%w: %q", ErrNotConfigured, string(m)) }

func (m missing) Charge(context.Context, provider.ChargeRequest) (provider.Outcome, error) {
	return provider.Outcome{}, m.err()
}

func (m missing) CompleteChallenge(context.Context, provider.ChallengeResult) (provider.Outcome, error) {
	return provider.Outcome{}, m.err()
}

func (m missing) Refund(context.Context, provider.RefundRequest) (provider.RefundOutcome, error) {
	return provider.RefundOutcome{}, m.err()
}

func (m missing) Lookup(context.Context, string) (provider.Outcome, error) {
	return provider.Outcome{}, m.err()
}
