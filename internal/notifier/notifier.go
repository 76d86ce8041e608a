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
//
// Each notification's body, signature and retry schedule are internal/webhook's.
package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/webhook"
)

// Store is the persistence the notifier needs.
type Store interface {
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
	ClearOutbox(ctx context.Context, txID int64, eventID string) error
	// NotificationSubjects reads the events' transactions, requests and
	// merchants in one call, keyed by transaction id; missing items are nil.
	NotificationSubjects(ctx context.Context, evs []payment.NotifyEvent) (map[int64]merchant.NotificationSubject, error)
	// RecordDeliveries records attempts (and clears first attempts' outbox
	// entries) in one write, with one error per write.
	RecordDeliveries(ctx context.Context, ws []payment.DeliveryWrite) []error
}

// Overview is where the notifier keeps the dashboard's overview: a settled
// transaction is added to its merchant's aggregates on its event's first
// attempt (after the payment's answer, once per transaction whatever the
// redeliveries), and an event whose delivery fails is listed until a later
// attempt delivers it (writes only on the failure paths).
type Overview interface {
	AggregateSettled(ctx context.Context, tx *payment.Transaction, now time.Time) (bool, error)
	PutNotificationProblem(ctx context.Context, merchantID string, p payment.NotificationProblem) error
	ClearNotificationProblem(ctx context.Context, merchantID, eventID string) error
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
	Send(ctx context.Context, r webhook.Request) webhook.Attempt
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
	Schedule      webhook.Schedule
	// Overview keeps the dashboard's aggregates (*dynamo.Store); nil: none.
	Overview Overview
	Log      *slog.Logger
	Now      func() time.Time

	rndMu sync.Mutex
	rnd   *rand.Rand
}

// Handle processes a batch; failures of infrastructure (not of the
// merchant's endpoint) are reported per message so SQS retries just those.
// Records are handled concurrently: one slow merchant endpoint (up to the
// 30 s timeout) must not hold up the other notifications of the batch. The
// batch's stored state is read in one call before, and its attempts are
// recorded in one write after (each message is deleted only after Handle
// returns, so recording at the end loses nothing a per-message write
// would keep).
func (n *Notifier) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	steps := make([]step, len(ev.Records))
	for i, rec := range ev.Records {
		steps[i].rec = rec
		steps[i].ev, steps[i].readable = readEvent(rec)
	}
	subjects := n.prefetch(ctx, steps)
	var wg sync.WaitGroup
	for i := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &steps[i]
			if !st.readable {
				st.err = n.park(ctx, st.rec)
				return
			}
			st.d, st.err = n.deliver(ctx, st.ev, subjects)
		}()
	}
	wg.Wait()
	n.record(ctx, steps)
	for _, st := range steps {
		if st.err != nil {
			n.Log.Error("notification message failed; SQS will retry it", "message_id", st.rec.MessageId, "error", st.err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: st.rec.MessageId})
			n.retrySoon(ctx, st.rec)
		}
	}
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

// step is one message of a batch on its way through Handle.
type step struct {
	rec      events.SQSMessage
	ev       payment.NotifyEvent
	readable bool
	d        delivery
	err      error
}

// first reports whether the step's event is its first attempt: the one
// that leaves the outbox.
func (st *step) first() bool { return st.ev.Attempts == 0 && st.ev.DueAt.IsZero() }

func readEvent(rec events.SQSMessage) (payment.NotifyEvent, bool) {
	var ev payment.NotifyEvent
	if err := json.Unmarshal([]byte(rec.Body), &ev); err != nil || ev.EventID == "" || ev.TransactionID == 0 {
		return ev, false
	}
	return ev, true
}

// park sends an unreadable message to its queue's DLQ: retrying cannot
// help; a human looks at it.
func (n *Notifier) park(ctx context.Context, rec events.SQSMessage) error {
	n.Log.Error("malformed notification message parked in the DLQ", "message_id", rec.MessageId)
	_, dlq := n.queues(payment.ChannelInteractive)
	if n.BatchQueueURL != "" && arnName(rec.EventSourceARN) == path.Base(n.BatchQueueURL) {
		_, dlq = n.queues(payment.ChannelBatch)
	}
	return n.Queue.Send(ctx, dlq, json.RawMessage(rec.Body), 0)
}

