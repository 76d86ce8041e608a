package lostanswer

import (
	"context"
	"strconv"
	"testing"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// sandboxMode lets the production stage's live merchants connect a test
// key: stripe-mock refuses live keys (the mode rule has its own tests).
type sandboxMode struct{}

func (sandboxMode) Sandbox(context.Context, string) (bool, error) { return true, nil }

const ownKey, ownSecret = "sk_test_51LostAnswerOwnKey0001", "whsec_lostAnswerOwnAccount01"

// TestLostAnswerOwnAccount: a card payment on the hosted page of a
// merchant whose routing default is its own Stripe account; every write's
// answer lost in turn, each run ends paid once, with one intent at Stripe
// created with the account's key, never the platform's.
func TestLostAnswerOwnAccount(t *testing.T) {
	stg := production(t)
	stg.routing = routing.Rules{Default: "ownstripe"}
	svc := &acquireraccount.Service{Store: stg.st.Store, Sealer: stg.sealer, Mode: sandboxMode{},
		Checker: paywire.AccountAPIs{StripeAPIBase: stg.front.URL, LocalOnly: true}}
	stg.connect = func(t *testing.T, m testenv.Merchant) {
		if _, err := svc.Add(context.Background(), "test", acquireraccount.Input{MerchantID: m.ID, Name: "ownstripe", Kind: acquireraccount.Stripe,
			Values: map[string]string{acquireraccount.StripeSecretKey: ownKey, acquireraccount.StripeWebhookSecret: ownSecret}}); err != nil {
			t.Fatalf("connect the merchant's own account: %v", err)
		}
	}
	sweepOn(t, stg, path{name: "pay on the hosted page through the merchant's own Stripe account", setup: withRequest,
		act: func(r *run) {
			res := payOnTheHostedPage(r, "4242 4242 4242 4242")
			tx, err := testenv.PatientStore(r.t, r.st).Transaction(context.Background(), idOf(r, res["paymentId"]))
			if err != nil {
				r.t.Fatal(err)
			}
			if tx.Connector != "ownstripe" {
				r.t.Fatalf("transaction %d charged through %q, want ownstripe", tx.ID, tx.Connector)
			}
			for _, q := range stg.front.Requests() {
				if q.Reference == tx.Reference && q.Key != ownKey {
					r.t.Fatalf("a request for %s made with another key than the account's: %s %s", tx.Reference, q.Method, q.Path)
				}
			}
			r.vars["tx"] = strconv.FormatInt(tx.ID, 10)
		},
		want: paidOnce})
}
