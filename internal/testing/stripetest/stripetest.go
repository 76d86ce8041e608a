// Package stripetest is Stripe for tests. Start runs Stripe's official mock
// server (stripe-mock, through internal/devstack/stripemock) per test: HTTP on
// a random loopback port, nothing downloaded, killed when the test ends.
//
// stripe-mock validates every request against Stripe's OpenAPI description
// and answers from fixtures; it keeps no state. Patch lets a test replace a
// resource's fixture (a succeeded PaymentIntent, say) to reach an outcome the
// bundled fixtures do not produce. Front stands before it and plays what
// Stripe does that stripe-mock does not: its rate limiter (front.go) and,
// with KeepState, what it remembers after its first answer (state.go):
// saved results per Idempotency-Key, intents and refunds, disputes, and
// events signed as Stripe signs them.
package stripetest

import (
	"context"
	"testing"

	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/testing/needs"
)

// Start runs stripe-mock and returns its base URL ("http://127.0.0.1:N").
// patch, when not nil, edits the bundled fixtures (resource name → object,
// e.g. fixtures["payment_intent"]) before the server loads them.
func Start(t testing.TB, patch func(resources map[string]map[string]any)) string {
	t.Helper()
	needs.External(t, "stripe-mock")
	ctx := context.Background()
	dir := t.TempDir()
	fixtures := ""
	if patch != nil {
		fixtures = patchedFixtures(t, ctx, dir, patch)
	}
	url, stop, err := stripemock.Run(ctx, dir, fixtures)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

func patchedFixtures(t testing.TB, ctx context.Context, dir string, patch func(map[string]map[string]any)) string {
	t.Helper()
	p, err := stripemock.WriteFixtures(ctx, dir, patch)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
