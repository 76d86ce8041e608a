// Package routing is a merchant's connector routing: ordered rules that
// pick the acquirer connection (internal/connector) an attempt is charged
// through. The first rule whose every condition holds decides; a rule
// without conditions matches everything. A rule names one connector, or
// splits its volume by weight: the share is decided by a hash of the
// attempt's charge reference, so the same attempt (a retry with the same
// Idempotency-Key) always goes to the same connector while many attempts
// spread by the weights. When no rule matches, Default decides ("": the
// stage's default connector).
//
// Conditions: methods (provider.Method values), currencies (ISO 4217
// codes the service accepts), an amount range (inclusive decimals, never
// floats), card brands (card.Brand values; an attempt without a card never
// matches a rule that lists brands) and countries (the payer's country,
// ISO 3166 alpha-2, as sent with the attempt: the service keeps no BIN
// table, so the card's issuing country is unknown to it; an attempt
// without a country never matches a rule that lists countries).
//
// Failover: a rule (and the default route) may list connectors to try, in
// order, when the one it picked did not process the charge (the acquirer
// was unreachable, or refused it unprocessed). Failover is opt-in: without
// a list an unprocessed charge is given back to the payer (503), never sent
// elsewhere. It never follows a decline or an unknown outcome.
//
// Rules are pure data: the payments core stores them with the merchant
// and answers 046 (Invalid payment provider) when they pick a connector
// the stage does not configure.
package routing

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/currency"
)

// MaxRules bounds a merchant's rules (each attempt reads them all).
const MaxRules = 100

// Rules are a merchant's routing. The zero Rules route every attempt to
// the stage's default connector.
type Rules struct {
	Rules []Rule `json:"rules"`
	// Default is the connector of an attempt no rule matches; "": the
	// stage's default.
	Default string `json:"default,omitempty"`
	// Failover lists the connectors to try, in order, when the default
	// route's connector did not process the charge.
	Failover []string `json:"failover,omitempty"`
}

// MaxFailover bounds a failover list.
const MaxFailover = 4

// Rule is one routing rule: its conditions (each empty one holds) and its
// target, Connector or Split.
type Rule struct {
	// Name is the operator's label, shown back; it routes nothing.
	Name       string           `json:"name,omitempty"`
	Methods    []string         `json:"methods,omitempty"`
	Currencies []string         `json:"currencies,omitempty"`
	MinAmount  *decimal.Decimal `json:"minAmount,omitempty"` // inclusive
	MaxAmount  *decimal.Decimal `json:"maxAmount,omitempty"` // inclusive
	CardBrands []string         `json:"cardBrands,omitempty"`
	Countries  []string         `json:"countries,omitempty"`

	Connector string   `json:"connector,omitempty"`
	Split     []Weight `json:"split,omitempty"`
	// Failover lists the connectors to try, in order, when the rule's
	// connector did not process the charge.
	Failover []string `json:"failover,omitempty"`
}

// Weight is one connector's share of a split rule's volume: Weight out of
// the sum of the split's weights.
type Weight struct {
	Connector string `json:"connector"`
	Weight    int    `json:"weight"`
}

// Attempt is what routing knows of an attempt.
type Attempt struct {
	Method    string
	Currency  string
	Amount    decimal.Decimal
	CardBrand string // "" without a card
	Country   string // the payer's, "" when not sent
	// Reference is the attempt's charge reference: it decides a split.
	Reference string
}

// Empty reports whether r routes everything to the stage's default.
func (r Rules) Empty() bool { return len(r.Rules) == 0 && r.Default == "" && len(r.Failover) == 0 }

// Pick returns the connector of attempt a and the index of the rule that
// decided it (-1: none matched). "" means the stage's default connector.
func (r Rules) Pick(a Attempt) (string, int) {
	for i, rule := range r.Rules {
		if rule.Matches(a) {
			return rule.target(a.Reference), i
		}
	}
	return r.Default, -1
}

