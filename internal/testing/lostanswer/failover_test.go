package lostanswer

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testenv"
)

const (
	adyenKey     = "AQE_lost_answer_key_not_secret"
	adyenHMAC    = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	adyenAccount = "PayreqECOM"
)

// failoverStage starts a production stack with Stripe (the default,
// refusing every connection) and Adyen (Prism before Adyen's test
// platform), whose merchants fail over from Stripe to Adyen. The circuit
// breaker is set out of reach, so every run's attempt tries Stripe first
// and moves: each run makes the same writes.
func failoverStage(t *testing.T) *stage {
	testenv.Stack(t) // the emulators
	infra, err := devstack.InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := devstack.EnsureNodeModules(infra, io.Discard); err != nil {
		t.Fatal(err)
	}
	mock, err := adyenmock.Run(context.Background(), infra, t.TempDir(), adyenKey, adyenHMAC)
	if err != nil {
		t.Fatalf("start Prism and the Adyen front: %v", err)
	}
	t.Cleanup(mock.Stop)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{StateDir: dir, Stage: "production", ScheduleEvery: time.Hour, Faults: true,
		StackName: fmt.Sprintf("lostfail-%d", os.Getpid()),
		Params: map[string]string{"PaymentConnector": "stripe", "CircuitBreakerThreshold": "1000000",
			"LocalStripeSecretKey": "sk_test_down", "LocalStripeApiBase": down, "LocalStripeWebhookSecrets": webhookSecret,
			"LocalAdyenApiKey": adyenKey, "LocalAdyenApiBase": mock.URL, "LocalAdyenHmacKeys": adyenHMAC, "AdyenMerchantAccount": adyenAccount}})
	if err != nil {
		t.Fatalf("start the failover stack: %v", err)
	}
	t.Cleanup(st.Close)
	key, err := devstack.SealKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return &stage{st: st, faults: st.Faults(), sealer: sealer, live: true, adyen: mock,
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
