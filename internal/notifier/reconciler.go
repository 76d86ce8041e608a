package notifier

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

// OutboxStore is what the reconciler needs.
type OutboxStore interface {
	DueOutbox(ctx context.Context, shard int, cutoff time.Time, limit int32) ([]payment.OutboxEntry, error)
	LeaseOutbox(ctx context.Context, e payment.OutboxEntry, now time.Time) (bool, error)
}

// ReconcileQueue sends events and tells what a queue still holds
// (queue.Client): Holding counts the messages of queueURL waiting to be
// received and those received but not yet deleted (delayed ones are not
// counted: a first send is never delayed).
type ReconcileQueue interface {
	Queue
	Holding(ctx context.Context, queueURL string) (waiting, inFlight int64, err error)
}

// Defaults of the reconciler's in-flight ceilings: longer than any healthy
// backlog of the queue (the backlog alarms fire long before), short enough
// that a notification lost while its queue is busy still goes out the same
// hour.
const (
	DefaultMaxInFlight      = 15 * time.Minute
	DefaultBatchMaxInFlight = time.Hour
)

// Reconciler runs on a schedule. It first drives every payment attempt a
// crash left mid-way to a final state (Recover: the payment core asks the
// provider, never charges), then re-enqueues notifications whose state
// change was written but whose queue message never arrived (a crash or a
// failed SendMessage between the two).
//
// It never re-sends an entry whose message is still in flight. An entry's
// message is either in its channel's queue (waiting, being processed, or
// failed and waiting out its visibility timeout) or gone; the notifier
// clears the entry before the message is deleted. So, per channel, the
// reconciler reads the entries older than Grace, then the queue's
// counters: when the queue holds no message (nothing visible, nothing in
// flight; first sends are never delayed), none of those entries has a
// message in flight, and each still there (the conditional lease checks)
// is re-sent. While the queue is busy, an entry is re-sent only once it is
// older than the channel's MaxInFlight: a message that waits that long
// means a stalled notifier, which the queue alarms report well before. A
// re-send moves the entry's due time to now, so the next one, if needed,
// comes at the earliest one Grace (idle queue) or one MaxInFlight (busy
// queue) later.
type Reconciler struct {
	// Recover, when set, finishes open attempts whose recovery time has
	// passed (payments.Service.RecoverOpen).
	Recover func(ctx context.Context, now time.Time) (int, error)
	// AfterRecover, when set, runs other repairs (stuck batch jobs).
	AfterRecover func(ctx context.Context, now time.Time) error
	Store        OutboxStore
	Queue        ReconcileQueue
	QueueURL     string
	// BatchQueueURL is the batch channel's queue; empty: QueueURL.
	BatchQueueURL string
	Grace         time.Duration
	// MaxInFlight and BatchMaxInFlight are the ceilings above (zero:
	// the defaults).
	MaxInFlight      time.Duration
	BatchMaxInFlight time.Duration
	Log              *slog.Logger
	Now              func() time.Time
}

// ResendStats counts one run's outbox decisions.
type ResendStats struct {
	Sent int // re-enqueued
	Held int // left alone: its queue may still hold the message
}

// Run scans every shard once and returns how many events it re-enqueued.
func (r *Reconciler) Run(ctx context.Context) (int, error) {
	st, err := r.RunStats(ctx)
	return st.Sent, err
}

// RunStats is Run, also counting the entries held back as possibly in flight.
func (r *Reconciler) RunStats(ctx context.Context) (ResendStats, error) {
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
	var total ResendStats
	for _, c := range []payment.Channel{payment.ChannelInteractive, payment.ChannelBatch} {
		st, err := r.resend(ctx, c, now)
		total.Sent += st.Sent
		total.Held += st.Held
		recErr = errors.Join(recErr, err)
	}
	return total, recErr
}

func (r *Reconciler) channel(c payment.Channel) (queueURL string, maxInFlight time.Duration) {
	queueURL, maxInFlight = r.QueueURL, r.MaxInFlight
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	if c.Batch() {
		if r.BatchQueueURL != "" {
			queueURL = r.BatchQueueURL
		}
		maxInFlight = r.BatchMaxInFlight
		if maxInFlight <= 0 {
			maxInFlight = DefaultBatchMaxInFlight
		}
	}
	return queueURL, maxInFlight
}

func (r *Reconciler) resend(ctx context.Context, c payment.Channel, now time.Time) (ResendStats, error) {
	var st ResendStats
	queueURL, maxInFlight := r.channel(c)
	// 1. The entries first, then the queue: an entry read before the queue
	// was seen empty had its message deleted (and the entry cleared, which
	// the lease below detects) or never had one.
	var entries []payment.OutboxEntry
	first := payment.OutboxShard(c)
	for shard := first; shard < first+payment.OutboxShards; shard++ {
		es, err := r.Store.DueOutbox(ctx, shard, now.Add(-r.Grace), 100)
		if err != nil {
			return st, err
		}
		entries = append(entries, es...)
	}
	if len(entries) == 0 {
		return st, nil
	}
	// 2. One GetQueueAttributes per channel and run, only when there is
	// something to decide.
	busy := true
	waiting, inFlight, err := r.Queue.Holding(ctx, queueURL)
	if err != nil {
		r.Log.Warn("queue backlog unknown; only entries past the in-flight ceiling are re-sent", "channel", c.String(), "error", err.Error())
	} else {
		busy = waiting > 0 || inFlight > 0
	}
	for _, e := range entries {
		if busy && now.Sub(dueTime(e, now)) < maxInFlight {
			st.Held++
			continue
		}
		// The lease makes concurrent reconcilers send each entry once; it
		// fails when the notifier cleared the entry meanwhile.
		ok, err := r.Store.LeaseOutbox(ctx, e, now)
		if err != nil {
			return st, err
		}
		if !ok {
			continue
		}
		ev := e.Event
		ev.Attempts, ev.DueAt = 0, time.Time{}
		if err := r.Queue.Send(ctx, queueURL, ev, 0); err != nil {
			return st, err
		}
		r.Log.Warn("re-enqueued a notification left in the outbox", "event_id", ev.EventID, "transaction_id", ev.TransactionID,
			"channel", c.String(), "queue_busy", busy, "metric", "OutboxResent")
		st.Sent++
	}
	if st.Held > 0 {
		r.Log.Info("outbox entries held: their queue may still hold the messages", "channel", c.String(), "count", st.Held,
			"visible", waiting, "in_flight", inFlight)
	}
	return st, nil
}

// dueTime parses an entry's due time (when it was settled or last re-sent);
// an unreadable one counts as now, so it is never taken for an old one.
func dueTime(e payment.OutboxEntry, now time.Time) time.Time {
	t, err := time.Parse(time.RFC3339Nano, e.DueAt)
	if err != nil {
		return now
	}
	return t
}
