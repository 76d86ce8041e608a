package paycore_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/routing"
)

// cardsOnly is an acquirer that takes cards in EUR only (as a connector
// with its own method and currency lists does).
type cardsOnly struct{ provider.Provider }

func (cardsOnly) Serves(m provider.Method) bool { return m == provider.MethodCard }

func (cardsOnly) CheckAmount(_ decimal.Decimal, unit string) error {
	if unit != "EUR" {
		return &provider.AmountError{Field: "unit", Code: codes.CurrencyNotAllowed, Detail: "not taken"}
	}
	return nil
}

// everything takes every method and currency.
type everything struct{ provider.Provider }

// A production stage whose default connector takes EUR cards only: a
// merchant whose rules can route wallets and USD to the other connector
// may create USD requests and use its wallet selectors and the hosted
// page's wallet tab; a merchant without rules may not. Which connector an
// attempt goes to is known only with the attempt, so creation and
// selectors are checked against every connector the rules can reach.
func TestChecksBeforeTheAttemptFollowTheMerchantsRouting(t *testing.T) {
	set, err := connector.New("cards", map[string]provider.Provider{"cards": cardsOnly{}, "other": everything{}})
	if err != nil {
		t.Fatal(err)
	}
	svc := paycore.New(paycore.Deps{Provider: cardsOnly{}, Connectors: set})
	wallet := merchant.WalletASelectors[0]
	plain := &merchant.Merchant{ID: "mer_plain", Methods: []int{wallet}}
	routed := &merchant.Merchant{ID: "mer_routed", Methods: []int{wallet}, Routing: routing.Rules{Rules: []routing.Rule{
		{Methods: []string{"wallet"}, Connector: "other"}, {Currencies: []string{"USD"}, Connector: "other"}}}}
	elsewhere := &merchant.Merchant{ID: "mer_elsewhere", Methods: []int{wallet}, Routing: routing.Rules{Default: "other"}}

	usd := decimal.RequireFromString("10.00")
	var fe *errkind.Error
	if err := svc.CheckAmount(plain, usd, "USD"); !errors.As(err, &fe) || fe.Fields[0].Code != codes.CurrencyNotAllowed {
		t.Fatalf("USD for a merchant on the default alone: %v, want 020", err)
	}
	for _, m := range []*merchant.Merchant{routed, elsewhere} {
		if err := svc.CheckAmount(m, usd, "USD"); err != nil {
			t.Errorf("%s: USD refused though its routing reaches a connector that takes it: %v", m.ID, err)
		}
		if !svc.SelectorEnabled(m, wallet) || !svc.Offers(m, provider.MethodWallet, "EUR") {
			t.Errorf("%s: wallets not offered though its routing reaches a connector that serves them", m.ID)
		}
	}
	if svc.SelectorEnabled(plain, wallet) || svc.Offers(plain, provider.MethodWallet, "EUR") || svc.Serves(plain, provider.MethodWallet) {
		t.Error("wallets offered to a merchant whose only connector takes cards")
	}
	if !svc.Offers(plain, provider.MethodCard, "EUR") || svc.Offers(plain, provider.MethodCard, "USD") {
		t.Error("cards: offered in the default's currency only")
	}
	// A merchant routed away from the default entirely: the default's
	// limits no longer apply to it.
	if !svc.Offers(elsewhere, provider.MethodCard, "USD") {
		t.Error("a merchant routed elsewhere is held to the default's currencies")
	}
}
