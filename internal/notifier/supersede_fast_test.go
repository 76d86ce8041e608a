package notifier_test

import (
	"context"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// TestFastDeclineOfAPaidRequestIsNeverSent: once a request is paid, the
// decline of another of its attempts is recorded as superseded and never
// posted, whether it comes after the approval's notification or is retried
// after it: a merchant that applies the latest notification must never
// mark a paid order unpaid.
func TestFastDeclineOfAPaidRequestIsNeverSent(t *testing.T) {
	e := newDelivery(t, 200) // an approved, paid request; its event waits
	ctx := context.Background()
	m, err := e.st.Merchant(ctx, "mer_delivery")
	if err != nil {
		t.Fatal(err)
	}
	// Another attempt on the same request, declined: written as the
	// reconciler closes an attempt whose charge never happened (a
	// transaction a lost answer left behind before the request was paid).
	now := time.Now().UTC()
	declined := &payment.Transaction{ID: e.tx + 1, Number: "TXDECLINED", PaymentRequestID: e.req, MerchantID: m.ID, Status: payment.TxWaiting,
		Method: string(provider.MethodCard), Unit: "EUR", CreatedAt: now, UpdatedAt: now, Reference: payment.ChargeReference(e.tx + 1)}
	if err := e.st.CreateTransaction(ctx, declined); err != nil {
		t.Fatal(err)
	}
	ev, err := payment.NewNotifyEvent(&payment.Request{ID: e.req, MerchantID: m.ID}, declined.ID, payment.TxDeclined,
		payment.LastLog{Code: "001", Message: "declined"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SettleTransaction(ctx, payment.Settlement{TransactionID: declined.ID, Status: payment.TxDeclined, Code: "001",
		Message: "declined", Now: now, Event: ev}); err != nil {
		t.Fatal(err)
	}

	if failed := e.handle(t, e.ev); len(failed) != 0 || e.ep.count() != 1 { // the approval
		t.Fatalf("approval: retried %v, %d posts", failed, e.ep.count())
	}
	if failed := e.handle(t, ev); len(failed) != 0 {
		t.Fatalf("decline: retried %v", failed)
	}
	if e.ep.count() != 1 {
		t.Fatalf("the decline of a paid request's other attempt was posted: %+v", e.ep.posts[1])
	}
	var outcome string
	for _, d := range e.deliveries(t) {
		if d.EventID == ev.EventID {
			outcome = d.Outcome
		}
	}
	if outcome != "superseded" {
		t.Fatalf("the decline's delivery record: %q, want superseded", outcome)
	}
}
