package lostanswer

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/adyentest"
)

// failoverStage starts a production stack with Stripe (the default,
// refusing every connection) and Adyen (Prism before Adyen's test
// platform), whose merchants fail over from Stripe to Adyen. The circuit
// breaker is set out of reach, so every run's attempt tries Stripe first
// and moves: each run makes the same writes.
func failoverStage(t *testing.T) *stage {
	testenv.Stack(t) // the emulators
	mock := adyentest.Start(t)
	down := adyentest.Unreachable(t)
	params := adyentest.StackParams(mock)
	maps.Copy(params, map[string]string{"PaymentConnector": "stripe", "CircuitBreakerThreshold": "1000000",
		"LocalStripeSecretKey": "sk_test_down", "LocalStripeApiBase": down, "LocalStripeWebhookSecrets": webhookSecret})
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{StateDir: dir, Stage: "production", ScheduleEvery: time.Hour, Faults: true,
		StackName: fmt.Sprintf("lostfail-%d", os.Getpid()),
		Params:    params})
	if err != nil {
		t.Fatalf("start the failover stack: %v", err)
	}
	t.Cleanup(st.Close)
	return &stage{st: st, faults: st.Faults(), sealer: sealerOf(t, dir), live: true, adyen: mock,
		routing: routing.Rules{Default: "stripe", Failover: []string{"adyen"}}}
}

// TestLostAnswerFailover: a card payment on the hosted page while Stripe
// is down, moved to Adyen (the failover write) and charged there; every
// write's answer lost in turn, each run ends paid once, authorised once at
// Adyen.
func TestLostAnswerFailover(t *testing.T) {
	stg := failoverStage(t)
	sweepOn(t, stg, path{name: "pay on the hosted page (Stripe down, failover to Adyen)", setup: withRequest,
		act:  func(r *run) { payOnTheHostedPage(r, "4111 1111 1111 1111") },
		want: paidOnce})
}