// FailoverOf is the failover list of the route that decides a: the
// matching rule's, or the default route's when no rule matches.
func (r Rules) FailoverOf(a Attempt) []string {
	for _, rule := range r.Rules {
		if rule.Matches(a) {
			return rule.Failover
		}
	}
	return r.Failover
}

// Matches reports whether every condition of rule holds for a.
func (rule Rule) Matches(a Attempt) bool {
	switch {
	case len(rule.Methods) > 0 && !slices.Contains(rule.Methods, a.Method):
		return false
	case len(rule.Currencies) > 0 && !slices.ContainsFunc(rule.Currencies, func(c string) bool { return strings.EqualFold(c, a.Currency) }):
		return false
	case rule.MinAmount != nil && a.Amount.LessThan(*rule.MinAmount):
		return false
	case rule.MaxAmount != nil && a.Amount.GreaterThan(*rule.MaxAmount):
		return false
	case len(rule.CardBrands) > 0 && (a.CardBrand == "" || !slices.Contains(rule.CardBrands, a.CardBrand)):
		return false
	case len(rule.Countries) > 0 && (a.Country == "" || !slices.ContainsFunc(rule.Countries, func(c string) bool { return strings.EqualFold(c, a.Country) })):
		return false
	}
	return true
}

// target is the rule's connector for the attempt with reference ref.
func (rule Rule) target(ref string) string {
	if len(rule.Split) == 0 {
		return rule.Connector
	}
	total := 0
	for _, w := range rule.Split {
		total += w.Weight
	}
	n := int(Bucket(ref) % uint64(total))
	for _, w := range rule.Split {
		if n < w.Weight {
			return w.Connector
		}
		n -= w.Weight
	}
	return rule.Split[len(rule.Split)-1].Connector // not reached: weights are positive
}

// Bucket is a uniform 64-bit number of ref (the first 8 bytes of its
// SHA-256): the same reference always falls in the same share.
func Bucket(ref string) uint64 {
	sum := sha256.Sum256([]byte(ref))
	return binary.BigEndian.Uint64(sum[:8])
}

// Connectors lists every connector r can pick (its rules' and its
// default), each once, in the order they appear.
func (r Rules) Connectors() []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, rule := range r.Rules {
		add(rule.Connector)
		for _, w := range rule.Split {
			add(w.Connector)
		}
		for _, n := range rule.Failover {
			add(n)
		}
	}
	add(r.Default)
	for _, n := range r.Failover {
		add(n)
	}
	return names
}

// ValidationError lists every problem of a set of rules, each with the
// path of the field it concerns ("rules[2].maxAmount").
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return "invalid routing rules: " + strings.Join(e.Problems, "; ")
}

var methods = []string{"card", "wallet", "qr", "upi", "alternative"}

var brands = []string{string(card.Visa), string(card.Mastercard), string(card.Amex), string(card.Discover), string(card.JCB),
	string(card.Diners), string(card.UnionPay), string(card.Maestro), string(card.Unknown)}

