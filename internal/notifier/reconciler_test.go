package notifier_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
)

type fakeOutbox struct {
	entries map[int][]payment.OutboxEntry
	cleared map[string]bool // cleared by the notifier after being read: the lease fails
	leased  []string
}

func (f *fakeOutbox) DueOutbox(_ context.Context, shard int, cutoff time.Time, _ int32) ([]payment.OutboxEntry, error) {
	var out []payment.OutboxEntry
	for _, e := range f.entries[shard] {
		if due, _ := time.Parse(time.RFC3339Nano, e.DueAt); due.Before(cutoff) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeOutbox) LeaseOutbox(_ context.Context, e payment.OutboxEntry, _ time.Time) (bool, error) {
	if f.cleared[e.Event.EventID] {
		return false, nil
	}
	f.leased = append(f.leased, e.Event.EventID)
	return true, nil
}

type fakeQueues struct {
	backlog map[string]queue.Backlog
	err     error
	sent    map[string]string // event id → queue
}

func (f *fakeQueues) Send(_ context.Context, url string, body any, _ time.Duration) error {
	f.sent[body.(payment.NotifyEvent).EventID] = url
	return nil
}

func (f *fakeQueues) Backlog(_ context.Context, url string) (queue.Backlog, error) {
	return f.backlog[url], f.err
}

func (f *fakeQueues) Holding(ctx context.Context, url string) (int64, int64, error) {
	b, err := f.Backlog(ctx, url)
	return b.Visible, b.InFlight, err
}

// The reconciler's in-flight rule, case by case: an entry is re-sent when
// its channel's queue holds nothing, or when it is older than the channel's
// ceiling; never while its queue may still hold its message.
func TestReconcilerResendsOnlyWhatCannotBeInFlight(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	entry := func(id string, ch payment.Channel, age time.Duration) (int, payment.OutboxEntry) {
		return payment.OutboxShard(ch), payment.OutboxEntry{Event: payment.NotifyEvent{EventID: id, Channel: ch, TransactionID: 1},
			DueAt: now.Add(-age).Format(time.RFC3339Nano)}
	}
	type ent struct {
		id  string
		ch  payment.Channel
		age time.Duration
	}
	for _, tc := range []struct {
		name       string
		entries    []ent
		backlog    map[string]queue.Backlog
		backlogErr error
		cleared    []string
		want       map[string]string // re-sent event → queue
	}{
		{name: "busy batch queue holds young entries, idle interactive queue re-sends",
			entries: []ent{{"b1", payment.ChannelBatch, 2 * time.Minute}, {"b2", payment.ChannelBatch, 59 * time.Minute}, {"i1", payment.ChannelInteractive, 2 * time.Minute}},
			backlog: map[string]queue.Backlog{"batch": {Visible: 5000, InFlight: 50}},
			want:    map[string]string{"i1": "api"}},
		{name: "in flight only (being processed) is busy too",
			entries: []ent{{"i1", payment.ChannelInteractive, 2 * time.Minute}},
			backlog: map[string]queue.Backlog{"api": {InFlight: 1}},
			want:    map[string]string{}},
		{name: "delayed retries do not make a queue busy",
			entries: []ent{{"i1", payment.ChannelInteractive, 2 * time.Minute}},
			backlog: map[string]queue.Backlog{"api": {Delayed: 40}},
			want:    map[string]string{"i1": "api"}},
		{name: "past the ceiling an entry goes even on a busy queue",
			entries: []ent{{"b1", payment.ChannelBatch, 61 * time.Minute}, {"i1", payment.ChannelInteractive, 16 * time.Minute}, {"i2", payment.ChannelInteractive, 14 * time.Minute}},
			backlog: map[string]queue.Backlog{"batch": {Visible: 1}, "api": {Visible: 1}},
			want:    map[string]string{"b1": "batch", "i1": "api"}},
		{name: "unknown backlog counts as busy",
			entries:    []ent{{"i1", payment.ChannelInteractive, 2 * time.Minute}, {"i2", payment.ChannelInteractive, 20 * time.Minute}},
			backlogErr: errors.New("throttled"),
			want:       map[string]string{"i2": "api"}},
		{name: "an entry the notifier cleared after it was read is not re-sent",
			entries: []ent{{"i1", payment.ChannelInteractive, 2 * time.Minute}},
			cleared: []string{"i1"},
			want:    map[string]string{}},
		{name: "within the grace nothing is considered",
			entries: []ent{{"i1", payment.ChannelInteractive, 30 * time.Second}},
			want:    map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeOutbox{entries: map[int][]payment.OutboxEntry{}, cleared: map[string]bool{}}
			for _, e := range tc.entries {
				shard, oe := entry(e.id, e.ch, e.age)
				store.entries[shard] = append(store.entries[shard], oe)
			}
			for _, id := range tc.cleared {
				store.cleared[id] = true
			}
			q := &fakeQueues{backlog: tc.backlog, err: tc.backlogErr, sent: map[string]string{}}
			r := &notifier.Reconciler{Store: store, Queue: q, QueueURL: "api", BatchQueueURL: "batch", Grace: time.Minute,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
			st, err := r.RunStats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(q.sent) != len(tc.want) || st.Sent != len(tc.want) {
				t.Fatalf("sent %v (stats %+v), want %v", q.sent, st, tc.want)
			}
			for id, url := range tc.want {
				if q.sent[id] != url {
					t.Errorf("%s sent to %q, want %q", id, q.sent[id], url)
				}
			}
		})
	}
}
