package paycore

// Which connector a call goes to: an attempt is charged through the
// connector recorded on its transaction when the write-ahead record is
// written, and every later call about that transaction (lookup, 3-D Secure
// completion or closing, refund, void, refund status) goes to that same
// connector, whatever the default is now (internal/connector).

import (
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/routing"
)

// UnnamedConnector names Deps.Provider when Deps.Connectors is empty and
// the stage is no sandbox (tests that give a provider alone).
const UnnamedConnector = "default"

// ConnectorOf is the name of the connector transaction tx belongs to.
func (s *Service) ConnectorOf(tx *payment.Transaction) string {
	return s.Connectors.Recorded(tx.Connector)
}

// ProviderOf is the provider of the connector that charged tx (or is to).
func (s *Service) ProviderOf(tx *payment.Transaction) provider.Provider {
	return s.connector(s.ConnectorOf(tx))
}

// connector is the provider of connector name. Provider is the default's
// (a test may wrap it after New); a name the stage does not configure
// gets connector.Missing, whose every call fails: such a transaction stays
// open for the reconciler and is never sent to another acquirer.
func (s *Service) connector(name string) provider.Provider {
	if name == s.Connectors.Default() {
		return s.Provider
	}
	p, ok := s.Connectors.Get(name)
	if !ok {
		s.Log.Error("transaction of a connector this stage does not configure", "connector", name)
	}
	return p
}

// eventConnector is the connector an acquirer event came through: named,
// or the default for callers that name none.
func (s *Service) eventConnector(name string) string {
	if name == "" {
		return s.Connectors.Default()
	}
	return name
}

// bindConnector refuses (ErrUnbound) an event of connector from that is
// about a transaction another connector charged ("" from: not checked).
func (s *Service) bindConnector(tx *payment.Transaction, from, source string) error {
	if from == "" || from == s.ConnectorOf(tx) {
		return nil
	}
	return s.logUnbound(tx, &UnboundError{TransactionID: tx.ID,
		Reason: "event of connector " + from + " about a transaction charged through " + s.ConnectorOf(tx)}, source)
}

func defaultConnectors(d Deps) connector.Set {
	name := UnnamedConnector
	if d.Sandbox {
		name = connector.Sandbox
	}
	return connector.Single(name, d.Provider)
}

// anyConnector reports whether some configured connector is can.
func (s *Service) anyConnector(can func(provider.Provider) bool) bool {
	if can(s.Provider) {
		return true
	}
	for _, name := range s.Connectors.Names() {
		if p, _ := s.Connectors.Get(name); name != s.Connectors.Default() && can(p) {
			return true
		}
	}
	return false
}

// canCloseChallenge: p can close a pending 3-D Secure challenge.
func canCloseChallenge(p provider.Provider) bool {
	_, ab := p.(provider.ChallengeAbandoner)
	_, pc := p.(provider.PendingCloser)
	return ab || pc
}

// routeAttempt sets a's connector from merchant m's routing rules for an
// attempt of amount and unit whose charge reference is ref (a retry of
// the same attempt has the same reference, hence the same connector). A
// connector the rules pick that the stage does not configure is refused
// with 400 046 (Invalid payment provider): the caller has written nothing
// yet, or gives back the lease it took.
func (s *Service) routeAttempt(m *merchant.Merchant, a *Attempt, det *card.Details, amount decimal.Decimal, unit, ref string) error {
	route, rule := s.routeOf(m, *a, det, amount, unit, ref)
	name := route[0]
	if !s.Connectors.Has(name) {
		s.Log.Warn("routing picked a connector this stage does not configure", "merchant_id", m.ID, "connector", name, "rule", rule)
		return errkind.BadInput(fmt.Sprintf("The merchant's routing sends this payment to connector %q, which is not configured.", name),
			codes.InvalidPaymentProvider)
	}
	a.connector, a.route = name, route
	if s.Breaker.Open(name, s.Now()) {
		// The circuit is open: start on the first failover connector that
		// can take the attempt, when there is one.
		if next := s.nextConnector(*a, name, amount, unit); next != "" {
			s.Log.Warn("connector's circuit is open; the attempt starts on its failover", "merchant_id", m.ID,
				"connector", name, "failover", next)
			a.connector = next
		}
	}
	return nil
}

// routeOf is the route of attempt a of merchant m (the connector its
// routing picks, then that route's failover list) and the index of the
// rule that decided it (-1: none).
func (s *Service) routeOf(m *merchant.Merchant, a Attempt, det *card.Details, amount decimal.Decimal, unit, ref string) ([]string, int) {
	ra := routing.Attempt{Method: string(a.Method), Currency: unit, Amount: amount, Reference: ref}
	if det != nil {
		ra.CardBrand = string(det.Brand)
	}
	if a.Payer != nil {
		ra.Country = a.Payer.Country
	}
	name, rule := m.Routing.Pick(ra)
	if name == "" {
		name = s.Connectors.Default()
	}
	return append([]string{name}, m.Routing.FailoverOf(ra)...), rule
}
