// Package notifier delivers merchant notifications (the `notifier` function,
// fed by the notifications queues) and repairs the outbox (the `reconciler`
// function, on a schedule). Package notify builds, signs and posts one
// notification; this package decides when, from which queue, and records.
//
// Two queues, one per payment.Channel: interactive payments' events and
// batch rows' events travel apart, each with its own dead-letter queue, and
// an event's retries stay in its channel's queue, so a batch never delays
// an interactive notification. The reconciler never re-sends an entry whose
// message may still be in flight (reconciler.go).
//
// Delivery is at least once. A queue message carries a payment.NotifyEvent:
// ids only count. Each attempt re-reads the transaction, the payment request
// and the merchant and builds the spec's body from what is stored, never
// from the message's claims (a message naming an unknown or non-final
// transaction is dropped and logged), signs it (X-Signature with the merchant's
// API key; Standard Webhooks headers with its webhook secret), posts it with
// an SSRF-guarded client, and records the attempt. A failed attempt is
// re-enqueued with the next delay of the schedule (long delays travel in
// hops of at most 15 minutes, SQS's limit); when the schedule is exhausted
// the event goes to the dead-letter queue, from which `payctl dlq redrive`
// brings it back.
package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notify"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/seal"
)

// Store is the persistence the notifier needs.
type Store interface {
	PaymentRequest(ctx context.Context, id int64) (*payment.Request, error)
	Transaction(ctx context.Context, id int64) (*payment.Transaction, error)
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
	ClearOutbox(ctx context.Context, txID int64, eventID string) error
	RecordDelivery(ctx context.Context, a dynamo.DeliveryAttempt) error
}

// Queue sends events.
type Queue interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// Visibility makes a failed message come back sooner than the queue's
// visibility timeout (*queue.Client has it). Optional: a Queue without it
// leaves failed messages to the timeout.
type Visibility interface {
	ChangeVisibility(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error
}

// ItemRetryDelays are the waits before a message that failed for an
// infrastructure reason (a DynamoDB or SQS call, not the merchant's
// endpoint) is received again, by the receive that failed: a passing blip
// costs seconds, not the queue's 300 s visibility timeout. Later failures
// wait the timeout, so the redrive policy (5 receives) still parks a
// message only after several minutes of failures.
var ItemRetryDelays = []time.Duration{5 * time.Second, 30 * time.Second}

// Sender posts one built notification.
type Sender interface {
	Send(ctx context.Context, r notify.Request) notify.Attempt
}

// Notifier is the SQS handler of the notifier function.
type Notifier struct {
	Store    Store
	Queue    Queue
	Sender   Sender
	Sealer   *seal.Sealer
	QueueURL string // the interactive notifications queue (retries are re-enqueued here)
	DLQURL   string // where exhausted interactive events go
	// BatchQueueURL and BatchDLQURL are the same for batch rows' events
	// (payment.ChannelBatch): their retries stay in the batch queue, so a
	// failing batch never competes with interactive notifications either.
	// Empty: the interactive ones.
	BatchQueueURL string
	BatchDLQURL   string
	Schedule      notify.Schedule
	Log           *slog.Logger
	Now           func() time.Time

	rndMu sync.Mutex
	rnd   *rand.Rand
}

// Handle processes a batch; failures of infrastructure (not of the
// merchant's endpoint) are reported per message so SQS retries just those.
// Records are handled concurrently: one slow merchant endpoint (up to the
// 30 s timeout) must not hold up the other notifications of the batch.
func (n *Notifier) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var (
		resp events.SQSEventResponse
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	for _, rec := range ev.Records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.handle(ctx, rec); err != nil {
				n.Log.Error("notification message failed; SQS will retry it", "message_id", rec.MessageId, "error", err.Error())
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
				mu.Unlock()
				n.retrySoon(ctx, rec)
			}
		}()
	}
	wg.Wait()
	return resp, nil
}

// retrySoon shortens a failed message's visibility to its ItemRetryDelays
// wait, by its receive count. Best effort: should it fail, the message
// comes back after the queue's visibility timeout.
func (n *Notifier) retrySoon(ctx context.Context, rec events.SQSMessage) {
	v, ok := n.Queue.(Visibility)
	if !ok || rec.ReceiptHandle == "" {
		return
	}
	count, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if err != nil || count < 1 || count > len(ItemRetryDelays) {
		return
	}
	queueURL := n.QueueURL
	if n.BatchQueueURL != "" && arnName(rec.EventSourceARN) == path.Base(n.BatchQueueURL) {
		queueURL = n.BatchQueueURL
	}
	// Its own deadline: the invocation's may be all but spent.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := v.ChangeVisibility(cctx, queueURL, rec.ReceiptHandle, ItemRetryDelays[count-1]); err != nil {
		n.Log.Warn("shortening a failed message's visibility failed; it returns after the visibility timeout", "message_id", rec.MessageId,
			"error", err.Error())
	}
}

