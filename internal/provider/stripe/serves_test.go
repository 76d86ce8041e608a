package stripe_test

import (
	"errors"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
)

// A production service with the Stripe connector enables every h2h
// selector of a method the routing table serves (all but the sandbox's
// selector 1), and offers each method only in the currencies its route
// takes; a provider without MethodServer, like the sandbox, keeps every
// selector the merchant has.
func TestSelectorsFollowTheConnector(t *testing.T) {
	p, err := stripeprov.New(stripeprov.Options{SecretKey: "sk_test_x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []provider.Method{provider.MethodCard, provider.MethodWallet, provider.MethodUPI, provider.MethodQR, provider.MethodAlternative} {
		if !p.Serves(m) {
			t.Errorf("Stripe routing does not serve %s", m)
		}
	}
	prod := &merchant.Merchant{Methods: merchant.AllSelectors()[1:]}
	withStripe := paycore.New(paycore.Deps{Provider: p})
	for _, n := range prod.Methods {
		if !withStripe.SelectorEnabled(prod, n) {
			t.Errorf("selector %d disabled in production with Stripe", n)
		}
	}
	for _, tc := range []struct {
		m        provider.Method
		selector int
		unit     string
		ok       bool
	}{
		{provider.MethodUPI, 30, "INR", true}, {provider.MethodUPI, 31, "EUR", false},
		{provider.MethodQR, 0, "BRL", true}, {provider.MethodQR, 0, "THB", true}, {provider.MethodQR, 0, "SGD", true},
		{provider.MethodQR, 0, "CNY", true}, {provider.MethodQR, 0, "INR", true}, {provider.MethodQR, 0, "EUR", false},
		{provider.MethodAlternative, 27, "USD", true}, {provider.MethodAlternative, 27, "SEK", false},
		{provider.MethodAlternative, 43, "SEK", true}, {provider.MethodAlternative, 43, "USD", false},
		{provider.MethodWallet, 44, "EUR", true}, {provider.MethodCard, 0, "JPY", true},
	} {
		err := p.CheckRoute(tc.m, tc.selector, tc.unit)
		var ae *provider.AmountError
		if tc.ok && err != nil || !tc.ok && (!errors.As(err, &ae) || ae.Code != codes.CurrencyNotAllowed || ae.Field != "unit") {
			t.Errorf("%s selector %d in %s: %v, want ok %v (else 020 on unit)", tc.m, tc.selector, tc.unit, err, tc.ok)
		}
		if tc.selector == 0 && withStripe.Offers(prod, tc.m, tc.unit) != tc.ok {
			t.Errorf("service offers %s in %s: %v", tc.m, tc.unit, !tc.ok)
		}
	}
	if withStripe.SelectorEnabled(&merchant.Merchant{Methods: []int{merchant.SandboxSelector}}, merchant.SandboxSelector) {
		t.Error("the sandbox selector is enabled in production")
	}
	sandbox := &merchant.Merchant{Sandbox: true, Methods: merchant.AllSelectors()}
	sim := paycore.New(paycore.Deps{Provider: allMethods{}, Sandbox: true})
	for _, n := range sandbox.Methods {
		if !sim.SelectorEnabled(sandbox, n) {
			t.Errorf("sandbox selector %d disabled", n)
		}
	}
}

type allMethods struct{ provider.Provider }
