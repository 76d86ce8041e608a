package notifier_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/payment"
)

type sentQueue struct{ sent []any }

func (q *sentQueue) Send(_ context.Context, _ string, body any, _ time.Duration) error {
	q.sent = append(q.sent, body)
	return nil
}

// Redeliver sends the settled event again under its webhook-id, and refuses
// a request without a settled transaction (nothing is sent).
func TestRedeliverSendsTheSettledEventOnly(t *testing.T) {
	q := &sentQueue{}
	if _, err := notifier.Redeliver(context.Background(), q, "q", &payment.Request{ID: 7}, time.Now()); !errors.Is(err, notifier.ErrNotSettled) || len(q.sent) != 0 {
		t.Fatalf("unsettled request: %v, sent %d", err, len(q.sent))
	}
	st := payment.TxApproved
	r := &payment.Request{ID: 7, TransactionID: 9, TransactionStatus: &st, LastLog: &payment.LastLog{TransactionStatusID: st}}
	id, err := notifier.Redeliver(context.Background(), q, "q", r, time.Now())
	if err != nil || len(q.sent) != 1 {
		t.Fatalf("settled request: %v, sent %d", err, len(q.sent))
	}
	want, _ := payment.NewNotifyEvent(r, 9, st, *r.LastLog, time.Now())
	if ev := q.sent[0].(payment.NotifyEvent); id != want.EventID || ev.EventID != want.EventID || ev.TransactionID != 9 {
		t.Fatalf("sent %+v as %s, want event %s", ev, id, want.EventID)
	}
}
