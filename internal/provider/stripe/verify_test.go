package stripe

import (
	"context"
	"testing"

	"github.com/payreq/payreq/internal/testing/stripetest"
)

// TestVerifyReadsTheBalance: the harmless call made when a merchant's
// Stripe account is saved is one GET /v1/balance that Stripe's own mock
// server accepts, and a key Stripe refuses fails it.
func TestVerifyReadsTheBalance(t *testing.T) {
	t.Parallel()
	base := stripetest.Start(t, nil)
	p, calls := newProvider(t, base)
	if err := p.Verify(context.Background()); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("calls: %d, want 1", n)
	}
	bad, _ := newProvider(t, base, func(o *Options) { o.SecretKey = "not-a-key" })
	if err := bad.Verify(context.Background()); err == nil {
		t.Fatal("a key Stripe refuses verified")
	}
}
