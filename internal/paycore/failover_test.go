package paycore_test

// Failover (failover.go): an attempt the routed connector did not process
// moves to the next connector of its route, once, and is charged there
// once; never after a decline or an unknown outcome; the move is a
// conditional write whose lost answer is recognised.

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/routing"
)

// failoverEnv: a merchant routed to alpha with beta as its failover.
func failoverEnv(t *testing.T) (*fastEnv, *countingConnector, *countingConnector, *paycore.Service) {
	t.Helper()
	e := newFastEnv(t)
	alpha, beta := newCountingConnector(e), newCountingConnector(e)
	e.m.Routing = routing.Rules{Default: "alpha", Failover: []string{"beta"}}
	svc := e.withConnectors(t, "alpha", map[string]provider.Provider{"alpha": alpha, "beta": beta})
	return e, alpha, beta, svc
}

func (e *fastEnv) onlyTx(t *testing.T, requestID int64) *payment.Transaction {
	t.Helper()
	txs := e.txsOf(t, requestID)
	if len(txs) != 1 {
		t.Fatalf("%d transactions, want 1", len(txs))
	}
	return txs[0]
}

// Alpha unreachable: the attempt is charged once through beta; the
// transaction records beta and that alpha did not process it.
func TestFailoverChargesTheNextConnectorOnce(t *testing.T) {
	e, alpha, beta, svc := failoverEnv(t)
	alpha.unreachable = true
	r := e.request(t, "40.00")
	res, err := svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay: %+v %v", res, err)
	}
	tx := e.onlyTx(t, r.ID)
	if tx.Connector != "beta" || strings.Join(tx.FailedOver, ",") != "alpha" || tx.Status != payment.TxApproved {
		t.Fatalf("transaction connector %q failedOver %v status %d; want approved by beta after alpha", tx.Connector, tx.FailedOver, tx.Status)
	}
	if v := svc.ViewOf(tx, ""); v.Connector != "beta" || strings.Join(v.FailedOver, ",") != "alpha" {
		t.Fatalf("view: %q %v", v.Connector, v.FailedOver)
	}
	if a, b := alpha.counts(), beta.counts(); a != [3]int{1, 0, 0} || b != [3]int{1, 0, 0} {
		t.Fatalf("calls (charges, refunds, lookups): alpha %v, beta %v; want one charge each, no lookup", a, b)
	}
	e.paidOnceBy(t, r, tx.ID, 1)
	// The refund goes to the connector that charged.
	if v, err := svc.Refund(context.Background(), e.m, tx.ID); err != nil || v.Status != payment.RefundRefunded {
		t.Fatalf("refund: %+v %v", v, err)
	}
	if a, b := alpha.counts(), beta.counts(); a[1] != 0 || b[1] != 1 {
		t.Fatalf("refunds: alpha %d, beta %d; want beta's", a[1], b[1])
	}
}

// Without a failover list, an unprocessed charge is given back (503) as
// before; a decline and an unknown outcome never fail over.
func TestNoFailoverWithoutAListAfterADeclineOrAnUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	t.Run("no list", func(t *testing.T) {
		e, alpha, beta, svc := failoverEnv(t)
		e.m.Routing.Failover = nil
		alpha.unreachable = true
		r := e.request(t, "40.00")
		if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Unavailable) {
			t.Fatalf("pay: %v, want 503", err)
		}
		if len(e.txsOf(t, r.ID)) != 0 || beta.counts() != [3]int{} {
			t.Fatal("an unprocessed attempt without a failover must be given back and go nowhere else")
		}
	})
	t.Run("decline", func(t *testing.T) {
		e, _, beta, svc := failoverEnv(t)
		r := e.request(t, "40.00")
		res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardDecline))
		if err != nil || res.TransactionStatusID != payment.TxDeclined || beta.counts() != [3]int{} {
			t.Fatalf("decline: %+v %v; beta %v, want untouched", res, err, beta.counts())
		}
	})
	t.Run("unknown outcome", func(t *testing.T) {
		e, alpha, beta, svc := failoverEnv(t)
		alpha.failCharge, alpha.failLookup = true, true
		r := e.request(t, "40.00")
		if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Unavailable) {
			t.Fatalf("pay: %v, want 503 (unknown)", err)
		}
		tx := e.onlyTx(t, r.ID)
		if tx.Connector != "alpha" || tx.Status != payment.TxWaiting || beta.counts() != [3]int{} || alpha.counts()[2] != 1 {
			t.Fatalf("unknown outcome: tx %q %d, alpha %v beta %v; want it waiting on alpha, looked up there, beta untouched",
				tx.Connector, tx.Status, alpha.counts(), beta.counts())
		}
	})
}

// An unknown outcome whose lookup proves alpha never charged the reference
// (and, having closed it, never will) is as good as not processed: the
// attempt moves to beta and is charged there once.
func TestFailoverAfterALookupProvesNoCharge(t *testing.T) {
	e, alpha, beta, svc := failoverEnv(t)
	alpha.failCharge = true // no answer; alpha's ledger never saw the reference
	r := e.request(t, "40.00")
	res, err := svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay: %+v %v", res, err)
	}
	tx := e.onlyTx(t, r.ID)
	if tx.Connector != "beta" || strings.Join(tx.FailedOver, ",") != "alpha" {
		t.Fatalf("transaction on %q after %v, want beta after alpha", tx.Connector, tx.FailedOver)
	}
	if a, b := alpha.counts(), beta.counts(); a != [3]int{1, 0, 1} || b != [3]int{1, 0, 0} {
		t.Fatalf("calls (charges, refunds, lookups): alpha %v, beta %v; want alpha charged and looked up, beta charged", a, b)
	}
	e.paidOnceBy(t, r, tx.ID, 1)
}