// prefetch reads the stored state of the batch's events that are due in
// one call (one due within a second reads its own after deliver waits it
// out). A failure only logs: each delivery then reads its own.
func (n *Notifier) prefetch(ctx context.Context, steps []step) map[int64]merchant.NotificationSubject {
	var evs []payment.NotifyEvent
	now := n.now()
	for _, st := range steps {
		if st.readable && !st.ev.DueAt.After(now) {
			evs = append(evs, st.ev)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	subjects, err := n.Store.NotificationSubjects(ctx, evs)
	if err != nil {
		n.Log.Warn("reading the batch's notification state failed; each message reads its own", "error", err.Error())
		return nil
	}
	return subjects
}

// record writes the batch's attempts, each first attempt with its outbox
// clear, in one call. Only with the attempt recorded (or its retry queued)
// does a first event leave the outbox: a crash before leaves the entry for
// the reconciler (a duplicate delivery at worst, never a lost one).
func (n *Notifier) record(ctx context.Context, steps []step) {
	var writes []payment.DeliveryWrite
	var of []*step
	for i := range steps {
		st := &steps[i]
		if st.err != nil || !st.readable {
			continue
		}
		if st.d.record == nil {
			if st.first() { // dropped: nothing to record, the entry still goes
				st.err = n.Store.ClearOutbox(ctx, st.ev.TransactionID, st.ev.EventID)
			}
			continue
		}
		w := payment.DeliveryWrite{Attempt: *st.d.record}
		if st.first() {
			w.ClearOutboxOf = st.ev.TransactionID
		}
		writes, of = append(writes, w), append(of, st)
	}
	if len(writes) == 0 {
		return
	}
	for i, err := range n.Store.RecordDeliveries(ctx, writes) {
		st := of[i]
		if err == nil {
			continue
		}
		if st.d.mustRecord {
			st.err = err
			continue
		}
		// The record of a failed attempt is bookkeeping (its retry is
		// queued already): failing to write it must not resend, but the
		// outbox entry must still go.
		n.Log.Error("recording a delivery attempt failed", "event_id", st.ev.EventID, "error", err.Error())
		if st.first() {
			st.err = n.Store.ClearOutbox(ctx, st.ev.TransactionID, st.ev.EventID)
		}
	}
}

// delivery is what an attempt leaves to record: nothing (the event was
// dropped or re-queued until due), or the attempt, which mustRecord says
// is the event's last (delivered, gone, skipped): its record failing makes
// SQS retry the message.
type delivery struct {
	record     *payment.DeliveryAttempt
	mustRecord bool
}

// deliver makes one delivery attempt of ev and returns its record, or
// re-queues ev until it is due.
func (n *Notifier) deliver(ctx context.Context, ev payment.NotifyEvent, subjects map[int64]merchant.NotificationSubject) (delivery, error) {
	log := n.Log.With("event_id", ev.EventID, "payment_request_id", ev.RequestID, "attempt", ev.Attempts+1, "channel", ev.Channel.String())
	queueURL, dlqURL := n.queues(ev.Channel)
	now := n.now()
	if wait := ev.DueAt.Sub(now); wait > 0 && wait <= time.Second {
		// SQS delays are whole seconds and retries are sent rounded down
		// (sendDelay): the last fraction of a second is waited here, so an
		// attempt is neither early nor up to a second late.
		select {
		case <-ctx.Done():
			return delivery{}, ctx.Err()
		case <-time.After(wait):
		}
		now = n.now()
	}
	if ev.DueAt.After(now) {
		return delivery{}, n.Queue.Send(ctx, queueURL, ev, sendDelay(ev.DueAt, now))
	}
	// One read for the three items (the batch's, made before, or this
	// event's own); the event's ids only say where to look.
	sub, ok := subjects[ev.TransactionID]
	if !ok {
		own, err := n.Store.NotificationSubjects(ctx, []payment.NotifyEvent{ev})
		if err != nil {
			return delivery{}, err
		}
		sub = own[ev.TransactionID]
	}
	tx, req, m := sub.Transaction, sub.Request, sub.Merchant
	var err error
	if tx == nil || !tx.Status.Final() || tx.PaymentRequestID != ev.RequestID {
		log.Error("notification message for an unknown or unsettled transaction dropped", "transaction_id", ev.TransactionID,
			"metric", "NotificationsDropped")
		return delivery{}, nil
	}
	if req == nil {
		log.Error("notification for a missing payment request dropped")
		return delivery{}, nil
	}
	// What is signed comes from the store: the event's own statuses are
	// only routing.
	ev = payment.EventOf(ev, tx.ID, tx.Status, req.Status, tx.Code, tx.Message)
	note := Notification(req, ev)
	if ev.Type != "" {
		// A refund's or a dispute's notification: its record decides.
		e, ok := EventOf(tx, ev)
		if !ok {
			log.Error("notification of a refund or dispute the transaction does not hold dropped", "transaction_id", ev.TransactionID,
				"type", ev.Type, "object_id", ev.ObjectID, "metric", "NotificationsDropped")
			return delivery{}, nil
		}
		note.Event = e
	}
	if n.Overview != nil && ev.Attempts == 0 && ev.DueAt.IsZero() && ev.Type == "" {
		// Before the delivery: should this write fail, SQS retries the
		// message and the merchant is not notified twice for it.
		if _, err := n.Overview.AggregateSettled(ctx, tx, now); err != nil {
			return delivery{}, err
		}
	}
	if tx.Status == payment.TxDeclined && req.Status == payment.RequestPaid && req.TransactionID != tx.ID {
		// Another transaction paid the request: the merchant was or will be
		// told "approved, paid", and a decline of this attempt sent now
		// would contradict it (a merchant applying the latest notification
		// would mark a paid order unpaid). Recorded, never sent.
		log.Info("decline of an attempt superseded by the request's payment; not sent", "transaction_id", tx.ID,
			"paid_by", req.TransactionID)
		n.problemSolved(ctx, req.MerchantID, ev)
		return delivery{record: &payment.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID,
			Attempt: ev.Attempts + 1, At: now, Outcome: "superseded", Error: "the payment request was paid by another transaction"}, mustRecord: true}, nil
	}
	if m == nil || m.ID != req.MerchantID { // an event without (or with a wrong) merchant id
		if m, err = n.Store.Merchant(ctx, req.MerchantID); err != nil {
			return delivery{}, fmt.Errorf("load merchant %s: %w", req.MerchantID, err)
		}
	}
	target := req.NotifyURL
	if target == "" {
		target = m.NotifyURL
	}
	if target == "" {
		// The spec: sent only if a notify URL is configured.
		n.problemSolved(ctx, req.MerchantID, ev)
		return delivery{record: &payment.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID,
			Attempt: ev.Attempts + 1, At: now, Outcome: "skipped", Error: "no notify URL configured"}, mustRecord: true}, nil
	}
	apiKey, err := n.Sealer.Open(m.SealedAPIKey, m.ID)
	if err != nil {
		return delivery{}, fmt.Errorf("open API key of merchant %s: %w", m.ID, err)
	}
	secret := ""
	if m.SealedSecret != "" {
		if secret, err = n.Sealer.Open(m.SealedSecret, m.ID); err != nil {
			return delivery{}, fmt.Errorf("open webhook secret of merchant %s: %w", m.ID, err)
		}
	}
	// During a secret rotation's overlap the old secret signs too.
	var previous []string
	if sealed, ok := m.PreviousWebhookSecret(now); ok {
		old, err := n.Sealer.Open(sealed, m.ID)
		if err != nil {
			return delivery{}, fmt.Errorf("open previous webhook secret of merchant %s: %w", m.ID, err)
		}
		previous = append(previous, old)
	}
	decimals := int32(2)
	if c, ok := currency.Lookup(req.Unit); ok {
		decimals = c.Decimals
	}
	format := webhook.FormatForm
	if m.NotificationFormat == "json" {
		format = webhook.FormatJSON
	}
	built, err := webhook.Build(note, webhook.Options{URL: target, Format: format, Decimals: decimals,
		APIKey: apiKey, WebhookSecret: secret, PreviousWebhookSecrets: previous, EventID: ev.EventID, Now: now})
	if err != nil {
		return delivery{}, fmt.Errorf("build notification %s: %w", ev.EventID, err)
	}
	attempt := n.Sender.Send(ctx, built)
	record := payment.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID, Attempt: ev.Attempts + 1, At: attempt.At,
		URL: redactURL(target), StatusCode: attempt.StatusCode, LatencyMS: attempt.Latency.Milliseconds(), Error: attempt.Err}
	if attempt.Delivered() {
		record.Outcome = "delivered"
		log.Info("notification delivered", "status", attempt.StatusCode, "latency_ms", record.LatencyMS,
			"since_event_ms", now.Sub(ev.OccurredAt).Milliseconds())
		n.problemSolved(ctx, req.MerchantID, ev)
		return delivery{record: &record, mustRecord: true}, nil
	}
	if attempt.Gone() {
		// Retrying a delivery the endpoint refused for good for days
		// would be noise.
		record.Outcome = "gone"
		log.Warn("notification endpoint answered 410 Gone; no more attempts for this delivery")
		n.problemSolved(ctx, req.MerchantID, ev)
		return delivery{record: &record, mustRecord: true}, nil
	}
	next, ok := n.retry(ev, attempt)
	if ok {
		record.Outcome, record.NextAt = "retry", next.DueAt
		log.Warn("notification attempt failed; will retry", "status", attempt.StatusCode, "error", attempt.Err, "next_at", next.DueAt)
		if err := n.Queue.Send(ctx, queueURL, next, sendDelay(next.DueAt, n.now())); err != nil {
			return delivery{}, err
		}
		n.problem(ctx, req.MerchantID, ev, payment.NotifyFailing, now)
	} else {
		record.Outcome = "dead-lettered"
		log.Error("notification attempts exhausted; parked in the DLQ", "status", attempt.StatusCode, "error", attempt.Err)
		if err := n.Queue.Send(ctx, dlqURL, next, 0); err != nil {
			return delivery{}, err
		}
		n.problem(ctx, req.MerchantID, ev, payment.NotifyDLQ, now)
	}
	return delivery{record: &record}, nil
}

