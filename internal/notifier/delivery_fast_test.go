package notifier_test

// A notification's delivery on the in-memory store (no emulator): what is
// recorded, when the outbox entry goes, and what a failed store call makes
// SQS do. The merchant's endpoint is a recording stand-in of the sender
// (the emulator tests post to real HTTP servers).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testing/memstore"
	"github.com/payreq/payreq/internal/webhook"
)

// endpoint answers each post with the next status (the last one repeats)
// and keeps what was posted.
type endpoint struct {
	mu       sync.Mutex
	statuses []int
	posts    []webhook.Request
}

func (e *endpoint) Send(_ context.Context, r webhook.Request) webhook.Attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.posts = append(e.posts, r)
	status := e.statuses[min(len(e.posts), len(e.statuses))-1]
	a := webhook.Attempt{At: time.Now().UTC(), StatusCode: status, Latency: 3 * time.Millisecond}
	if status < 200 || status > 299 {
		a.Err = fmt.Sprintf("HTTP %d", status)
	}
	return a
}

func (e *endpoint) count() int { e.mu.Lock(); defer e.mu.Unlock(); return len(e.posts) }

type deliveryEnv struct {
	st  *memstore.Store
	q   *memQueue
	ep  *endpoint
	n   *notifier.Notifier
	ev  payment.NotifyEvent
	tx  int64
	req int64
}

