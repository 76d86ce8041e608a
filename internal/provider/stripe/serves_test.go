package stripe_test

import (
	"testing"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payments"
	"github.com/payreq/payreq/internal/provider"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
)

// A production service with the Stripe connector enables only the
// selectors whose method Stripe serves (cards; no h2h selector is a card
// outside the sandbox); a provider without MethodServer, like the sandbox,
// keeps every selector the merchant has.
func TestSelectorsFollowTheConnector(t *testing.T) {
	p, err := stripeprov.New(stripeprov.Options{SecretKey: "sk_test_x"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Serves(provider.MethodCard) || p.Serves(provider.MethodWallet) || p.Serves(provider.MethodUPI) || p.Serves(provider.MethodQR) {
		t.Fatal("Stripe serves cards only")
	}
	prod := &merchant.Merchant{Methods: merchant.AllSelectors()[1:]}
	withStripe := payments.New(payments.Deps{Provider: p})
	for _, n := range prod.Methods {
		if withStripe.SelectorEnabled(prod, n) {
			t.Errorf("selector %d enabled in production with Stripe", n)
		}
	}
	if !withStripe.Serves(provider.MethodCard) || withStripe.Serves(provider.MethodQR) {
		t.Error("service: cards served, QR not")
	}
	sandbox := &merchant.Merchant{Sandbox: true, Methods: merchant.AllSelectors()}
	sim := payments.New(payments.Deps{Provider: allMethods{}, Sandbox: true})
	for _, n := range sandbox.Methods {
		if !sim.SelectorEnabled(sandbox, n) {
			t.Errorf("sandbox selector %d disabled", n)
		}
	}
}

type allMethods struct{ provider.Provider }
