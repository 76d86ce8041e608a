package lostanswer

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
	"github.com/payreq/payreq/internal/webhook"
)

// stage is a stack the sweep runs on: the sandbox (the sandbox acquirer
// and its ledger) or production (the Stripe connector, stripe-mock behind
// a front that keeps state and sends Stripe's signed events).
type stage struct {
	st     *devstack.Stack
	faults *devstack.FaultProxy
	front  *stripetest.Front // production with Stripe only
	sealer *seal.Sealer
	// live: a production stage (live merchants, no sandbox ledger).
	live bool
	// adyen: the Adyen front of the failover stage, which charges there.
	adyen *adyenmock.Mock
	// routing of the stage's merchants.
	routing routing.Rules
	// connect, when set, gives each new merchant what its routing needs
	// (its own acquirer account), before the run's writes are counted.
	connect func(t *testing.T, m testenv.Merchant)
}

func sandbox(t *testing.T) *stage {
	st := testenv.Stack(t)
	return &stage{st: st, faults: testenv.Faults(t)}
}

const webhookSecret = "whsec_lost_answer_sweep"

// production starts a production stack of its own tables behind its own
// fault proxy, for t's lifetime.
func production(t *testing.T) *stage {
	testenv.Stack(t) // the emulators
	front, err := stripetest.NewFront(stripetest.Start(t, stripemock.Succeeded))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.KeepState()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Options{StateDir: dir, Stage: "production", ScheduleEvery: time.Hour, Faults: true,
		StackName: fmt.Sprintf("lostprod-%d", os.Getpid()),
		Params:    map[string]string{"LocalStripeSecretKey": "sk_test_local", "LocalStripeApiBase": front.URL, "LocalStripeWebhookSecrets": webhookSecret}})
	if err != nil {
		t.Fatalf("start the production stack: %v", err)
	}
	t.Cleanup(st.Close)
	front.SendEventsTo(st.Info.APIBase+"/callbacks/svcwh", webhookSecret)
	return &stage{st: st, faults: st.Faults(), front: front, sealer: sealerOf(t, dir), live: true}
}

// sealerOf is the sealer of the stack whose state is in dir (its seal key).
func sealerOf(t *testing.T, dir string) *seal.Sealer {
	t.Helper()
	key, err := devstack.SealKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}

// newMerchant creates a merchant of the stage (live on production).
func (s *stage) newMerchant(t *testing.T, mutate func(*merchant.Merchant)) testenv.Merchant {
	t.Helper()
	if !s.live {
		return testenv.NewMerchant(t, mutate)
	}
	apiKey := merchant.NewAPIKey(false)
	now := time.Now().UTC()
	m := &merchant.Merchant{ID: merchant.NewID(), Name: "Live Shop", Methods: merchant.AllSelectors(),
		APIKeyHash: merchant.HashAPIKey(apiKey), APIKeyPrefix: merchant.KeyPrefix(apiKey), CreatedAt: now, UpdatedAt: now}
	m.SealedAPIKey = s.sealer.Seal(apiKey, m.ID)
	secret, err := webhook.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	m.SealedSecret = s.sealer.Seal(secret, m.ID)
	m.Routing = s.routing
	mutate(m)
	testenv.Seeded(t, "merchant", testenv.PatientStore(t, s.st).CreateMerchant(context.Background(), m))
	return testenv.Merchant{Merchant: m, APIKey: apiKey, WebhookSecret: secret}
}

// charged is 1 when the acquirer holds money taken for tx: the sandbox
// ledger's live charge, or Stripe's succeeded PaymentIntent for its
// reference (the front counts every intent created for it).
func (s *stage) charged(ctx context.Context, store *dynamo.Store, tx *payment.Transaction) int {
	if s.adyen != nil {
		return s.adyen.Front.Authorisations(tx.Reference)
	}
	if s.front == nil {
		if e, err := store.LedgerEntry(ctx, tx.Reference); err == nil && e.Kind == ledger.KindCharge && e.Status == provider.Approved && !e.Abandoned {
			return 1
		}
		return 0
	}
	n := 0
	if pi := s.front.IntentOf(tx.Reference); pi != nil && pi["status"] == "succeeded" {
		n = 1
	}
	if s.front.IntentsOf(tx.Reference) > 1 {
		n = s.front.IntentsOf(tx.Reference) // more than one intent for one reference: charged twice
	}
	return n
}

// notices are the notifications of request requestID the merchant got:
// on the sandbox, what its endpoint received; on production, where a live
// merchant's notify URL must be HTTPS (the test endpoint is not), the
// delivery attempts the notifier recorded (an attempt per event is what
// counts), read back from their event ids.
func (s *stage) notices(r *run, requestID int64) []notice {
	if !s.live {
		var out []notice
		id := strconv.FormatInt(requestID, 10)
		for _, n := range notifications(r.t).of(r.m.ID) {
			if n.requestID == id {
				out = append(out, n)
			}
		}
		return out
	}
	ds, err := testenv.PatientStore(r.t, s.st).Deliveries(context.Background(), requestID, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	slices.SortFunc(ds, func(a, b payment.DeliveryAttempt) int { return a.At.Compare(b.At) })
	var out []notice
	for _, d := range ds {
		if d.Outcome == "superseded" {
			continue
		}
		n := notice{webhookID: d.EventID, requestID: strconv.FormatInt(requestID, 10), at: d.At}
		switch {
		case strings.Contains(d.EventID, "_rf_") && strings.HasSuffix(d.EventID, "_refunded"):
			n.typ = "refund.succeeded"
		case strings.Contains(d.EventID, "_rf_"):
			n.typ = "refund.failed"
		case strings.Contains(d.EventID, "_dp_"):
			n.typ = "dispute.created"
		default: // evt_<transaction>_<status>
			n.txStatus = d.EventID[strings.LastIndexByte(d.EventID, '_')+1:]
			n.reqStatus = "2"
			if n.txStatus == "1" {
				n.reqStatus = "1"
			}
		}
		out = append(out, n)
	}
	return out
}
