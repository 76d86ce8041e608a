package dynamo_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testenv"
)

// acceptAll stands in for the acquirer's harmless call: these tests are
// about the writes (payctl's test makes the real calls).
type acceptAll struct{}

func (acceptAll) Check(context.Context, acquireraccount.Kind, map[string]string) error { return nil }

type sandboxMerchants struct{}

func (sandboxMerchants) Sandbox(context.Context, string) (bool, error) { return true, nil }

func connectorService(t *testing.T, db dynamo.API) (*acquireraccount.Service, *dynamo.Store) {
	t.Helper()
	st := testenv.Stack(t)
	sealer, err := seal.New(seal.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	store := dynamo.New(db, dynamo.Tables{Merchants: st.Resources.Tables["MerchantsTable"], Operations: st.Resources.Tables["OperationsTable"]})
	return &acquireraccount.Service{Store: store, Sealer: sealer, Checker: acceptAll{}, Mode: sandboxMerchants{}}, store
}

func stripeInput(merchantID string) acquireraccount.Input {
	return acquireraccount.Input{MerchantID: merchantID, Name: "eustripe", Kind: acquireraccount.Stripe,
		Values: map[string]string{"secretKey": "sk_test_51TwiceAndThirty0000", "webhookSecret": "whsec_twiceAndThirty0000"}}
}

func auditActions(t *testing.T, s *dynamo.Store, merchantID string) map[string]int {
	t.Helper()
	entries, err := s.AuditEntries(context.Background(), merchantID, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range entries {
		n[e.Action]++
	}
	return n
}

// TestConnectorWritesAreSafeToSendTwice: adding an account and changing
// it, each applied and sent again as the SDK does when the first answer was
// lost, succeed once: one account at the version written, one audit entry
// per change.
func TestConnectorWritesAreSafeToSendTwice(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	svc, store := connectorService(t, peopleTwice{&sentTwice{Client: dynamodb.NewFromConfig(cfg)}})
	ctx := context.Background()
	mid := uniq("mer_conn2_")
	if _, err := svc.Add(ctx, "payctl", stripeInput(mid)); err != nil {
		t.Fatalf("add sent twice: %v", err)
	}
	a, err := svc.SetStatus(ctx, "payctl", mid, "eustripe", acquireraccount.Disabled)
	if err != nil || a.Version != 2 {
		t.Fatalf("disable sent twice: %+v %v", a, err)
	}
	got, err := store.Connector(ctx, mid, "eustripe")
	if err != nil || got.Status != acquireraccount.Disabled || got.Version != 2 {
		t.Fatalf("stored: %+v %v", got, err)
	}
	if n := auditActions(t, store, mid); n["connector.add"] != 1 || n["connector.disable"] != 1 {
		t.Fatalf("audit entries: %v", n)
	}
}

// TestConnectorChangesThirtyAtOnce: the same add sent 30 times at once
// saves one account (the others are told it exists), and the same disable
// 30 times at once changes it once: one version step, one audit entry.
func TestConnectorChangesThirtyAtOnce(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	svc, store := connectorService(t, dynamodb.NewFromConfig(cfg))
	ctx := context.Background()
	mid := uniq("mer_conn30_")
	race := func(op func() error) (ok, exists, conflicts int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := op()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errkind.Is(err, errkind.Exists):
					exists++
				case errkind.Is(err, errkind.Conflict):
					conflicts++
				default:
					t.Errorf("unexpected: %v", err)
				}
			}()
		}
		wg.Wait()
		return
	}
	if ok, exists, _ := race(func() error { _, err := svc.Add(ctx, "payctl", stripeInput(mid)); return err }); ok != 1 || exists != 29 {
		t.Fatalf("30 adds: %d saved, %d exists", ok, exists)
	}
	ok, _, conflicts := race(func() error {
		_, err := svc.SetStatus(ctx, "payctl", mid, "eustripe", acquireraccount.Disabled)
		return err
	})
	if ok+conflicts != 30 || ok < 1 {
		t.Fatalf("30 disables: %d ok, %d conflicts", ok, conflicts)
	}
	got, err := store.Connector(ctx, mid, "eustripe")
	if err != nil || got.Status != acquireraccount.Disabled || got.Version != 2 {
		t.Fatalf("stored after 30 disables: %+v %v", got, err)
	}
	if n := auditActions(t, store, mid); n["connector.add"] != 1 || n["connector.disable"] != 1 {
		t.Fatalf("audit entries: %v", n)
	}
}
