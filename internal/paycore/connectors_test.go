package paycore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/routing"
)

// countingConnector is one acquirer (a sandbox with its own ledger: a
// charge is known only to the connector that made it) that counts the
// calls it gets, and can fail its charges without charging.
type countingConnector struct {
	provider.Provider
	mu                        sync.Mutex
	charges, refunds, lookups int
	failCharge, failLookup    bool
	// unreachable: every charge is not processed (nothing sent).
	unreachable bool
}

var errDown = errors.New("acquirer down")

func newCountingConnector(e *fastEnv) *countingConnector {
	return &countingConnector{Provider: sandbox.New(sandbox.Options{Ledger: sandbox.NewMemoryLedger(), Now: e.clock.Now})}
}

func (c *countingConnector) Charge(ctx context.Context, req provider.ChargeRequest) (provider.Outcome, error) {
	c.mu.Lock()
	c.charges++
	fail, unreachable := c.failCharge, c.unreachable
	c.mu.Unlock()
	if fail {
		return provider.Outcome{}, errDown
	}
	if unreachable {
		return provider.Outcome{}, &provider.NotProcessedError{RetryAfter: time.Second, Cause: errDown}
	}
	return c.Provider.Charge(ctx, req)
}

func (c *countingConnector) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	c.mu.Lock()
	c.refunds++
	c.mu.Unlock()
	return c.Provider.Refund(ctx, req)
}

func (c *countingConnector) Lookup(ctx context.Context, ref string) (provider.Outcome, error) {
	c.mu.Lock()
	c.lookups++
	fail := c.failLookup
	c.mu.Unlock()
	if fail {
		return provider.Outcome{}, errDown
	}
	return c.Provider.Lookup(ctx, ref)
}

func (c *countingConnector) counts() [3]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [3]int{c.charges, c.refunds, c.lookups}
}