// Validate returns nil or a *ValidationError listing every problem:
// unknown methods, currencies, brands or countries, a negative or
// inverted amount range, a rule with no target or two, a split with a
// weight below 1, a connector twice or fewer than two connectors, and a
// connector name that cannot be one. It does not know which connectors a
// stage configures (that is answered at pay time, 046).
func (r Rules) Validate() error {
	var p []string
	bad := func(field, format string, args ...any) { p = append(p, field+": "+fmt.Sprintf(format, args...)) }
	name := func(field, n string) {
		if !connector.ValidName(n) {
			bad(field, "%q is not a connector name (lower-case letters and digits, like \"stripe\")", n)
		}
	}
	failover := func(field string, list []string, target ...string) {
		if len(list) > MaxFailover {
			bad(field, "%d connectors, at most %d", len(list), MaxFailover)
		}
		for k, n := range list {
			name(fmt.Sprintf("%s[%d]", field, k), n)
			if slices.Contains(list[:k], n) {
				bad(fmt.Sprintf("%s[%d]", field, k), "%q appears twice", n)
			}
			if len(target) == 1 && n == target[0] {
				bad(fmt.Sprintf("%s[%d]", field, k), "%q is the connector the route picks; a failover goes to another", n)
			}
		}
	}
	if len(r.Rules) > MaxRules {
		bad("rules", "%d rules, at most %d", len(r.Rules), MaxRules)
	}
	for i, rule := range r.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		for _, m := range rule.Methods {
			if !slices.Contains(methods, m) {
				bad(f+".methods", "%q is not one of %s", m, strings.Join(methods, ", "))
			}
		}
		for _, c := range rule.Currencies {
			if _, ok := currency.Lookup(c); !ok || c != strings.ToUpper(c) {
				bad(f+".currencies", "%q is not an accepted currency code (upper case, like EUR)", c)
			}
		}
		for _, b := range rule.CardBrands {
			if !slices.Contains(brands, b) {
				bad(f+".cardBrands", "%q is not one of %s", b, strings.Join(brands, ", "))
			}
		}
		for _, c := range rule.Countries {
			if len(c) != 2 || c != strings.ToUpper(c) || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
				bad(f+".countries", "%q is not an ISO 3166 alpha-2 code (like DE)", c)
			}
		}
		if rule.MinAmount != nil && rule.MinAmount.IsNegative() {
			bad(f+".minAmount", "must not be negative")
		}
		if rule.MaxAmount != nil && rule.MaxAmount.IsNegative() {
			bad(f+".maxAmount", "must not be negative")
		}
		if rule.MinAmount != nil && rule.MaxAmount != nil && rule.MinAmount.GreaterThan(*rule.MaxAmount) {
			bad(f+".maxAmount", "%s is below minAmount %s", rule.MaxAmount, rule.MinAmount)
		}
		switch {
		case rule.Connector == "" && len(rule.Split) == 0:
			bad(f, "needs a connector or a split")
		case rule.Connector != "" && len(rule.Split) > 0:
			bad(f, "has both a connector and a split; give one")
		case rule.Connector != "":
			name(f+".connector", rule.Connector)
		default:
			if len(rule.Split) < 2 {
				bad(f+".split", "needs at least two connectors (a single one is \"connector\")")
			}
			var seen []string
			for k, w := range rule.Split {
				wf := fmt.Sprintf("%s.split[%d]", f, k)
				name(wf+".connector", w.Connector)
				if slices.Contains(seen, w.Connector) {
					bad(wf+".connector", "%q appears twice in the split", w.Connector)
				}
				seen = append(seen, w.Connector)
				if w.Weight < 1 || w.Weight > 1_000_000 {
					bad(wf+".weight", "%d is not between 1 and 1000000", w.Weight)
				}
			}
		}
		if rule.Connector != "" {
			failover(f+".failover", rule.Failover, rule.Connector)
		} else {
			failover(f+".failover", rule.Failover)
		}
	}
	if r.Default != "" {
		name("default", r.Default)
		failover("failover", r.Failover, r.Default)
	} else {
		failover("failover", r.Failover)
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

// Equal reports whether r and o route alike (the same rules in the same
// order, amounts compared as numbers).
func (r Rules) Equal(o Rules) bool {
	return slices.EqualFunc(r.Rules, o.Rules, Rule.equal) && r.Default == o.Default && slices.Equal(r.Failover, o.Failover)
}

func (rule Rule) equal(o Rule) bool {
	dec := func(a, b *decimal.Decimal) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
	return rule.Name == o.Name && slices.Equal(rule.Methods, o.Methods) && slices.Equal(rule.Currencies, o.Currencies) &&
		dec(rule.MinAmount, o.MinAmount) && dec(rule.MaxAmount, o.MaxAmount) && slices.Equal(rule.CardBrands, o.CardBrands) &&
		slices.Equal(rule.Countries, o.Countries) && rule.Connector == o.Connector && slices.Equal(rule.Split, o.Split) &&
		slices.Equal(rule.Failover, o.Failover)
}
