package paycore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/payreq/payreq/internal/emf"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// ErrUnbound: a provider result names a charge that is not the
// transaction's. Nothing changes; the caller logs the reason and counts it
// (metric UnboundProviderResults).
var ErrUnbound = errors.New("provider result is not bound to the transaction")

// ErrBindLater: an acquirer event names a transaction that has no acquirer
// object id yet and is still open (the event came before the answer to the
// service's own call was stored). Nothing changed; the event is refused so
// that the acquirer sends it again (Stripe retries for up to 3 days), and
// it binds once the id is stored. It is also ErrUnbound.
var ErrBindLater = errors.New("provider result cannot be bound yet")

// UnboundError says why a provider result was refused. It is ErrUnbound,
// and ErrBindLater when Later.
type UnboundError struct {
	TransactionID int64
	Reason        string
	Later         bool
}

func (e *UnboundError) Error() string {
	return fmt.Sprintf("provider result refused for transaction %d: %s", e.TransactionID, e.Reason)
}

func (e *UnboundError) Is(target error) bool {
	return target == ErrUnbound || (e.Later && target == ErrBindLater)
}

// Bind decides whether a provider result may change transaction tx. A
// result binds when:
//
//   - its acquirer object id (providerRef) equals the one stored on the
//     transaction, which keeps the first id the acquirer answered with and
//     never changes it. An event (event true) binds only to a transaction
//     that already has one; a lookup or a 3-D Secure return may bind a
//     transaction a crash left without it, on the facts below;
//   - and, when the provider reports facts of the charge (an event, a
//     lookup, a 3-D Secure return, never the answer to the service's own
//     call), its reference and payment request id equal the transaction's
//     and its amount and unit equal what was charged. An event without
//     facts never binds.
//
// The rules and their tests are in docs/stripe.md.
func Bind(tx *payment.Transaction, providerRef string, f *provider.ChargeFacts, event bool) error {
	refuse := func(format string, args ...any) error {
		return &UnboundError{TransactionID: tx.ID, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case event && tx.ProviderRef == "":
		err := refuse("the transaction has no acquirer object id yet").(*UnboundError)
		err.Later = !tx.Status.Final()
		return err
	case tx.ProviderRef != "" && providerRef != tx.ProviderRef:
		return refuse("acquirer object %q is not the transaction's %q", providerRef, tx.ProviderRef)
	case f == nil && event:
		return refuse("the event carries no charge facts")
	case f == nil:
		return nil
	case f.Reference != tx.Reference:
		return refuse("reference %q is not the transaction's %q", f.Reference, tx.Reference)
	case f.PaymentRequestID != tx.PaymentRequestID:
		return refuse("payment request %d is not the transaction's %d", f.PaymentRequestID, tx.PaymentRequestID)
	case !strings.EqualFold(f.Unit, tx.Unit) || !f.Amount.Equal(tx.Amount):
		return refuse("amount %s %s is not the transaction's %s %s", f.Amount, f.Unit, tx.Amount, tx.Unit)
	}
	return nil
}

// MetricUnbound counts refused provider results (template.yaml alarms on it).
const MetricUnbound = "UnboundProviderResults"

// bind is Bind, logging a refusal with its reason (ids and amounts, never
// card data) and counting it in MetricUnbound.
func (s *Service) bind(tx *payment.Transaction, providerRef string, f *provider.ChargeFacts, event bool, source string) error {
	return s.logUnbound(tx, Bind(tx, providerRef, f, event), source)
}

// logUnbound logs and counts err when it is an *UnboundError, and returns
// it.
func (s *Service) logUnbound(tx *payment.Transaction, err error, source string) error {
	var ue *UnboundError
	if errors.As(err, &ue) {
		s.Log.Warn("provider result refused: not bound to the transaction", append([]any{"transaction_id", tx.ID,
			"source", source, "reason", ue.Reason}, emf.Attrs(MetricUnbound, 1, s.Now())...)...)
	}
	return err
}