// withConnectors is e's service over the same store with connectors conns
// and default def (a deployment that changed its default).
func (e *fastEnv) withConnectors(t *testing.T, def string, conns map[string]provider.Provider) *paycore.Service {
	t.Helper()
	set, err := connector.New(def, conns)
	if err != nil {
		t.Fatal(err)
	}
	return paycore.New(paycore.Deps{Store: e.store, Connectors: set, Sandbox: true, Queue: e.queue,
		SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications", ThreeDSKey: []byte("k3ds-0123456789abcdef0123456789ab"),
		CallbackKey: []byte("kcb-0123456789abcdef0123456789abc"), Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// A transaction records the connector that charged it, and its refund goes
// to that connector after the default changed to another one.
func TestConnectorRefundGoesToTheChargingConnector(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	alpha, beta := newCountingConnector(e), newCountingConnector(e)
	conns := map[string]provider.Provider{"alpha": alpha, "beta": beta}
	before := e.withConnectors(t, "alpha", conns)

	r := e.request(t, "30.00")
	res, err := before.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("approve: %+v %v", res, err)
	}
	tx, err := e.store.Transaction(ctx, res.TransactionID)
	if err != nil || tx.Connector != "alpha" {
		t.Fatalf("stored transaction: connector %q, %v; want alpha", tx.Connector, err)
	}

	after := e.withConnectors(t, "beta", conns)
	if v := after.ViewOf(tx, ""); v.Connector != "alpha" {
		t.Fatalf("view shows connector %q, want alpha", v.Connector)
	}
	v, err := after.Refund(ctx, e.m, tx.ID)
	if err != nil || v.Status != payment.RefundRefunded {
		t.Fatalf("refund: %+v %v", v, err)
	}
	if a, b := alpha.counts(), beta.counts(); a != [3]int{1, 1, 0} || b != [3]int{} {
		t.Fatalf("calls (charges, refunds, lookups): alpha %v, beta %v; want alpha [1 1 0], beta none", a, b)
	}
}

// An attempt whose charge outcome is unknown is looked up at the
// connector that was asked to charge, after the default changed.
func TestConnectorLookupGoesToTheChargingConnector(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	alpha, beta := newCountingConnector(e), newCountingConnector(e)
	conns := map[string]provider.Provider{"alpha": alpha, "beta": beta}
	alpha.failCharge, alpha.failLookup = true, true
	r := e.request(t, "30.00")
	if _, err := e.withConnectors(t, "alpha", conns).Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err == nil {
		t.Fatal("an unknown outcome answered no error")
	}
	txs := e.txsOf(t, r.ID)
	if len(txs) != 1 || txs[0].Status != payment.TxWaiting || txs[0].Connector != "alpha" {
		t.Fatalf("after an unknown outcome: %+v", txs)
	}

	alpha.failLookup = false
	if err := e.withConnectors(t, "beta", conns).Recover(ctx, txs[0]); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Transaction(ctx, txs[0].ID)
	// alpha never charged the reference: closed as a bank system error.
	if err != nil || got.Status != payment.TxDeclined || got.Code != codes.BankSystemError {
		t.Fatalf("recovered: %+v %v", got, err)
	}
	if a, b := alpha.counts(), beta.counts(); a[2] != 2 || b != [3]int{} {
		t.Fatalf("calls (charges, refunds, lookups): alpha %v, beta %v; want 2 lookups at alpha, nothing at beta", a, b)
	}
}

// A transaction of a connector the stage no longer configures is never
// sent to another one: its refund fails and nothing is asked of the
// others. An event of another connector does not change it.
func TestConnectorMissingAndForeignEvents(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	alpha, beta := newCountingConnector(e), newCountingConnector(e)
	r := e.request(t, "30.00")
	res, err := e.withConnectors(t, "alpha", map[string]provider.Provider{"alpha": alpha, "beta": beta}).
		Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("approve: %+v %v", res, err)
	}
	betaOnly := e.withConnectors(t, "beta", map[string]provider.Provider{"beta": beta})
	if _, err := betaOnly.Refund(ctx, e.m, res.TransactionID); err == nil {
		t.Fatal("a refund of a transaction of a connector no longer configured succeeded")
	}
	if b := beta.counts(); b != [3]int{} {
		t.Fatalf("beta got calls %v for alpha's transaction", b)
	}

	r2 := e.request(t, "12.00")
	alpha.failCharge, alpha.failLookup = true, true
	svc := e.withConnectors(t, "alpha", map[string]provider.Provider{"alpha": alpha, "beta": beta})
	_, _ = svc.Pay(ctx, e.m, r2.ID, cardAttempt(cardApprove))
	open := e.txsOf(t, r2.ID)[0]
	_, err = svc.Settle(ctx, paycore.ProviderResult{Connector: "beta", TransactionID: open.ID, Status: provider.Approved})
	if !errors.Is(err, paycore.ErrUnbound) {
		t.Fatalf("beta's event about alpha's transaction: %v, want ErrUnbound", err)
	}
	if got, _ := e.store.Transaction(ctx, open.ID); got.Status != payment.TxWaiting {
		t.Fatalf("a foreign event changed the transaction to %d", got.Status)
	}
}

// The merchant's rules pick the connector before the write-ahead record; a
// connector the stage lacks is refused with 046 and nothing stays written.
func TestRoutingPicksTheConnector(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	alpha, beta := newCountingConnector(e), newCountingConnector(e)
	svc := e.withConnectors(t, "alpha", map[string]provider.Provider{"alpha": alpha, "beta": beta})
	min := decimal.RequireFromString("100")
	e.m.Routing = routing.Rules{Rules: []routing.Rule{
		{MinAmount: &min, Currencies: []string{"EUR"}, Connector: "beta"},
		{CardBrands: []string{"amex"}, Connector: "gamma"},
	}}

	big := e.request(t, "150.00")
	res, err := svc.Pay(ctx, e.m, big.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if tx, _ := e.store.Transaction(ctx, res.TransactionID); tx.Connector != "beta" || beta.counts()[0] != 1 || alpha.counts()[0] != 0 {
		t.Fatalf("routed to %q; charges alpha %v beta %v", tx.Connector, alpha.counts(), beta.counts())
	}

	small := e.request(t, "15.00")
	res, err = svc.Pay(ctx, e.m, small.ID, cardAttempt(cardApprove))
	if err != nil || alpha.counts()[0] != 1 {
		t.Fatalf("default route: %+v %v, alpha %v", res, err, alpha.counts())
	}

	amex := cardAttempt("3782 822463 10005")
	amex.Card.CVV = "1234"
	r := e.request(t, "15.00")
	_, err = svc.Pay(ctx, e.m, r.ID, amex)
	var ke *errkind.Error
	if !errors.As(err, &ke) || ke.Kind != errkind.Invalid || ke.Code != codes.InvalidPaymentProvider {
		t.Fatalf("routed to an unconfigured connector: %v, want 400 046", err)
	}
	if txs := e.txsOf(t, r.ID); len(txs) != 0 {
		t.Fatalf("a refused attempt wrote %d transactions", len(txs))
	}
	if _, lease, _ := e.store.PaymentRequestLease(ctx, r.ID); lease.TransactionID != 0 {
		t.Fatalf("a refused attempt kept the lease: %+v", lease)
	}
	if _, err := svc.CreateAndPay(ctx, e.m, payment.Request{Amount: decimal.RequireFromString("15.00"), Unit: "EUR"}, amex); !errors.As(err, &ke) || ke.Code != codes.InvalidPaymentProvider {
		t.Fatalf("create and pay routed to an unconfigured connector: %v, want 400 046", err)
	}
	if reqs := e.store.RequestsOf(e.m.ID); len(reqs) != 3 {
		t.Fatalf("%d payment requests, want the 3 of the test (create and pay wrote none)", len(reqs))
	}
}