func (n *Notifier) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

func (n *Notifier) handle(ctx context.Context, rec events.SQSMessage) error {
	var ev payment.NotifyEvent
	if err := json.Unmarshal([]byte(rec.Body), &ev); err != nil || ev.EventID == "" || ev.TransactionID == 0 {
		// Unreadable: retrying cannot help; park it for a human.
		n.Log.Error("malformed notification message parked in the DLQ", "message_id", rec.MessageId)
		_, dlq := n.queues(payment.ChannelInteractive)
		if n.BatchQueueURL != "" && arnName(rec.EventSourceARN) == path.Base(n.BatchQueueURL) {
			_, dlq = n.queues(payment.ChannelBatch)
		}
		return n.Queue.Send(ctx, dlq, json.RawMessage(rec.Body), 0)
	}
	if err := n.deliver(ctx, ev); err != nil {
		return err
	}
	if ev.Attempts == 0 && ev.DueAt.IsZero() {
		// Only now, with the attempt recorded (or its retry queued), does the
		// event leave the outbox: a crash before this line leaves it there
		// for the reconciler (a duplicate delivery at worst, never a lost one).
		return n.Store.ClearOutbox(ctx, ev.TransactionID, ev.EventID)
	}
	return nil
}

// deliver makes one delivery attempt of ev and records it, or re-queues ev
// until it is due.
func (n *Notifier) deliver(ctx context.Context, ev payment.NotifyEvent) error {
	log := n.Log.With("event_id", ev.EventID, "payment_request_id", ev.RequestID, "attempt", ev.Attempts+1, "channel", ev.Channel.String())
	queueURL, dlqURL := n.queues(ev.Channel)
	now := n.now()
	if wait := ev.DueAt.Sub(now); wait > 0 && wait <= time.Second {
		// SQS delays are whole seconds and retries are sent rounded down
		// (sendDelay): the last fraction of a second is waited here, so an
		// attempt is neither early nor up to a second late.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		now = n.now()
	}
	if ev.DueAt.After(now) {
		return n.Queue.Send(ctx, queueURL, ev, sendDelay(ev.DueAt, now))
	}
	tx, err := n.Store.Transaction(ctx, ev.TransactionID)
	if errors.Is(err, dynamo.ErrNotFound) || (err == nil && (!tx.Status.Final() || tx.PaymentRequestID != ev.RequestID)) {
		log.Error("notification message for an unknown or unsettled transaction dropped", "transaction_id", ev.TransactionID,
			"metric", "NotificationsDropped")
		return nil
	}
	if err != nil {
		return err
	}
	req, err := n.Store.PaymentRequest(ctx, tx.PaymentRequestID)
	if errors.Is(err, dynamo.ErrNotFound) {
		log.Error("notification for a missing payment request dropped")
		return nil
	}
	if err != nil {
		return err
	}
	// What is signed comes from the store: the event's own statuses are
	// only routing.
	ev = payment.EventOf(ev, tx.ID, tx.Status, req.Status, tx.Code, tx.Message)
	m, err := n.Store.Merchant(ctx, req.MerchantID)
	if err != nil {
		return fmt.Errorf("load merchant %s: %w", req.MerchantID, err)
	}
	target := req.NotifyURL
	if target == "" {
		target = m.NotifyURL
	}
	if target == "" {
		// The spec: sent only if a notify URL is configured.
		return n.Store.RecordDelivery(ctx, dynamo.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID,
			Attempt: ev.Attempts + 1, At: now, Outcome: "skipped", Error: "no notify URL configured"})
	}
	apiKey, err := n.Sealer.Open(m.SealedAPIKey, m.ID)
	if err != nil {
		return fmt.Errorf("open API key of merchant %s: %w", m.ID, err)
	}
	secret := ""
	if m.SealedSecret != "" {
		if secret, err = n.Sealer.Open(m.SealedSecret, m.ID); err != nil {
			return fmt.Errorf("open webhook secret of merchant %s: %w", m.ID, err)
		}
	}
	decimals := int32(2)
	if c, ok := currency.Lookup(req.Unit); ok {
		decimals = c.Decimals
	}
	format := notify.FormatForm
	if m.NotificationFormat == "json" {
		format = notify.FormatJSON
	}
	built, err := notify.Build(Notification(req, ev), notify.Options{URL: target, Format: format, Decimals: decimals,
		APIKey: apiKey, WebhookSecret: secret, EventID: ev.EventID, Now: now})
	if err != nil {
		return fmt.Errorf("build notification %s: %w", ev.EventID, err)
	}
	attempt := n.Sender.Send(ctx, built)
	record := dynamo.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID, Attempt: ev.Attempts + 1, At: attempt.At,
		URL: redactURL(target), StatusCode: attempt.StatusCode, LatencyMS: attempt.Latency.Milliseconds(), Error: attempt.Err}
	if attempt.Delivered() {
		record.Outcome = "delivered"
		log.Info("notification delivered", "status", attempt.StatusCode, "latency_ms", record.LatencyMS,
			"since_event_ms", now.Sub(ev.OccurredAt).Milliseconds())
		return n.Store.RecordDelivery(ctx, record)
	}
	if attempt.StatusCode == http.StatusGone {
		// Standard Webhooks: 410 Gone means the endpoint wants no more of
		// this delivery; retrying it for days would be noise.
		record.Outcome = "gone"
		log.Warn("notification endpoint answered 410 Gone; no more attempts for this delivery")
		return n.Store.RecordDelivery(ctx, record)
	}
	next, ok := n.retry(ev, attempt)
	if ok {
		record.Outcome, record.NextAt = "retry", next.DueAt
		log.Warn("notification attempt failed; will retry", "status", attempt.StatusCode, "error", attempt.Err, "next_at", next.DueAt)
		if err := n.Queue.Send(ctx, queueURL, next, sendDelay(next.DueAt, n.now())); err != nil {
			return err
		}
	} else {
		record.Outcome = "dead-lettered"
		log.Error("notification attempts exhausted; parked in the DLQ", "status", attempt.StatusCode, "error", attempt.Err)
		if err := n.Queue.Send(ctx, dlqURL, next, 0); err != nil {
			return err
		}
	}
	// The attempt record is bookkeeping: failing to write it must not resend.
	if err := n.Store.RecordDelivery(ctx, record); err != nil {
		log.Error("recording a delivery attempt failed", "error", err.Error())
	}
	return nil
}

