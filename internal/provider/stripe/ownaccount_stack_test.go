package stripe_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testing/stripetest"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// sandboxMode lets the production stack's merchant connect a test key:
// stripe-mock refuses live keys, and the mode rule (test keys serve
// sandbox merchants only) has its own tests (cmd/payctl, acquireraccount).
type sandboxMode struct{}

func (sandboxMode) Sandbox(context.Context, string) (bool, error) { return true, nil }

// TestOwnStripeAccount: on the production stack, a merchant whose routing
// default is its own Stripe account (connected through the account
// service, checked against stripe-mock, sealed) is charged with that
// account's key, not the platform's: the front sees the PaymentIntent
// created with the account's key, the transaction shows the account as
// its connector, and its refund goes to the same key. The account's
// events arrive on its own address, verified with its own signing secret:
// the platform's secret is refused there and the account's on the
// platform's address; signed right, a refund event settles the refund,
// and 30 deliveries of one event at once change it once. A route to an
// account the merchant lacks, or has disabled, answers 046 and charges
// nothing.
func TestOwnStripeAccount(t *testing.T) {
	e := startAfter(t)
	ctx := context.Background()
	merchantID := e.stack.Info.Merchant.ID
	key, err := devstack.SealKey(e.state)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	accounts := &acquireraccount.Service{Store: e.stack.Store, Sealer: sealer, Mode: sandboxMode{},
		Checker: paywire.AccountAPIs{StripeAPIBase: e.front.URL, LocalOnly: true}}
	const ownKey, ownSecret = "sk_test_51OwnAccountKeyAbcd1234", "whsec_ownAccountSecret9876"
	for _, name := range []string{"ownstripe", "offstripe"} {
		if _, err := accounts.Add(ctx, "test", acquireraccount.Input{MerchantID: merchantID, Name: name, Kind: acquireraccount.Stripe,
			Values: map[string]string{acquireraccount.StripeSecretKey: ownKey, acquireraccount.StripeWebhookSecret: ownSecret}}); err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
	}
	if _, err := accounts.SetStatus(ctx, "test", merchantID, "offstripe", acquireraccount.Disabled); err != nil {
		t.Fatal(err)
	}
	mer, err := e.stack.Store.Merchant(ctx, merchantID)
	if err != nil {
		t.Fatal(err)
	}
	mer.Routing = routing.Rules{Rules: []routing.Rule{
		{Currencies: []string{"USD"}, Connector: "nosuch"},
		{Currencies: []string{"GBP"}, Connector: "offstripe"},
	}, Default: "ownstripe"}
	if err := e.stack.Store.UpdateMerchant(ctx, mer); err != nil {
		t.Fatal(err)
	}
	e.front.AnswerRefunds("pending")
	platformURL, ownURL := e.base+"/callbacks/svcwh", e.base+"/callbacks/svcwh/"+merchantID+"/ownstripe"

	// Charged with the account's key.
	tx := e.paid(t, "20.00", "EUR")
	if tx.Connector != "ownstripe" {
		t.Fatalf("transaction's connector %q, want ownstripe", tx.Connector)
	}
	if v := e.view(t, tx.ID); v["connector"] != "ownstripe" {
		t.Fatalf("GET /transactions/%d: connector %v", tx.ID, v["connector"])
	}
	keysOf := func(method, path string) []string {
		var keys []string
		for _, r := range e.front.Requests() {
			if r.Method == method && r.Path == path && (path != "/v1/payment_intents" || r.Reference == tx.Reference) {
				keys = append(keys, r.Key)
			}
		}
		return keys
	}
	if keys := keysOf("POST", "/v1/payment_intents"); len(keys) == 0 || strings.Join(keys, ",") != strings.TrimSuffix(strings.Repeat(ownKey+",", len(keys)), ",") {
		t.Fatalf("keys the intent of %s was created with: %v, want the account's only", tx.Reference, keys)
	}

	// Its refund: to the same key, answered pending.
	if v := e.refund(t, tx.ID); v["status"] != "processing" {
		t.Fatalf("refund Stripe answered pending: %v", v)
	}
	if keys := keysOf("POST", "/v1/refunds"); len(keys) != 1 || keys[0] != ownKey {
		t.Fatalf("keys of the refund: %v, want the account's", keys)
	}
	refunds := e.front.RefundsOf(tx.ProviderRef)
	if len(refunds) != 1 {
		t.Fatalf("refunds at Stripe: %v", refunds)
	}
	refund := refunds[0]
	refund["status"] = "succeeded"
	body := e.front.Event("refund.updated", refund)

	// Signed with the wrong secret for the address: refused, nothing changed.
	for _, c := range []struct{ url, secret, what string }{
		{ownURL, afterSecret, "the platform's secret on the account's address"},
		{platformURL, ownSecret, "the account's secret on the platform's address"},
		{e.base + "/callbacks/svcwh/" + merchantID + "/nosuch", ownSecret, "an unknown account's address"},
		{e.base + "/callbacks/svcwh/" + merchantID + "/offstripe", ownSecret, "a disabled account's address"},
		{e.base + "/callbacks/svcwh/mer_other/ownstripe", ownSecret, "another merchant's address"},
	} {
		a, err := stripetest.PostEvent(c.url, c.secret, body)
		if err != nil || a.Status != 401 || !strings.Contains(string(a.Body), "signature is invalid") {
			t.Fatalf("%s: %v %d %s, want 401 invalid signature", c.what, err, a.Status, a.Body)
		}
	}
	if v := e.view(t, tx.ID); refundState(v) != "processing" {
		t.Fatalf("a refused event settled the refund: %v", v)
	}

	// Signed with the account's secret on its address, 30 at once: settled once.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changed int
	)
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := stripetest.PostEvent(ownURL, ownSecret, body)
			if err != nil || a.Status != 200 {
				t.Errorf("event on the account's address: %v %d %s", err, a.Status, a.Body)
				return
			}
			if m := ack(t, a); m["changed"] == true {
				mu.Lock()
				changed++
				mu.Unlock()
			} else if m["ignored"] == true {
				t.Errorf("event on the account's address ignored: %s", a.Body)
			}
		}()
	}
	wg.Wait()
	if changed != 1 {
		t.Fatalf("30 deliveries changed the refund %d times, want once", changed)
	}
	if v := e.view(t, tx.ID); refundState(v) != "refunded" {
		t.Fatalf("refund after the account's event: %v", v)
	}

	// Routes to an account the merchant lacks or has disabled: 046, nothing charged.
	before := len(e.front.Requests())
	for _, unit := range []string{"USD", "GBP"} {
		id := e.request(t, "10.00", unit)
		r := e.payCard(t, e.session(t, id))
		if r.Status != 400 || !strings.Contains(string(r.Body), `"046"`) {
			t.Fatalf("%s payment routed to a missing or disabled account: %d %s, want 400 046", unit, r.Status, r.Body)
		}
		if txs := e.txs(t, id); len(txs) != 0 {
			t.Fatalf("%s: %d transactions written", unit, len(txs))
		}
	}
	for _, r := range e.front.Requests()[before:] {
		if r.Method == "POST" && r.Path == "/v1/payment_intents" {
			t.Fatalf("a refused payment reached Stripe: %+v", r)
		}
	}
}

// refundState is the status of the refund GET /transactions/{id} shows
// ("" when none).
func refundState(v map[string]any) string {
	if rf, ok := v["refund"].(map[string]any); ok {
		return fmt.Sprint(rf["status"])
	}
	return ""
}
