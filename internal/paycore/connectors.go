package paycore

// Which connector a call goes to: an attempt is charged through the
// connector recorded on its transaction when the write-ahead record is
// written, and every later call about that transaction (lookup, 3-D Secure
// completion or closing, refund, void, refund status) goes to that same
// connector, whatever the default is now (internal/connector).

import (
	"context"
	"fmt"
	"strings"

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

// AccountConnectors resolves a merchant's own acquirer accounts
// (internal/acquireraccount), which routing names beside the stage's
// connectors. A transaction records the account's name; with the
// transaction's merchant it names the account.
type AccountConnectors interface {
	// Account returns the provider charging through merchantID's account
	// name, built with that account's own credentials, and whether the
	// account is active (a disabled one takes no new attempt, but the
	// calls about the transactions it charged still reach it). An error
	// wrapping errkind.NotFound: the merchant has no such account (or its
	// credentials no longer open); any other error is transient.
	Account(ctx context.Context, merchantID, name string) (p provider.Provider, active bool, err error)
}

// ConnectorOf is the name of the connector transaction tx belongs to.
func (s *Service) ConnectorOf(tx *payment.Transaction) string {
	return s.Connectors.Recorded(tx.Connector)
}

// ProviderOf is the provider of the connector that charged tx (or is to):
// a stage connector, or the merchant's own account of that name.
func (s *Service) ProviderOf(ctx context.Context, tx *payment.Transaction) provider.Provider {
	return s.providerFor(ctx, tx.MerchantID, s.ConnectorOf(tx))
}

// stageConnector reports whether name is one of the stage's connectors
// (never a merchant's own account: their names are disjoint).
func (s *Service) stageConnector(name string) bool {
	return name == s.Connectors.Default() || s.Connectors.Has(name)
}

// providerFor is the provider of connector name for merchant merchantID.
// A stage connector is the stage's (Provider for the default: a test may
// wrap it after New). Any other name is the merchant's own account,
// active or disabled (its money is there). A name that is neither gets
// connector.Missing, whose every call fails: such a transaction stays open
// for the reconciler and is never sent to another acquirer.
func (s *Service) providerFor(ctx context.Context, merchantID, name string) provider.Provider {
	if name == s.Connectors.Default() {
		return s.Provider
	}
	if p, ok := s.Connectors.Get(name); ok {
		return p
	}
	if s.Accounts != nil && merchantID != "" {
		p, _, err := s.Accounts.Account(ctx, merchantID, name)
		if err == nil {
			return p
		}
		if !errkind.Is(err, errkind.NotFound) {
			s.Log.Error("read the merchant's own account", "merchant_id", merchantID, "connector", name, "error", err.Error())
			return connector.Missing(name)
		}
	}
	s.Log.Error("transaction of a connector this stage does not configure", "merchant_id", merchantID, "connector", name)
	return connector.Missing(name)
}

// connector is the provider of stage connector name (connector.Missing
// when the stage lacks it).
func (s *Service) connector(name string) provider.Provider {
	return s.providerFor(context.Background(), "", name)
}

// attemptProvider is the provider of connector name for attempt a: a
// stage connector, or one of the merchant's own active accounts routeAttempt
// resolved; ok false when neither.
func (s *Service) attemptProvider(a Attempt, name string) (provider.Provider, bool) {
	if s.stageConnector(name) {
		return s.connector(name), true
	}
	p, ok := a.accounts[name]
	return p, ok
}

// breakerKey is the circuit of connector name for merchant merchantID: a
// stage connector's is shared by every merchant; an own account's is its
// merchant's alone (two merchants may name accounts alike).
func (s *Service) breakerKey(merchantID, name string) string {
	if s.stageConnector(name) {
		return name
	}
	return merchantID + "/" + name
}

// AccountEventConnector is the connector name an event received on the
// address of merchantID's own account name carries (callbacks): a
// connector name has no "/", so it never meets a stage connector's.
func AccountEventConnector(merchantID, name string) string {
	return merchantID + "/" + name
}

// eventProvider is the provider of the connector an acquirer event came
// through: a stage connector by name (the default for callers that name
// none), or a merchant's own account (AccountEventConnector).
func (s *Service) eventProvider(ctx context.Context, from string) provider.Provider {
	if from == "" {
		return s.Provider
	}
	if merchantID, name, ok := strings.Cut(from, "/"); ok {
		return s.providerFor(ctx, merchantID, name)
	}
	return s.connector(from)
}

// bindConnector refuses (ErrUnbound) an event of connector from that is
// about a transaction another connector charged ("" from: not checked).
// An own account's event binds only to its merchant's transactions
// charged through that account.
func (s *Service) bindConnector(tx *payment.Transaction, from, source string) error {
	if merchantID, name, ok := strings.Cut(from, "/"); ok {
		if merchantID == tx.MerchantID && name == s.ConnectorOf(tx) && !s.stageConnector(name) {
			return nil
		}
	} else if from == "" || from == s.ConnectorOf(tx) && s.stageConnector(from) {
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
// the same attempt has the same reference, hence the same connector). The
// rules name the stage's connectors and the merchant's own accounts
// (resolved here, active ones only). A connector the rules pick that is
// neither configured on the stage nor an active account of the merchant
// is refused with 400 046 (Invalid payment provider): the caller has
// written nothing yet, or gives back the lease it took.
func (s *Service) routeAttempt(ctx context.Context, m *merchant.Merchant, a *Attempt, det *card.Details, amount decimal.Decimal, unit, ref string) error {
	route, rule := s.routeOf(m, *a, det, amount, unit, ref)
	a.accounts = nil
	for _, n := range route {
		if s.stageConnector(n) || s.Accounts == nil {
			continue
		}
		p, active, err := s.Accounts.Account(ctx, m.ID, n)
		switch {
		case err != nil && !errkind.Is(err, errkind.NotFound):
			return fmt.Errorf("read account %s of merchant %s: %w", n, m.ID, err)
		case err == nil && active:
			if a.accounts == nil {
				a.accounts = map[string]provider.Provider{}
			}
			a.accounts[n] = p
		}
	}
	name := route[0]
	if _, ok := s.attemptProvider(*a, name); !ok {
		s.Log.Warn("routing picked a connector this stage does not configure", "merchant_id", m.ID, "connector", name, "rule", rule)
		return errkind.BadInput(fmt.Sprintf("The merchant's routing sends this payment to connector %q, which is not configured.", name),
			codes.InvalidPaymentProvider)
	}
	a.connector, a.route = name, route
	if s.Breaker.Open(s.breakerKey(m.ID, name), s.Now()) {
		// The circuit is open: start on the first failover connector that
		// can take the attempt, when there is one.
		if next := s.nextConnector(*a, m.ID, name, amount, unit); next != "" {
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
