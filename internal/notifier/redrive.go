package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

// DeadLetters moves a dead-letter queue's messages back to their queue,
// each rewritten, or left where it is when rewrite refuses it
// (queue.Client.Redrive).
type DeadLetters interface {
	Redrive(ctx context.Context, dlqURL, queueURL string, rewrite func(body []byte) ([]byte, bool)) (moved, skipped int, err error)
}

// Redrive moves the dead-letter queue's notifications back to the queue with
// a fresh retry schedule (after the merchant fixed its endpoint). A message
// is deleted from the DLQ only after it was sent, so a failure midway loses
// nothing (at worst one notification is sent twice; receivers dedupe on
// webhook-id). Unreadable messages stay in the DLQ.
func Redrive(ctx context.Context, q DeadLetters, dlqURL, queueURL string) (moved, skipped int, err error) {
	return q.Redrive(ctx, dlqURL, queueURL, func(body []byte) ([]byte, bool) {
		var ev payment.NotifyEvent
		if json.Unmarshal(body, &ev) != nil || ev.EventID == "" {
			return nil, false
		}
		ev.Attempts, ev.DueAt, ev.Resent = 0, time.Time{}, true
		b, err := json.Marshal(ev)
		return b, err == nil
	})
}

// ErrNotSettled: the request has no settled transaction whose notification
// could be sent again.
var ErrNotSettled = errors.New("no settled transaction to notify")

// Redeliver queues a request's latest settled event again, for payctl
// deliveries redeliver and the dashboard: the same webhook-id, so receivers
// that processed it can ignore it, with a fresh retry schedule.
func Redeliver(ctx context.Context, q Queue, queueURL string, r *payment.Request, now time.Time) (eventID string, err error) {
	if r.TransactionID == 0 || r.TransactionStatus == nil || r.LastLog == nil {
		return "", ErrNotSettled
	}
	ev, err := payment.NewNotifyEvent(r, r.TransactionID, *r.TransactionStatus, *r.LastLog, now)
	if err != nil {
		return "", err
	}
	ev.Resent = true
	if err := q.Send(ctx, queueURL, ev, 0); err != nil {
		return "", err
	}
	return ev.EventID, nil
}