// problem lists ev's delivery as failing or parked for the dashboard.
// Bookkeeping: a failure is logged, the delivery goes on.
func (n *Notifier) problem(ctx context.Context, merchantID string, ev payment.NotifyEvent, state string, now time.Time) {
	if n.Overview == nil {
		return
	}
	if err := n.Overview.PutNotificationProblem(ctx, merchantID, payment.NotificationProblem{EventID: ev.EventID, State: state,
		RequestID: ev.RequestID, At: now}); err != nil {
		n.Log.Warn("listing a failing notification for the dashboard failed", "event_id", ev.EventID, "error", err.Error())
	}
}

// problemSolved takes ev off the dashboard's list once an attempt after a
// failure, or of an event sent again by hand, ended it (a first attempt had
// no failure before it: no write).
func (n *Notifier) problemSolved(ctx context.Context, merchantID string, ev payment.NotifyEvent) {
	if n.Overview == nil || ev.Attempts == 0 && !ev.Resent {
		return
	}
	if err := n.Overview.ClearNotificationProblem(ctx, merchantID, ev.EventID); err != nil {
		n.Log.Warn("clearing a failing notification for the dashboard failed", "event_id", ev.EventID, "error", err.Error())
	}
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
// allows are chained (webhook.Hop).
func sendDelay(dueAt, now time.Time) time.Duration {
	d := dueAt.Sub(now)
	if d <= 0 {
		return 0
	}
	if d > webhook.SQSMaxDelay {
		hop, _ := webhook.Hop(dueAt, now)
		return hop
	}
	return d.Truncate(time.Second)
}

func (n *Notifier) retry(ev payment.NotifyEvent, a webhook.Attempt) (payment.NotifyEvent, bool) {
	n.rndMu.Lock()
	if n.rnd == nil {
		n.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	next := ev
	next.Attempts++
	var ok bool
	next.DueAt, ok = webhook.NextAttempt(next.Attempts, a, n.Schedule, n.rnd)
	n.rndMu.Unlock()
	return next, ok
}

// Notification builds the spec's notification from the stored request and
// the event's statuses.
func Notification(r *payment.Request, ev payment.NotifyEvent) webhook.Notification {
	n := webhook.Notification{
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

// EventOf is the refund's or dispute's part of ev's notification, from the
// record tx holds (ok false when it holds none): the type and event id are
// the event's, everything else is stored. A refund's status is the one its
// type reports (a refund that failed after it succeeded is notified twice,
// each in its own words).
func EventOf(tx *payment.Transaction, ev payment.NotifyEvent) (*webhook.Event, bool) {
	e := &webhook.Event{Type: ev.Type, EventID: ev.EventID, ObjectID: ev.ObjectID}
	if strings.HasPrefix(ev.Type, "refund.") {
		r := tx.RefundByID(ev.ObjectID)
		if r == nil {
			return nil, false
		}
		e.Amount, e.Status = r.Amount, payment.RefundRefunded
		if ev.Type == payment.EventRefundFailed {
			e.Status, e.Reason = payment.RefundFailed, r.FailureReason
		}
		return e, true
	}
	if tx.After == nil || tx.After.Dispute == nil || tx.After.Dispute.ID != ev.ObjectID {
		return nil, false
	}
	d := tx.After.Dispute
	e.Status, e.Reason, e.Amount, e.EvidenceDueBy, e.DashboardURL = d.Status, d.Reason, d.Amount, d.EvidenceDueBy, d.DashboardURL()
	return e, true
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