// queues are the queue and dead-letter queue of channel c.
func (n *Notifier) queues(c payment.Channel) (queueURL, dlqURL string) {
	if c.Batch() && n.BatchQueueURL != "" && n.BatchDLQURL != "" {
		return n.BatchQueueURL, n.BatchDLQURL
	}
	return n.QueueURL, n.DLQURL
}

// arnName is the resource name at the end of an ARN (a queue's name).
func arnName(arn string) string { return arn[strings.LastIndexByte(arn, ':')+1:] }

// sendDelay is the SQS delay of an event due at dueAt, counted from now
// (the time of sending): whole seconds rounded down, so the message arrives
// at most a second early and deliver waits the rest; waits longer than SQS
// allows are chained (notify.Hop).
func sendDelay(dueAt, now time.Time) time.Duration {
	d := dueAt.Sub(now)
	if d <= 0 {
		return 0
	}
	if d > notify.SQSMaxDelay {
		hop, _ := notify.Hop(dueAt, now)
		return hop
	}
	return d.Truncate(time.Second)
}

func (n *Notifier) retry(ev payment.NotifyEvent, a notify.Attempt) (payment.NotifyEvent, bool) {
	n.rndMu.Lock()
	if n.rnd == nil {
		n.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	next := ev
	next.Attempts++
	var ok bool
	next.DueAt, ok = notify.NextAttempt(next.Attempts, a, n.Schedule, n.rnd)
	n.rndMu.Unlock()
	return next, ok
}

// Notification builds the spec's notification from the stored request and
// the event's statuses.
func Notification(r *payment.Request, ev payment.NotifyEvent) notify.Notification {
	n := notify.Notification{
		ID: r.ID, TransactionID: ev.TransactionID, TransactionStatusID: int(ev.TransactionStatusID),
		PaymentRequestStatusID: int(ev.PaymentRequestStatusID), MerchantID: r.MerchantID, Unit: r.Unit,
		// No fee model yet: the whole amount is deposited (fee 0).
		GrossAmount: r.Amount, NetAmount: r.Amount,
		ReferenceID: r.ReferenceID, Notes: r.Notes, Code: ev.Code, Message: ev.Message,
	}
	if c := r.Client; c != nil {
		n.ClientID, n.ClientName, n.ClientEmail, n.ClientPhone, n.ClientMemberID = c.ID, c.Name, c.Email, c.Phone, c.MemberID
	}
	return n
}

// redactURL keeps scheme, host and path: a query string may hold a secret.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}