// newDelivery pays a request on the in-memory store: its approval's event
// is what the service sent to the notifications queue, and its outbox
// entry waits for the notifier's first attempt.
func newDelivery(t *testing.T, statuses ...int) *deliveryEnv {
	t.Helper()
	sealer, err := seal.New(seal.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	st, q := memstore.New(), &memQueue{}
	now := time.Now().UTC()
	m := &merchant.Merchant{ID: "mer_delivery", Sandbox: true, NotifyURL: "https://merchant.example/notify"}
	m.SealedAPIKey = sealer.Seal("pk_test_delivery", m.ID)
	m.SealedSecret = sealer.Seal("whsec_"+base64.StdEncoding.EncodeToString([]byte("a test signing secret of 32 bytes")), m.ID)
	st.PutMerchant(m)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := paycore.New(paycore.Deps{Store: st, Provider: sandbox.New(sandbox.Options{Ledger: sandbox.NewMemoryLedger()}),
		Sandbox: true, Queue: q, SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications", Log: log})
	r := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("9.99"),
		Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	if err := st.CreatePaymentRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Pay(context.Background(), m, r.ID, paycore.Attempt{Method: provider.MethodCard,
		Card: &card.Input{Holder: "Ann", Number: "4111111111111111", Expiry: "12/39", CVV: "123"}})
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay: %+v %v", res, err)
	}
	sent := q.events()
	if len(sent) != 1 || st.Outbox(sent[0].TransactionID) == nil {
		t.Fatalf("the approval sent %d events; outbox entry %v", len(sent), sent)
	}
	q.sent = nil
	ep := &endpoint{statuses: statuses}
	n := &notifier.Notifier{Store: st, Queue: q, Sender: ep, Sealer: sealer, QueueURL: "notifications", DLQURL: "notifications-dlq",
		Schedule: webhook.DefaultSchedule, Log: log}
	return &deliveryEnv{st: st, q: q, ep: ep, n: n, ev: sent[0], tx: sent[0].TransactionID, req: r.ID}
}

// handle delivers ev as SQS does and returns the ids SQS must retry.
func (e *deliveryEnv) handle(t *testing.T, ev payment.NotifyEvent) []string {
	t.Helper()
	body, _ := json.Marshal(ev)
	resp, err := e.n.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-" + ev.EventID, Body: string(body)}}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func (e *deliveryEnv) deliveries(t *testing.T) []payment.DeliveryAttempt {
	t.Helper()
	ds, err := e.st.Deliveries(context.Background(), e.req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestFastDeliveryRecordsAndClearsTheOutbox(t *testing.T) {
	e := newDelivery(t, 200)
	if failed := e.handle(t, e.ev); len(failed) != 0 {
		t.Fatalf("retried: %v", failed)
	}
	ds := e.deliveries(t)
	if len(ds) != 1 || ds[0].Outcome != "delivered" || ds[0].Attempt != 1 || ds[0].StatusCode != 200 || ds[0].EventID != e.ev.EventID {
		t.Fatalf("deliveries %+v", ds)
	}
	if e.st.Outbox(e.tx) != nil {
		t.Fatal("the delivered event's outbox entry is still due: the reconciler would send it again")
	}
	if e.ep.count() != 1 || len(e.q.events()) != 0 {
		t.Fatalf("%d posts, %d events queued", e.ep.count(), len(e.q.events()))
	}
}

// A failing endpoint: the attempt is recorded as a retry, its next attempt
// queued with the schedule's delay, and the first attempt's outbox entry
// goes (the retry is in the queue now).
func TestFastFailedAttemptQueuesItsRetry(t *testing.T) {
	e := newDelivery(t, 500)
	if failed := e.handle(t, e.ev); len(failed) != 0 {
		t.Fatalf("a merchant's failure made SQS retry the message: %v", failed)
	}
	ds := e.deliveries(t)
	if len(ds) != 1 || ds[0].Outcome != "retry" || ds[0].NextAt.IsZero() {
		t.Fatalf("deliveries %+v", ds)
	}
	next := e.q.events()
	if len(next) != 1 || next[0].Attempts != 1 || next[0].EventID != e.ev.EventID || !next[0].DueAt.Equal(ds[0].NextAt) {
		t.Fatalf("queued retry %+v, record %+v", next, ds[0])
	}
	if e.st.Outbox(e.tx) != nil {
		t.Fatal("the outbox entry stayed after the retry was queued")
	}
}

// The record of a delivered attempt is lost (the write failed before it
// applied): SQS retries the message and the entry stays in the outbox, so
// the notification is sent again (at least once), never dropped.
func TestFastLostRecordOfADeliveryIsRetried(t *testing.T) {
	e := newDelivery(t, 200)
	e.st.Fail("RecordDeliveries", 1, errors.New("timed out"))
	if failed := e.handle(t, e.ev); len(failed) != 1 {
		t.Fatalf("SQS told to retry %v, want the message", failed)
	}
	if e.st.Outbox(e.tx) == nil {
		t.Fatal("the entry left the outbox with its attempt unrecorded")
	}
	if failed := e.handle(t, e.ev); len(failed) != 0 {
		t.Fatalf("redelivery retried: %v", failed)
	}
	if ds := e.deliveries(t); len(ds) != 1 || ds[0].Outcome != "delivered" || e.ep.count() != 2 || e.st.Outbox(e.tx) != nil {
		t.Fatalf("after the redelivery: deliveries %+v, %d posts, outbox %v", ds, e.ep.count(), e.st.Outbox(e.tx))
	}
}

// The batch's one read fails: each message reads its own state and is
// delivered; when that read fails too, SQS retries the message and nothing
// is posted or recorded.
func TestFastFailedReadsOfTheNotificationState(t *testing.T) {
	e := newDelivery(t, 200)
	e.st.Fail("NotificationSubjects", 1, errors.New("timed out"))
	if failed := e.handle(t, e.ev); len(failed) != 0 || e.ep.count() != 1 {
		t.Fatalf("after the batch's read failed: retried %v, %d posts", failed, e.ep.count())
	}

	e = newDelivery(t, 200)
	e.st.Fail("NotificationSubjects", 1, errors.New("timed out"))
	e.st.Fail("NotificationSubjects", 2, errors.New("timed out"))
	if failed := e.handle(t, e.ev); len(failed) != 1 || e.ep.count() != 0 || len(e.deliveries(t)) != 0 || e.st.Outbox(e.tx) == nil {
		t.Fatalf("both reads failed: retried %v, %d posts, deliveries %+v", failed, e.ep.count(), e.deliveries(t))
	}
}

// A failed attempt's record is bookkeeping: losing it neither resends (the
// retry is queued already) nor keeps the outbox entry.
func TestFastLostRecordOfAFailedAttemptStillClearsTheOutbox(t *testing.T) {
	e := newDelivery(t, 503)
	e.st.Fail("RecordDeliveries", 1, errors.New("timed out"))
	if failed := e.handle(t, e.ev); len(failed) != 0 {
		t.Fatalf("retried: %v", failed)
	}
	if len(e.q.events()) != 1 || e.st.Outbox(e.tx) != nil || len(e.deliveries(t)) != 0 {
		t.Fatalf("queued %d, outbox %v, deliveries %+v", len(e.q.events()), e.st.Outbox(e.tx), e.deliveries(t))
	}
}

// The last scheduled attempt fails: the event is dead-lettered, recorded as
// such, and nothing more is queued for it.
func TestFastLastAttemptIsDeadLettered(t *testing.T) {
	e := newDelivery(t, 500)
	ev := e.ev
	ev.Attempts, ev.DueAt = len(webhook.DefaultSchedule), time.Now().Add(-time.Second)
	if failed := e.handle(t, ev); len(failed) != 0 {
		t.Fatalf("retried: %v", failed)
	}
	ds := e.deliveries(t)
	if len(ds) != 1 || ds[0].Outcome != "dead-lettered" || ds[0].Attempt != len(webhook.DefaultSchedule)+1 {
		t.Fatalf("deliveries %+v", ds)
	}
	if sent := e.q.events(); len(sent) != 1 || sent[0].EventID != ev.EventID {
		t.Fatalf("sent %+v, want the event to the DLQ only", sent)
	}
}
