package notifier_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/notifierwire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

func queueClient(c *sqs.Client) *queue.Client { return queue.New(c) }

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// unpolledQueue is a fresh queue no poller reads: what is sent there stays.
func unpolledQueue(t *testing.T, client *sqs.Client) string {
	t.Helper()
	name := "unpolled-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return *out.QueueUrl
}

// drain receives every event waiting in queueURL.
func drain(t *testing.T, client *sqs.Client, queueURL string) []payment.NotifyEvent {
	t.Helper()
	var evs []payment.NotifyEvent
	for {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return evs
		}
		for _, m := range out.Messages {
			var ev payment.NotifyEvent
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// functionEnv is a function's template environment on the test stack, with
// overrides.
func functionEnv(t *testing.T, id string, overrides map[string]string) func(string) string {
	t.Helper()
	env, err := testenv.Stack(t).Resources.Env(id)
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"] = "1"
	for k, v := range overrides {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// A batch row's attempt keeps its channel on the transaction, and its
// notification goes to the batch queue; an interactive attempt's to the
// interactive queue.
func TestPaymentCoreSendsEachChannelToItsQueue(t *testing.T) {
	testenv.Stack(t)
	client := sqsClient(t)
	apiQ, batchQ := unpolledQueue(t, client), unpolledQueue(t, client)
	svc, err := paywire.PaymentService(context.Background(), functionEnv(t, "BatchFunction",
		map[string]string{"NOTIFICATIONS_QUEUE_URL": apiQ, "BATCH_NOTIFICATIONS_QUEUE_URL": batchQ}), wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL = "http://127.0.0.1:1/" })
	s := testenv.Stack(t)
	pay := func(ch payment.Channel) paycore.Result {
		now := time.Now().UTC()
		req := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("12.00"),
			Unit: "EUR", CreatedAt: now, UpdatedAt: now}
		testenv.Seeded(t, "payment request", s.Store.CreatePaymentRequest(context.Background(), req))
		res, err := svc.Pay(context.Background(), m.Merchant, req.ID, paycore.Attempt{Method: provider.MethodCard,
			Payer: &payer.Data{Name: "Ann Lee", Email: "ann@example.com", PhoneNumber: "4915112345678", Address: "Main St 1",
				City: "Berlin", State: "BE", PostalCode: "10115", Country: "DE"},
			Card:              &card.Input{Holder: "Ann Lee", Number: "4111111111111111", Expiry: "12/" + strconv.Itoa(now.Year()%100+2), CVV: "123"},
			CardholderPresent: !ch.Batch(), Channel: ch})
		if err != nil || res.TransactionStatusID != payment.TxApproved {
			t.Fatalf("pay (%s): %v %+v", ch, err, res)
		}
		tx, err := s.Store.Transaction(context.Background(), res.TransactionID)
		if err != nil || tx.Channel != ch {
			t.Fatalf("stored transaction channel %q, want %q (%v)", tx.Channel, ch, err)
		}
		return res
	}
	batchRes, apiRes := pay(payment.ChannelBatch), pay(payment.ChannelInteractive)
	inBatch, inAPI := drain(t, client, batchQ), drain(t, client, apiQ)
	if len(inBatch) != 1 || inBatch[0].TransactionID != batchRes.TransactionID || inBatch[0].Channel != payment.ChannelBatch {
		t.Errorf("batch queue holds %+v", inBatch)
	}
	if len(inAPI) != 1 || inAPI[0].TransactionID != apiRes.TransactionID || inAPI[0].Channel != payment.ChannelInteractive {
		t.Errorf("interactive queue holds %+v", inAPI)
	}
}

// A batch event's retry stays in the batch queue.
func TestNotifierKeepsABatchEventsRetriesInTheBatchQueue(t *testing.T) {
	testenv.Stack(t)
	client := sqsClient(t)
	apiQ, batchQ := unpolledQueue(t, client), unpolledQueue(t, client)
	h, err := notifierwire.Notifier(context.Background(), functionEnv(t, "NotifierFunction",
		map[string]string{"NOTIFICATIONS_QUEUE_URL": apiQ, "BATCH_NOTIFICATIONS_QUEUE_URL": batchQ}), wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, 500)
	m := testenv.NewMerchant(t)
	ev := settleOn(t, m, rc.srv.URL, true, payment.ChannelBatch)
	body, _ := json.Marshal(ev)
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: string(body),
		EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:batch"}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%v %+v", err, resp)
	}
	if len(rc.got()) != 1 {
		t.Fatalf("%d attempts", len(rc.got()))
	}
	waitFor(t, "retry queued", 10*time.Second, func() bool {
		b, _ := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &batchQ,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed, sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		return b != nil && (b.Attributes["ApproximateNumberOfMessagesDelayed"] == "1" || b.Attributes["ApproximateNumberOfMessages"] == "1")
	})
	if evs := drain(t, client, apiQ); len(evs) != 0 {
		t.Fatalf("a batch event's retry went to the interactive queue: %+v", evs)
	}
}

// A notification whose send failed is marked in the outbox, so the
// reconciler re-sends it at once even while its queue is busy, when an
// entry that may be in flight is held.
func TestFailedSendIsResentEvenWhileTheQueueIsBusy(t *testing.T) {
	testenv.Stack(t)
	client := sqsClient(t)
	busyQ := unpolledQueue(t, client)
	svc, err := paywire.PaymentService(context.Background(), functionEnv(t, "PaymentsFunction",
		map[string]string{"NOTIFICATIONS_QUEUE_URL": busyQ + "-missing"}), wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL = "http://127.0.0.1:1/" })
	s := testenv.Stack(t)
	now := time.Now().UTC()
	req := &payment.Request{ID: ids.New(now), MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("12.00"),
		Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	testenv.Seeded(t, "payment request", s.Store.CreatePaymentRequest(context.Background(), req))
	res, err := svc.Pay(context.Background(), m.Merchant, req.ID, paycore.Attempt{Method: provider.MethodCard,
		Card:              &card.Input{Holder: "Ann Lee", Number: "4111111111111111", Expiry: "12/" + strconv.Itoa(now.Year()%100+2), CVV: "123"},
		CardholderPresent: true, Hosted: true})
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("pay: %v %+v", err, res)
	}
	held := settle(t, m, "", true) // no message either, but nothing says so: may be in flight
	// The queue is busy: it holds a message.
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &busyQ, MessageBody: aws.String("{}")}); err != nil {
		t.Fatal(err)
	}
	rq := &recordingQueue{Client: queueClient(client), sent: map[string]int{}}
	r := &notifier.Reconciler{Store: s.Store, Queue: rq, QueueURL: busyQ, BatchQueueURL: unpolledQueue(t, client),
		Grace: time.Millisecond, Log: discardLog()}
	time.Sleep(2 * time.Millisecond)
	if _, err := r.RunStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	failedEvent := "evt_" + strconv.FormatInt(res.TransactionID, 10) + "_1"
	if rq.sent[failedEvent] != 1 {
		t.Errorf("the notification whose send failed was re-sent %d times, want 1 (sent: %v)", rq.sent[failedEvent], rq.sent)
	}
	if rq.sent[held.EventID] != 0 {
		t.Errorf("an entry that may be in flight was re-sent while its queue is busy")
	}
	// Tidy: the held entry would otherwise be sent by the stack's reconciler.
	s.Store.ClearOutbox(context.Background(), held.TransactionID, held.EventID)
}
