package paywire

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/acquireraccount"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
)

// AccountCacheTTL is how long a function instance keeps a merchant's own
// account it built (its provider, its opened webhook secret) before it
// reads the account again: a disabled or replaced account stops being
// used within this time.
const AccountCacheTTL = time.Minute

// AccountReader reads one of a merchant's own accounts (dynamo.Store):
// errkind.NotFound when absent.
type AccountReader interface {
	Connector(ctx context.Context, merchantID, name string) (*acquireraccount.Account, error)
}

// OwnAccounts builds the connectors of merchants' own accounts
// (paycore.AccountConnectors) from the stored account: its sealed secrets
// are opened in memory only, to build the client. Built accounts are kept
// AccountCacheTTL; after that the account is read again (one read) and
// rebuilt only when its version changed.
type OwnAccounts struct {
	Store  AccountReader
	Sealer acquireraccount.Sealer
	APIs   AccountAPIs // where the accounts are reached (a local stack: its test doubles)
	// Stripe is the options every account's Stripe client shares (return
	// URL, key prefix); its key and address are the account's.
	Stripe stripeprov.Options
	TTL    time.Duration
	Now    func() time.Time

	mu    sync.Mutex
	cache map[string]*ownAccount
}

type ownAccount struct {
	version  int64
	kind     acquireraccount.Kind
	active   bool
	p        provider.Provider
	webhook  string // the opened webhook signing secret (Stripe)
	readAt   time.Time
	notFound bool
}

func (o *OwnAccounts) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func notConfigured(merchantID, name string) error {
	return errkind.New(errkind.NotFound, fmt.Sprintf("merchant %s has no account %q", merchantID, name), codes.InvalidPaymentProvider)
}

// load is the account merchantID/name as built, from the cache when fresh.
func (o *OwnAccounts) load(ctx context.Context, merchantID, name string) (*ownAccount, error) {
	key := merchantID + "/" + name
	ttl := o.TTL
	if ttl <= 0 {
		ttl = AccountCacheTTL
	}
	o.mu.Lock()
	cached := o.cache[key]
	o.mu.Unlock()
	if cached != nil && o.now().Sub(cached.readAt) < ttl {
		if cached.notFound {
			return nil, notConfigured(merchantID, name)
		}
		return cached, nil
	}
	a, err := o.Store.Connector(ctx, merchantID, name)
	if errkind.Is(err, errkind.NotFound) {
		o.put(key, &ownAccount{notFound: true, readAt: o.now()})
		return nil, notConfigured(merchantID, name)
	}
	if err != nil {
		return nil, err
	}
	if cached != nil && !cached.notFound && cached.version == a.Version {
		next := *cached
		next.readAt = o.now()
		o.put(key, &next)
		return &next, nil
	}
	built, err := o.build(a)
	if err != nil {
		return nil, err
	}
	o.put(key, built)
	return built, nil
}

// maxCachedAccounts bounds the cache: webhook addresses are public, so
// addresses of accounts that do not exist must not grow it without end.
const maxCachedAccounts = 4096

func (o *OwnAccounts) put(key string, a *ownAccount) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cache == nil || len(o.cache) >= maxCachedAccounts {
		o.cache = map[string]*ownAccount{} // rebuilt from the store as used
	}
	o.cache[key] = a
}

// build opens a's secrets and builds its connector. Secrets that no longer
// open (a sealing key gone) make the account NotFound: it cannot be used.
func (o *OwnAccounts) build(a *acquireraccount.Account) (*ownAccount, error) {
	values, err := (&acquireraccount.Service{Sealer: o.Sealer}).Values(a)
	if err != nil {
		return nil, errkind.Wrap(errkind.NotFound, err, fmt.Sprintf("the credentials of account %q do not open", a.Name))
	}
	out := &ownAccount{version: a.Version, kind: a.Kind, active: a.Status == acquireraccount.Active, readAt: o.now()}
	switch a.Kind {
	case acquireraccount.Stripe:
		if o.APIs.LocalOnly && o.APIs.StripeAPIBase == "" {
			// A local stack never sends a merchant's key out.
			return nil, errkind.New(errkind.NotFound, "this local stack has no Stripe test double for merchants' accounts", codes.InvalidPaymentProvider)
		}
		opts := o.Stripe
		opts.SecretKey, opts.APIBase = values[acquireraccount.StripeSecretKey], o.APIs.StripeAPIBase
		p, err := stripeprov.New(opts)
		if err != nil {
			return nil, fmt.Errorf("account %q: %w", a.Name, err)
		}
		out.p, out.webhook = p, values[acquireraccount.StripeWebhookSecret]
	default:
		// Adyen accounts are connected and checked, not yet charged
		// through (docs/acquirers.md).
		return nil, errkind.New(errkind.NotFound, fmt.Sprintf("account %q is a %s account, which the service does not charge through yet", a.Name, a.Kind), codes.InvalidPaymentProvider)
	}
	return out, nil
}

// Account implements paycore.AccountConnectors.
func (o *OwnAccounts) Account(ctx context.Context, merchantID, name string) (provider.Provider, bool, error) {
	a, err := o.load(ctx, merchantID, name)
	if err != nil {
		return nil, false, err
	}
	return a.p, a.active, nil
}

// StripeWebhookSecret is the signing secret of merchantID's active Stripe
// account name, for its own webhook address; errkind.NotFound for an
// unknown, disabled or non-Stripe account.
func (o *OwnAccounts) StripeWebhookSecret(ctx context.Context, merchantID, name string) (string, error) {
	a, err := o.load(ctx, merchantID, name)
	if err != nil {
		return "", err
	}
	if !a.active || a.kind != acquireraccount.Stripe || a.webhook == "" {
		return "", notConfigured(merchantID, name)
	}
	return a.webhook, nil
}

var _ paycore.AccountConnectors = (*OwnAccounts)(nil)
