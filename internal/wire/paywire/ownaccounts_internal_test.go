package paywire

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/seal"
)

// oneAccount is a store of one account that counts its reads.
type oneAccount struct {
	mu    sync.Mutex
	a     *acquireraccount.Account
	reads int
}

func (o *oneAccount) Connector(_ context.Context, merchantID, name string) (*acquireraccount.Account, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	if o.a == nil || o.a.MerchantID != merchantID || o.a.Name != name {
		return nil, errkind.New(errkind.NotFound, "no such account", codes.InvalidPaymentProvider)
	}
	c := *o.a
	return &c, nil
}

// A built account is kept a minute: no read within it; after it, one read,
// and a disabled or replaced account is seen (a new version is rebuilt
// with its new secret). An unknown account and one whose secrets do not
// open are NotFound; the webhook secret is refused for a disabled one.
func TestOwnAccountsCache(t *testing.T) {
	sealer, err := seal.New(seal.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	sealed := func(v, field string) string { return sealer.Seal(v, acquireraccount.Owner("mer_1", "own", field)) }
	store := &oneAccount{a: &acquireraccount.Account{MerchantID: "mer_1", Name: "own", Kind: acquireraccount.Stripe, Status: acquireraccount.Active, Version: 1,
		Sealed: map[string]string{acquireraccount.StripeSecretKey: sealed("sk_test_aaaaaaaaaa", acquireraccount.StripeSecretKey),
			acquireraccount.StripeWebhookSecret: sealed("whsec_first_secret", acquireraccount.StripeWebhookSecret)}}}
	o := &OwnAccounts{Store: store, Sealer: sealer, APIs: AccountAPIs{StripeAPIBase: "http://127.0.0.1:1"}, Now: func() time.Time { return now }}
	ctx := context.Background()

	p1, active, err := o.Account(ctx, "mer_1", "own")
	if err != nil || !active || p1 == nil {
		t.Fatalf("account: %v %v %v", p1, active, err)
	}
	if s, err := o.StripeWebhookSecret(ctx, "mer_1", "own"); err != nil || s != "whsec_first_secret" {
		t.Fatalf("webhook secret: %q %v", s, err)
	}
	store.mu.Lock()
	store.a.Status, store.a.Version = acquireraccount.Disabled, 2
	store.a.Sealed[acquireraccount.StripeWebhookSecret] = sealed("whsec_second_secret", acquireraccount.StripeWebhookSecret)
	store.mu.Unlock()
	now = now.Add(59 * time.Second)
	if _, active, _ := o.Account(ctx, "mer_1", "own"); !active || store.reads != 1 {
		t.Fatalf("within the minute: active %v after %d reads, want the cached account and 1 read", active, store.reads)
	}
	now = now.Add(2 * time.Second)
	if p, active, err := o.Account(ctx, "mer_1", "own"); err != nil || active || p == nil || store.reads != 2 {
		t.Fatalf("after the minute: %v %v %v, %d reads; want the disabled account (still reachable) after one more read", p, active, err, store.reads)
	}
	if _, err := o.StripeWebhookSecret(ctx, "mer_1", "own"); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("webhook secret of a disabled account: %v, want NotFound", err)
	}
	store.mu.Lock()
	store.a.Status, store.a.Version = acquireraccount.Active, 3
	store.mu.Unlock()
	now = now.Add(time.Minute)
	if s, err := o.StripeWebhookSecret(ctx, "mer_1", "own"); err != nil || s != "whsec_second_secret" {
		t.Fatalf("the replaced secret: %q %v", s, err)
	}

	if _, _, err := o.Account(ctx, "mer_1", "other"); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("unknown account: %v", err)
	}
	store.mu.Lock()
	store.a.Version = 4
	store.a.Sealed[acquireraccount.StripeSecretKey] = sealer.Seal("sk_test_bbbbbbbbbb", acquireraccount.Owner("mer_2", "own", acquireraccount.StripeSecretKey))
	store.mu.Unlock()
	now = now.Add(time.Minute)
	if _, _, err := o.Account(ctx, "mer_1", "own"); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("secrets sealed to another account: %v, want NotFound", err)
	}
}
