package notifier

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/payreq/payreq/internal/dynamo"
)

// OutboxStore is what the reconciler needs.
type OutboxStore interface {
	DueOutbox(ctx context.Context, shard int, cutoff time.Time, limit int32) ([]dynamo.OutboxEntry, error)
	LeaseOutbox(ctx context.Context, e dynamo.OutboxEntry, now time.Time) (bool, error)
}

// Reconciler runs on a schedule. It first drives every payment attempt a
// crash left mid-way to a final state (Recover: the payment core asks the
// provider, never charges), then re-enqueues notifications whose state
// change was written but whose queue message never arrived (a crash or a
// failed SendMessage between the two): any outbox entry older than Grace.
type Reconciler struct {
	// Recover, when set, finishes open attempts whose recovery time has
	// passed (payments.Service.RecoverOpen).
	Recover func(ctx context.Context, now time.Time) (int, error)
	// AfterRecover, when set, runs other repairs (stuck batch jobs).
	AfterRecover func(ctx context.Context, now time.Time) error
	Store        OutboxStore
	Queue        Queue
	QueueURL     string
	Grace        time.Duration
	Log          *slog.Logger
	Now          func() time.Time
}

// Run scans every shard once and returns how many events it re-enqueued.
func (r *Reconciler) Run(ctx context.Context) (int, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	var recErr error
	if r.Recover != nil {
		n, err := r.Recover(ctx, now)
		if n > 0 {
			r.Log.Warn("finished payment attempts left open", "count", n)
		}
		recErr = err
	}
	if r.AfterRecover != nil {
		if err := r.AfterRecover(ctx, now); err != nil {
			recErr = errors.Join(recErr, err)
		}
	}
	sent, err := r.resend(ctx, now)
	return sent, errors.Join(recErr, err)
}

func (r *Reconciler) resend(ctx context.Context, now time.Time) (int, error) {
	sent := 0
	for shard := 0; shard < dynamo.OutboxShards; shard++ {
		entries, err := r.Store.DueOutbox(ctx, shard, now.Add(-r.Grace), 100)
		if err != nil {
			return sent, err
		}
		for _, e := range entries {
			// The lease makes concurrent reconcilers send each entry once per
			// grace period; the notifier clears the entry when it arrives.
			ok, err := r.Store.LeaseOutbox(ctx, e, now)
			if err != nil {
				return sent, err
			}
			if !ok {
				continue
			}
			ev := e.Event
			ev.Attempts, ev.DueAt = 0, time.Time{}
			if err := r.Queue.Send(ctx, r.QueueURL, ev, 0); err != nil {
				return sent, err
			}
			r.Log.Warn("re-enqueued a notification left in the outbox", "event_id", ev.EventID, "transaction_id", ev.TransactionID)
			sent++
		}
	}
	return sent, nil
}
