package paycore

// Failover: when the connector an attempt is charged through did not
// process the charge (provider.ErrNotProcessed: it could not be reached,
// or refused the request unprocessed), the same attempt goes to the next
// connector of its route (routing.Rules failover lists) that can take it.
// Never after a decline, never after an unknown outcome (that is looked up
// at the connector first, as always), and only forward along the route.
//
// The move is written before the next connector is asked: the transaction
// is switched, waiting, from one connector to the next by a conditional
// write. Whatever the process dies after, every later call (the payer's
// retry, the reconciler's lookup) asks the connector recorded there, with
// the same write-ahead reference as the charge's idempotency key: each
// acquirer keys it in its own account, so it is a new key there, and the
// connector left behind never processed it. At most one connector charges.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/emf"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
)

// Metrics of failover (template.yaml alarms on MetricCircuitOpen).
const (
	// MetricCircuitOpen is 1 when a connector's circuit opens and 0 when
	// it closes; logged again, 1, each time an attempt skips the connector.
	MetricCircuitOpen = "ConnectorCircuitOpen"
	// MetricFailedOver counts attempts moved to their next connector.
	MetricFailedOver = "ChargesFailedOver"
)

// nextConnector is the first connector after from on a's route that the
// stage configures, whose rules take the attempt (method, amount, unit)
// and whose circuit lets it through; "" when none.
func (s *Service) nextConnector(a Attempt, merchantID, from string, amount decimal.Decimal, unit string) string {
	i := slices.Index(a.route, from)
	if i < 0 {
		return ""
	}
	for _, name := range a.route[i+1:] {
		b := a
		b.connector = name
		if _, ok := s.attemptProvider(a, name); !ok || s.checkAttempt(b, amount, unit) != nil {
			continue
		}
		if s.Breaker.Allow(s.breakerKey(merchantID, name), s.Now()) {
			return name
		}
		s.Log.Warn("connector skipped: its circuit is open", append([]any{"connector", name},
			emf.Attrs(MetricCircuitOpen, 1, s.Now())...)...)
	}
	return ""
}

// errMovedOn: the transaction is no longer waiting (another run finished
// the attempt while this one failed over).
var errMovedOn = errors.New("the attempt was finished by another run")

// failOver moves waiting transaction tx to connector to. A write whose
// answer was lost, or a concurrent retry of the same attempt that moved it
// first, is recognised by reading the transaction back: waiting on to, it
// goes on from there.
func (s *Service) failOver(ctx context.Context, tx *payment.Transaction, to string) (*payment.Transaction, error) {
	from := s.ConnectorOf(tx)
	f := payment.Failover{TransactionID: tx.ID, From: tx.Connector, To: to,
		FailedOver: append(slices.Clip(tx.FailedOver), from), Now: s.Now().UTC()}
	moved, err := s.txs.FailOver(ctx, f)
	if err != nil && !errkind.Is(err, errkind.Conflict) {
		// The answer may be lost: read it back, on a budget of its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		moved, err = s.txs.Transaction(rctx, tx.ID)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("fail over transaction %d: %w", tx.ID, err)
		}
	}
	switch {
	case moved.Status == payment.TxWaiting && moved.Connector == to:
		// Written (here, or by the try whose answer was lost).
	case moved.Status != payment.TxWaiting:
		return moved, errMovedOn
	default:
		return nil, fmt.Errorf("fail over transaction %d from %s to %s: it waits on %s", tx.ID, from, to, s.ConnectorOf(moved))
	}
	crashpoint.Hit(crashpoint.AfterFailover)
	s.Log.Warn("connector did not process the charge; the attempt moves to the next connector", append([]any{
		"transaction_id", tx.ID, "connector", from, "failover", to}, emf.Attrs(MetricFailedOver, 1, s.Now())...)...)
	return moved, nil
}

// chargeNext moves waiting transaction tx to connector next and charges
// it there.
func (s *Service) chargeNext(ctx context.Context, req *payment.Request, tx *payment.Transaction, a Attempt, det *card.Details, next string) (Result, error) {
	moved, err := s.failOver(ctx, tx, next)
	if errors.Is(err, errMovedOn) {
		return s.resultOf(ctx, moved, a) // finished by another run: its outcome
	}
	if err != nil {
		s.Log.Error("failover not written; the reconciler will close the attempt", "transaction_id", tx.ID, "error", err.Error())
		return Result{}, errkind.UnavailableErr("The payment provider did not process the payment. Retry with the same Idempotency-Key; you will not be charged twice.")
	}
	return s.charge(ctx, req, moved, a, det)
}

// circuitChanged logs a connector's circuit state as the metric.
func (s *Service) circuitChanged(name string, open bool) {
	v, msg := 0, "connector's circuit closed: it answers again"
	if open {
		v, msg = 1, "connector's circuit opened: it did not process charges repeatedly; attempts with a failover skip it"
	}
	s.Log.Warn(msg, append([]any{"connector", name}, emf.Attrs(MetricCircuitOpen, v, s.Now())...)...)
}