// The failover write's answer is lost: the attempt recognises its own
// move and is charged through beta once.
func TestFailoverWriteAnswerLost(t *testing.T) {
	e, alpha, beta, svc := failoverEnv(t)
	alpha.unreachable = true
	e.inject("FailOver", answerLost)
	r := e.request(t, "40.00")
	res, err := svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay: %+v %v", res, err)
	}
	if e.store.Calls("FailOver") != 1 || beta.counts()[0] != 1 {
		t.Fatalf("failover writes %d, beta charges %d; want 1 and 1", e.store.Calls("FailOver"), beta.counts()[0])
	}
	e.paidOnceBy(t, r, e.onlyTx(t, r.ID).ID, 1)
}

// The failover write fails: nothing moved, nothing charged; the payer
// gets 503, and the reconciler closes the attempt at alpha, which never
// saw the reference (no money moved).
func TestFailoverWriteFailsNothingCharged(t *testing.T) {
	e, alpha, beta, svc := failoverEnv(t)
	alpha.unreachable = true
	e.inject("FailOver", failsBeforeApplying)
	ctx := context.Background()
	r := e.request(t, "40.00")
	if _, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); !errkind.Is(err, errkind.Unavailable) {
		t.Fatalf("pay: %v, want 503", err)
	}
	tx := e.onlyTx(t, r.ID)
	if tx.Connector != "alpha" || tx.Status != payment.TxWaiting || beta.counts()[0] != 0 {
		t.Fatalf("after the failed move: %q %d, beta charges %d", tx.Connector, tx.Status, beta.counts()[0])
	}
	e.clock.Add(tx.RecoverAfter.Sub(e.clock.Now()) + time.Minute)
	if _, err := svc.RecoverOpen(ctx, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.store.Transaction(ctx, tx.ID); got.Status != payment.TxDeclined || e.requestNow(t, r.ID).Status != payment.RequestUnpaid {
		t.Fatalf("reconciled: transaction %d, want declined (nothing charged) and the request payable", got.Status)
	}
}

// The same payment sent 30 times at once while alpha is down: one
// attempt, moved once, charged once through beta; the others are refused
// while it runs or answer its outcome.
func TestFailoverThirtyAtOnce(t *testing.T) {
	e, alpha, beta, svc := failoverEnv(t)
	alpha.unreachable = true
	r := e.request(t, "40.00")
	var wg sync.WaitGroup
	var mu sync.Mutex
	approved := 0
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
			if err == nil && res.TransactionStatusID == payment.TxApproved {
				mu.Lock()
				approved++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	tx := e.onlyTx(t, r.ID)
	if approved < 1 || beta.counts()[0] != 1 || e.store.Calls("FailOver") != 1 || tx.Connector != "beta" {
		t.Fatalf("approved answers %d, beta charges %d, failover writes %d, connector %q; want one attempt moved and charged once",
			approved, beta.counts()[0], e.store.Calls("FailOver"), tx.Connector)
	}
	e.paidOnceBy(t, r, tx.ID, 1)
}

// After Threshold unprocessed charges alpha's circuit opens (logged as
// the metric): attempts start on beta without asking alpha; after the
// cool-down one attempt tries alpha again, and its answer closes it.
func TestCircuitBreakerSkipsAConnectorThatKeepsFailing(t *testing.T) {
	e := newFastEnv(t)
	alpha, beta := newCountingConnector(e), newCountingConnector(e)
	e.m.Routing = routing.Rules{Default: "alpha", Failover: []string{"beta"}}
	set, err := connector.New("alpha", map[string]provider.Provider{"alpha": alpha, "beta": beta})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	svc := paycore.New(paycore.Deps{Store: e.store, Connectors: set, Sandbox: true, Queue: e.queue,
		SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications", ThreeDSKey: []byte("k3ds-0123456789abcdef0123456789ab"),
		CallbackKey: []byte("kcb-0123456789abcdef0123456789abc"), Now: e.clock.Now, Log: slog.New(slog.NewJSONHandler(&logs, nil)),
		Breaker: &connector.Breaker{Threshold: 3, Cooldown: time.Minute}})
	ctx := context.Background()
	pay := func() {
		t.Helper()
		r := e.request(t, "15.00")
		if res, err := svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err != nil || res.TransactionStatusID != payment.TxApproved {
			t.Fatalf("pay: %+v %v", res, err)
		}
	}
	alpha.unreachable = true
	for i := 0; i < 5; i++ {
		pay()
	}
	if a, b := alpha.counts()[0], beta.counts()[0]; a != 3 || b != 5 {
		t.Fatalf("charges alpha %d beta %d; want alpha asked 3 times (then skipped), beta 5", a, b)
	}
	if !strings.Contains(logs.String(), `"ConnectorCircuitOpen":1`) || !strings.Contains(logs.String(), `"Name":"ConnectorCircuitOpen"`) {
		t.Fatalf("no circuit metric logged:\n%s", logs.String())
	}
	alpha.mu.Lock()
	alpha.unreachable = false
	alpha.mu.Unlock()
	e.clock.Add(time.Minute)
	pay() // the trial: alpha answers
	pay()
	if a := alpha.counts()[0]; a != 5 {
		t.Fatalf("alpha charges %d, want the trial and the next attempt (5)", a)
	}
	if !strings.Contains(logs.String(), `"ConnectorCircuitOpen":0`) {
		t.Fatal("the circuit's close was not logged")
	}
}
