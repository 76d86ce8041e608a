package stripe

import (
	"context"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// These tests run the connector through stripe-go against stripe-mock,
// which validates every request against Stripe's OpenAPI description (an
// unknown or malformed parameter is a 400) and answers from fixtures.
// stripe-mock is stateless, so outcomes come from its fixtures: the bundled
// ones (an intent in requires_payment_method) and patched ones.

func TestStripeMockBundledFixtures(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, stripetest.Start(t, nil))
	ctx := context.Background()
	// Interactive and batch charges: every parameter is accepted; the
	// bundled intent has not succeeded, so the charge is declined.
	for _, present := range []bool{true, false} {
		out, err := p.Charge(ctx, chargeReq("4242424242424242", present))
		if err != nil || out.Status != provider.Declined || out.Code != codes.DeclinedContactIssuer || out.ProviderRef == "" {
			t.Fatalf("charge (cardholder present %v): %+v %v", present, out, err)
		}
	}
	// stripe-mock knows no idempotency: the close request succeeds, which is
	// Stripe's answer for a reference never charged.
	if _, err := p.Lookup(ctx, "ptx_42"); !errors.Is(err, provider.ErrUnknownReference) {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := p.find(ctx, "ptx_42", false); err != nil && !errors.Is(err, ErrNotYetVisible) {
		t.Fatalf("search: %v", err)
	}
	if _, err := p.CompleteChallenge(ctx, provider.ChallengeResult{ProviderRef: "pi_123"}); err != nil {
		t.Fatalf("retrieve after challenge: %v", err)
	}
	ro, err := p.Refund(ctx, provider.RefundRequest{RefundID: "rf_1", ProviderRef: "pi_123", ChargeReference: "ptx_42",
		Amount: decimal.RequireFromString("1.50"), Unit: "EUR"})
	if err != nil || ro.Status != provider.Approved {
		t.Fatalf("refund: %+v %v", ro, err)
	}
}

func TestStripeMockApprovedPayment(t *testing.T) {
	t.Parallel()
	base := stripetest.Start(t, func(r map[string]map[string]any) {
		pi := r["payment_intent"]
		pi["status"], pi["next_action"], pi["last_payment_error"] = "succeeded", nil, nil
	})
	p, calls := newProvider(t, base)
	out, err := p.Charge(context.Background(), chargeReq("4242424242424242", true))
	if err != nil || out.Status != provider.Approved || out.Code != "" || out.ProviderRef == "" {
		t.Fatalf("charge: %+v %v", out, err)
	}
	if n := calls.n.Load(); n != 2 {
		t.Fatalf("Stripe calls per approved payment: %d, want 2", n)
	}
	out, err = p.CompleteChallenge(context.Background(), provider.ChallengeResult{ProviderRef: out.ProviderRef})
	if err != nil || out.Status != provider.Approved {
		t.Fatalf("retrieve: %+v %v", out, err)
	}
}

// startThreeDSMock runs stripe-mock with every PaymentIntent waiting for
// 3-D Secure at the returned ACS URL.
func startThreeDSMock(t *testing.T) (base, acs string) {
	t.Helper()
	acs = "https://hooks.stripe.com/3d_secure_2/hosted?merchant=acct_1&payment_intent=pi_1"
	base = stripetest.Start(t, func(r map[string]map[string]any) {
		pi := r["payment_intent"]
		pi["status"], pi["last_payment_error"] = "requires_action", nil
		pi["next_action"] = map[string]any{"type": "redirect_to_url",
			"redirect_to_url": map[string]any{"url": acs, "return_url": "https://pay.example/back"}}
	})
	return base, acs
}

func TestStripeMockThreeDSRedirect(t *testing.T) {
	t.Parallel()
	base, acs := startThreeDSMock(t)
	p, _ := newProvider(t, base)
	out, err := p.Charge(context.Background(), chargeReq("4000002760003184", true))
	if err != nil || out.Status != provider.Pending || out.NextAction == nil || out.NextAction.URL != acs ||
		out.NextAction.Type != provider.ActionThreeDSRedirect {
		t.Fatalf("3-D Secure charge: %+v %v", out, err)
	}
	if _, err := p.CompleteChallenge(context.Background(), provider.ChallengeResult{ProviderRef: out.ProviderRef}); !errors.Is(err, ErrChallengeOpen) {
		t.Fatalf("open challenge: %v", err)
	}
	if st, err := p.ChallengeStatus(context.Background(), out.ProviderRef); err != nil || st.NextAction == nil || st.NextAction.URL != acs {
		t.Fatalf("challenge status: %+v %v", st, err)
	}
	// A batch row (nobody to answer) is cancelled and declined 004.
	out, err = p.Charge(context.Background(), chargeReq("4000002760003184", false))
	if err != nil || out.Status != provider.Declined || out.Code != codes.ThreeDSDecline {
		t.Fatalf("batch 3-D Secure: %+v %v", out, err)
	}
}

// A wallet card the issuer wants authenticated goes through the same
// challenge step as a card: from a Google Pay token (tok_…, one
// PaymentMethod created from it) and from Stripe.js's Apple Pay
// PaymentMethod (pm_…, charged as is), the shopper gets the 3-D Secure
// redirect; with nobody to answer (no cardholder present) it is declined 004.
func TestStripeMockWalletThreeDSRedirect(t *testing.T) {
	t.Parallel()
	base, acs := startThreeDSMock(t)
	p, calls := newProvider(t, base)
	for _, c := range []struct {
		token string
		calls int64 // Stripe calls: the PaymentMethod from a token, then the intent
	}{{"tok_visa", 2}, {"pm_card_visa", 1}} {
		req := chargeReq("", true)
		req.Method, req.Card, req.CVV, req.WalletToken = provider.MethodWallet, nil, "", c.token
		before := calls.n.Load()
		out, err := p.Charge(context.Background(), req)
		if err != nil || out.Status != provider.Pending || out.NextAction == nil || out.NextAction.URL != acs ||
			out.NextAction.Type != provider.ActionThreeDSRedirect {
			t.Fatalf("%s: 3-D Secure wallet charge: %+v %v", c.token, out, err)
		}
		if n := calls.n.Load() - before; n != c.calls {
			t.Errorf("%s: %d Stripe calls, want %d", c.token, n, c.calls)
		}
		req = chargeReq("", false)
		req.Method, req.Card, req.CVV, req.WalletToken = provider.MethodWallet, nil, "", c.token
		if out, err := p.Charge(context.Background(), req); err != nil || out.Status != provider.Declined || out.Code != codes.ThreeDSDecline {
			t.Fatalf("%s: 3-D Secure wallet charge with nobody to answer: %+v %v", c.token, out, err)
		}
	}
}
