package notifier_test

// The notification outbox on the in-memory store (no emulator): the
// notification is written with the state change, and what a failed send
// (or a crash after the state change) left there is re-sent by the
// reconciler, once, however many reconcilers run.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testing/memstore"
)

var errDown = errors.New("queue down")

// memQueue is an SQS queue in memory: sends fail while down; it reports
// the backlog it was given.
type memQueue struct {
	mu      sync.Mutex
	down    bool
	sent    []payment.NotifyEvent
	backlog queue.Backlog
}

func (q *memQueue) Send(_ context.Context, _ string, body any, _ time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return errDown
	}
	if ev, ok := body.(payment.NotifyEvent); ok {
		q.sent = append(q.sent, ev)
	}
	return nil
}

func (q *memQueue) Backlog(context.Context, string) (queue.Backlog, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.backlog, nil
}

func (q *memQueue) Holding(ctx context.Context, url string) (int64, int64, error) {
	b, err := q.Backlog(ctx, url)
	return b.Visible, b.InFlight, err
}

func (q *memQueue) setDown(d bool) { q.mu.Lock(); q.down = d; q.mu.Unlock() }
func (q *memQueue) events() []payment.NotifyEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]payment.NotifyEvent(nil), q.sent...)
}

// settled pays a request and loses its notification's send: with
// crash, the process dies right after the commit (nothing sent, the
// entry due from the settlement on); without, the queue is down (the
// service marks the entry unsent: due at once). Either way the payment
// stands and its notification is only in the outbox.
func settled(t *testing.T, crash bool) (*memstore.Store, *memQueue, payment.NotifyEvent, time.Time) {
	t.Helper()
	st, q := memstore.New(), &memQueue{down: !crash}
	if crash {
		st.CrashAfter("CommitAndSettle", 1, errDown)
	}
	now := time.Now().UTC()
	m := &merchant.Merchant{ID: "mer_outbox", Sandbox: true, NotifyURL: "https://merchant.example/notify"}
	st.PutMerchant(m)
	svc := paycore.New(paycore.Deps{Store: st, Provider: sandbox.New(sandbox.Options{Ledger: sandbox.NewMemoryLedger()}),
		Sandbox: true, Queue: q, SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }})
	r := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.NewFromInt(9),
		Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	if err := st.CreatePaymentRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Pay(context.Background(), m, r.ID, paycore.Attempt{Method: provider.MethodCard,
		Card: &card.Input{Holder: "Ann", Number: "4111111111111111", Expiry: "12/39", CVV: "123"}})
	if crash != (err != nil) || (!crash && res.TransactionStatusID != payment.TxApproved) {
		t.Fatalf("pay (crash %v): %+v %v", crash, res, err)
	}
	txs, _ := st.TransactionsOfRequest(context.Background(), r.ID)
	if len(txs) != 1 || txs[0].Status != payment.TxApproved {
		t.Fatalf("transactions %+v, want one approved", txs)
	}
	ev := st.Outbox(txs[0].ID)
	if ev == nil {
		t.Fatal("the approval left no outbox entry: its notification is lost")
	}
	if len(q.events()) != 0 {
		t.Fatal("a send to a down queue counted")
	}
	q.setDown(false)
	return st, q, *ev, now
}

func reconciler(st *memstore.Store, q *memQueue, now time.Time) *notifier.Reconciler {
	return &notifier.Reconciler{Store: st, Queue: q, QueueURL: "notifications", Grace: time.Minute,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
}

func TestOutboxResendsWhatAFailedSendLeft(t *testing.T) {
	st, q, ev, now := settled(t, false)
	// Marked unsent: it cannot be in flight, so it goes at the next run,
	// within the grace period and beside a busy queue alike.
	q.backlog = queue.Backlog{Visible: 3, InFlight: 2}
	n, err := reconciler(st, q, now.Add(time.Second)).Run(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("next run: %d %v, want 1 re-sent", n, err)
	}
	if got := q.events(); len(got) != 1 || got[0].EventID != ev.EventID || got[0].TransactionStatusID != payment.TxApproved {
		t.Fatalf("re-sent %+v, want the approval's event", got)
	}
	// The notifier got it and cleared the entry: never sent again.
	if err := st.ClearOutbox(context.Background(), ev.TransactionID, ev.EventID); err != nil {
		t.Fatal(err)
	}
	q.backlog = queue.Backlog{}
	if n, err := reconciler(st, q, now.Add(time.Hour)).Run(context.Background()); err != nil || n != 0 {
		t.Fatalf("run after the clear: %d %v", n, err)
	}
}

// A crash between the commit and the send: the entry waits out the grace
// period (its message might be on its way), then is re-sent.
func TestOutboxResendsWhatACrashLeft(t *testing.T) {
	st, q, ev, now := settled(t, true)
	if n, err := reconciler(st, q, now.Add(30*time.Second)).Run(context.Background()); err != nil || n != 0 {
		t.Fatalf("run within the grace: %d %v", n, err)
	}
	n, err := reconciler(st, q, now.Add(2*time.Minute)).Run(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("run after the grace: %d %v, want 1 re-sent", n, err)
	}
	if got := q.events(); len(got) != 1 || got[0].EventID != ev.EventID {
		t.Fatalf("re-sent %+v", got)
	}
}

// Thirty reconcilers at once (overlapping scheduled runs): the entry is
// re-sent once.
func TestOutboxConcurrentReconcilersSendOnce(t *testing.T) {
	st, q, _, now := settled(t, false)
	st.SetLatency(time.Millisecond)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := reconciler(st, q, now.Add(2*time.Minute)).Run(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if got := q.events(); len(got) != 1 {
		t.Fatalf("%d re-sends, want 1", len(got))
	}
}

// The store fails while the reconciler leases the entry, and then the
// queue fails on the re-send: nothing is lost, a later run sends it.
func TestOutboxSurvivesReconcilerFailures(t *testing.T) {
	st, q, ev, now := settled(t, false)
	st.Fail("LeaseOutbox", 1, errDown)
	if _, err := reconciler(st, q, now.Add(2*time.Minute)).Run(context.Background()); err == nil {
		t.Fatal("a failed lease was not reported")
	}
	q.setDown(true)
	if _, err := reconciler(st, q, now.Add(3*time.Minute)).Run(context.Background()); !errors.Is(err, errDown) {
		t.Fatalf("a failed re-send: %v", err)
	}
	q.setDown(false)
	if st.Outbox(ev.TransactionID) == nil {
		t.Fatal("the entry was lost with the failed re-send")
	}
	// The failed re-send moved its due time (the lease): one more grace.
	n, err := reconciler(st, q, now.Add(5*time.Minute)).Run(context.Background())
	if err != nil || n != 1 || len(q.events()) != 1 {
		t.Fatalf("run after the failures: %d %v, sent %d", n, err, len(q.events()))
	}
}

// While the queue holds messages the entry may be in flight: it is held
// until the in-flight ceiling, then re-sent.
func TestOutboxHeldWhileTheQueueIsBusy(t *testing.T) {
	st, q, _, now := settled(t, true)
	q.backlog = queue.Backlog{Visible: 3}
	r := reconciler(st, q, now.Add(2*time.Minute))
	if s, err := r.RunStats(context.Background()); err != nil || s.Sent != 0 || s.Held != 1 {
		t.Fatalf("busy queue: %+v %v, want held", s, err)
	}
	r = reconciler(st, q, now.Add(notifier.DefaultMaxInFlight+time.Minute))
	if s, err := r.RunStats(context.Background()); err != nil || s.Sent != 1 {
		t.Fatalf("past the ceiling: %+v %v, want re-sent", s, err)
	}
}
