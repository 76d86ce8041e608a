package adyen_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/testing/adyentest"
)

// TestStripeDownEveryShopperChargedOnceThroughAdyen is the Stripe-down run:
// a production stack with both connectors, Stripe the default, and a
// merchant whose routing fails over to Adyen. Stripe refuses every
// connection (nothing listens at its address). Forty shoppers pay on the
// hosted page, four at a time: every one is approved, charged once, through
// Adyen; the first attempts record that Stripe did not process them, and
// once Stripe's circuit opens the attempts start on Adyen directly.
func TestStripeDownEveryShopperChargedOnceThroughAdyen(t *testing.T) {
	m := startMock(t)
	down := adyentest.Unreachable(t)
	stack := startAdyenStack(t, m, map[string]string{"PaymentConnector": "stripe",
		"LocalStripeSecretKey": "sk_test_down", "LocalStripeApiBase": down, "LocalStripeWebhookSecrets": "whsec_down"})
	e := &adyenEnv{m: m, stack: stack, base: stack.Info.APIBase, key: stack.Info.Merchant.APIKey}
	ctx := context.Background()
	mer, err := stack.Store.Merchant(ctx, stack.Info.Merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	mer.Routing = routing.Rules{Default: "stripe", Failover: []string{"adyen"}}
	if err := stack.Store.UpdateMerchant(ctx, mer); err != nil {
		t.Fatal(err)
	}

	const shoppers, atOnce = 40, 4
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		txs        []*payment.Transaction
		failedOver int
	)
	work := make(chan int)
	for range atOnce {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				_, tx := e.pay(t, "Ann Lee", "4111111111111111", "12.00")
				mu.Lock()
				txs = append(txs, tx)
				if strings.Join(tx.FailedOver, ",") == "stripe" {
					failedOver++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range shoppers {
		work <- i
	}
	close(work)
	wg.Wait()
	if len(txs) != shoppers {
		t.Fatalf("%d payments answered, want %d", len(txs), shoppers)
	}
	for _, tx := range txs {
		if tx.Status != payment.TxApproved || tx.Connector != "adyen" {
			t.Fatalf("transaction %d: status %d through %q, want approved through adyen", tx.ID, tx.Status, tx.Connector)
		}
		if n := m.Front.Authorisations(tx.Reference); n != 1 {
			t.Fatalf("transaction %d authorised %d times at Adyen, want once", tx.ID, n)
		}
	}
	// Stripe's circuit opens after a few unprocessed charges in this
	// process: the later attempts start on Adyen without trying Stripe.
	if failedOver == 0 || failedOver == shoppers {
		t.Fatalf("%d of %d attempts failed over from Stripe; want the first ones only (then the circuit opens)", failedOver, shoppers)
	}
	t.Logf("Stripe down: %d shoppers approved once through Adyen; %d failed over from Stripe, %d started on Adyen (circuit open)",
		shoppers, failedOver, shoppers-failedOver)
}
