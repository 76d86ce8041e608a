package paycore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/routing"
)

// ownAccounts is the seam's contract in memory: merchant/name → provider
// and status (wiring reads the store and opens the sealed secrets).
type ownAccounts struct {
	mu       sync.Mutex
	accounts map[string]*countingConnector
	disabled map[string]bool
	reads    int
}

func (o *ownAccounts) Account(_ context.Context, merchantID, name string) (provider.Provider, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	p, ok := o.accounts[merchantID+"/"+name]
	if !ok {
		return nil, false, errkind.New(errkind.NotFound, fmt.Sprintf("no account %s", name), codes.InvalidPaymentProvider)
	}
	return p, !o.disabled[merchantID+"/"+name], nil
}

// A merchant's routing names its own account: the attempt charges through
// the account's provider and records its name; the refund goes there
// after the account was disabled (its money is there); a new attempt on
// the disabled account, or on one the merchant lacks, answers 046 with
// nothing written, or fails over when the rules allow; events bind only
// through the account's own address of that merchant.
func TestOwnAccountRouting(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	platform, own := newCountingConnector(e), newCountingConnector(e)
	accts := &ownAccounts{accounts: map[string]*countingConnector{e.m.ID + "/mystripe": own}, disabled: map[string]bool{}}
	svc := e.withConnectors(t, "alpha", map[string]provider.Provider{"alpha": platform})
	svc.Accounts = accts
	e.m.Routing = routing.Rules{Default: "mystripe"}

	r := e.request(t, "25.00")
	res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay through the own account: %+v %v", res, err)
	}
	tx, _ := e.store.Transaction(ctx, res.TransactionID)
	if tx.Connector != "mystripe" || own.counts()[0] != 1 || platform.counts()[0] != 0 {
		t.Fatalf("connector %q; charges own %v platform %v", tx.Connector, own.counts(), platform.counts())
	}

	// Events: the platform's and another merchant's address of the same
	// name do not bind; the account's own address does.
	for _, from := range []string{"alpha", "mer_other/mystripe", "mystripe"} {
		if _, err := svc.Settle(ctx, paycore.ProviderResult{Connector: from, TransactionID: tx.ID, Status: provider.Approved}); !errors.Is(err, paycore.ErrUnbound) {
			t.Fatalf("event from %q about the own account's transaction: %v, want ErrUnbound", from, err)
		}
	}
	if _, err := svc.Settle(ctx, paycore.ProviderResult{Connector: paycore.AccountEventConnector(e.m.ID, "mystripe"), TransactionID: tx.ID, Status: provider.Approved}); err != nil {
		t.Fatalf("event on the account's own address: %v", err)
	}

	accts.mu.Lock()
	accts.disabled[e.m.ID+"/mystripe"] = true
	accts.mu.Unlock()
	if _, err := svc.Refund(ctx, e.m, tx.ID); err != nil || own.counts()[1] != 1 || platform.counts()[1] != 0 {
		t.Fatalf("refund on the disabled account: %v; refunds own %v platform %v", err, own.counts(), platform.counts())
	}

	var ke *errkind.Error
	for _, name := range []string{"mystripe", "nosuch"} {
		e.m.Routing = routing.Rules{Default: name}
		r := e.request(t, "10.00")
		if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errors.As(err, &ke) || ke.Code != codes.InvalidPaymentProvider {
			t.Fatalf("routed to %s: %v, want 400 046", name, err)
		}
		if txs := e.txsOf(t, r.ID); len(txs) != 0 {
			t.Fatalf("routed to %s: %d transactions written", name, len(txs))
		}
	}
	if own.counts()[0] != 1 {
		t.Fatalf("the disabled account was charged: %v", own.counts())
	}

	// Failover from the platform to a disabled account is skipped; to an
	// active one it goes.
	platform.unreachable = true
	e.m.Routing = routing.Rules{Default: "alpha", Failover: []string{"mystripe"}}
	r = e.request(t, "11.00")
	if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Unavailable) || own.counts()[0] != 1 {
		t.Fatalf("failover to a disabled account: %v, own charges %v", err, own.counts())
	}
	accts.mu.Lock()
	accts.disabled[e.m.ID+"/mystripe"] = false
	accts.mu.Unlock()
	r = e.request(t, "12.00")
	res, err = svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved || own.counts()[0] != 2 {
		t.Fatalf("failover to the own account: %+v %v, own charges %v", res, err, own.counts())
	}
}
