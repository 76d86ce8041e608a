package notifier_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// BenchmarkNotifierThroughput measures the notifier as the local stack runs
// it (the Lambda-like poller at the interactive source's concurrency, the
// Lambda handler invoked with JSON, signing, an HTTP POST to a local
// receiver, the attempt recorded) against its ceiling: a program making
// the same AWS calls at the same concurrency (per ReceiveMessage of 10, one
// BatchGetItem of the messages' state, one TransactWriteItems of their
// records and outbox clears, one DeleteMessageBatch) without poller,
// Lambda invoke or HTTP. Three rounds, alternating, each
// draining a queue pre-filled with the same number of messages:
//
//	go test -count=1 -run '^$' -bench NotifierThroughput -benchtime 1x ./internal/notifier/
func BenchmarkNotifierThroughput(b *testing.B) {
	const perRound, rounds = 2000, 3
	s := testenv.Stack(b)
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		b.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hits.Add(1)
	}))
	defer srv.Close()
	m := testenv.NewMerchant(b, func(m *merchant.Merchant) { m.NotifyURL = srv.URL })
	events := make([]payment.NotifyEvent, 100)
	for i := range events {
		events[i] = settleOn(b, m, "", true, payment.ChannelInteractive)
	}
	bodies := make([]payment.NotifyEvent, perRound)
	for i := range bodies {
		bodies[i] = events[i%len(events)]
	}

	env, err := s.Resources.Env("NotifierFunction")
	if err != nil {
		b.Fatal(err)
	}
	env["PAYREQ_LOCAL"], env["NOTIFY_TIMEOUT"] = "1", "30s"
	h, err := devstack.Functions["NotifierFunction"].Build(ctx, func(k string) string { return env[k] }, &cfg)
	if err != nil {
		b.Fatal(err)
	}
	var src devstack.SQSSource
	sources, _ := s.Resources.SQSSources()
	for _, x := range sources {
		if x.EventName == "Notifications" {
			src = x
		}
	}
	if src.MaxConcurrency == 0 {
		b.Fatal("no Notifications source in the template")
	}

	freshQueue := func() string {
		name := "notifier-bench-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"VisibilityTimeout": "300"}})
		if err != nil {
			b.Fatal(err)
		}
		sendBatch(b, client, *out.QueueUrl, bodies)
		return *out.QueueUrl
	}
	service := func() float64 {
		url := freshQueue()
		defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
		src := src
		src.Queue = devstack.Queue{Name: url, URL: url, ARN: "arn:aws:sqs:" + devstack.Region + ":" + devstack.Account + ":bench"}
		before := hits.Load()
		pctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			devstack.PollSQS(pctx, client, src, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		for hits.Load()-before < perRound {
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		stop()
		<-done
		return perRound / took.Seconds()
	}
	ceiling := func() float64 {
		url := freshQueue()
		defer client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
		var done atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < src.MaxConcurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Load() < perRound {
					out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
						MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
					if err != nil {
						b.Error(err)
						return
					}
					var entries []sqstypes.DeleteMessageBatchRequestEntry
					var msgBodies []string
					for i, msg := range out.Messages {
						entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
						msgBodies = append(msgBodies, aws.ToString(msg.Body))
					}
					if len(msgBodies) > 0 {
						if err := ceilingCalls(ctx, s.Store, msgBodies); err != nil {
							b.Error(err)
						}
					}
					if len(entries) > 0 {
						if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries}); err != nil {
							b.Error(err)
						}
					}
					done.Add(int64(len(out.Messages)))
				}
			}()
		}
		wg.Wait()
		return perRound / time.Since(start).Seconds()
	}
	for i := 0; i < b.N; i++ {
		var svcSum, ceilSum float64
		for r := 0; r < rounds; r++ {
			sv, ce := service(), ceiling()
			svcSum, ceilSum = svcSum+sv, ceilSum+ce
			b.Logf("round %d: notifier %.0f notifications/s, ceiling %.0f/s, ratio %.2f", r+1, sv, ce, sv/ce)
		}
		b.ReportMetric(svcSum/rounds, "notifications/s")
		b.ReportMetric(ceilSum/rounds, "ceiling/s")
		b.ReportMetric(svcSum/ceilSum, "ratio")
	}
}

// ceilingCalls makes the AWS calls the notifier makes for a received batch
// of first attempts that are delivered: one read of their transactions,
// requests and merchants, one write of their records with the outbox
// clears.
func ceilingCalls(ctx context.Context, st *dynamo.Store, bodies []string) error {
	evs := make([]payment.NotifyEvent, len(bodies))
	for i, body := range bodies {
		if err := json.Unmarshal([]byte(body), &evs[i]); err != nil {
			return err
		}
	}
	if _, err := st.NotificationSubjects(ctx, evs); err != nil {
		return err
	}
	writes := make([]payment.DeliveryWrite, len(evs))
	for i, ev := range evs {
		writes[i] = payment.DeliveryWrite{Attempt: payment.DeliveryAttempt{RequestID: ev.RequestID, EventID: ev.EventID, Attempt: 1,
			At: time.Now(), URL: "http://127.0.0.1/", StatusCode: 200, Outcome: "delivered"}, ClearOutboxOf: ev.TransactionID}
	}
	return errors.Join(st.RecordDeliveries(ctx, writes)...)
}
