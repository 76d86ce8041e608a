package notifier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
)

// A message that fails for an infrastructure reason (here the merchant's
// sealed key cannot be opened, then is repaired) is received again within
// seconds, not after the queue's 300 s visibility timeout, and delivered.
func TestInfrastructureFailureIsRetriedWithinSeconds(t *testing.T) {
	s := testenv.Stack(t)
	ctx := context.Background()
	client := sqsClient(t)
	name := "itemretry-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	qo, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"VisibilityTimeout": "300"}})
	if err != nil {
		t.Fatal(err)
	}
	qURL := aws.ToString(qo.QueueUrl)
	t.Cleanup(func() { client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &qURL}) })

	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	var good string
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL, good, m.SealedAPIKey = srv.URL, m.SealedAPIKey, "broken" })
	ev := settleOn(t, m, "", true, payment.ChannelInteractive)
	if err := queue.New(client).Send(ctx, qURL, ev, 0); err != nil {
		t.Fatal(err)
	}

	env, err := s.Resources.Env("NotifierFunction")
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"], env["NOTIFICATIONS_QUEUE_URL"] = "1", qURL
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := devstack.Functions["NotifierFunction"].Build(ctx, func(k string) string { return env[k] }, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:sqs:" + devstack.Region + ":" + devstack.Account + ":" + name
	// receive waits up to limit for the message, as the poller would get it.
	receive := func(limit time.Duration) (events.SQSEvent, bool) {
		for end := time.Now().Add(limit); time.Now().Before(end); {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &qURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
				MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Messages) > 0 {
				var e events.SQSEvent
				for _, msg := range out.Messages {
					e.Records = append(e.Records, events.SQSMessage{MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle),
						Body: aws.ToString(msg.Body), Attributes: msg.Attributes, EventSourceARN: arn, EventSource: "aws:sqs"})
				}
				return e, true
			}
		}
		return events.SQSEvent{}, false
	}
	first, ok := receive(30 * time.Second)
	if !ok {
		t.Fatal("the message never arrived")
	}
	var resp events.SQSEventResponse
	if err := devstack.Invoke(ctx, h, "NotifierFunction", time.Minute, first, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || hits.Load() != 0 {
		t.Fatalf("broken merchant key: %+v, %d deliveries; want one item failure, none delivered", resp, hits.Load())
	}
	failedAt := time.Now()
	stored, err := s.Store.Merchant(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored.SealedAPIKey = good
	if err := s.Store.UpdateMerchant(ctx, stored); err != nil {
		t.Fatal(err)
	}
	const bound = time.Minute // the first retry waits 5 s; the queue's timeout is 300 s
	again, ok := receive(bound)
	if !ok {
		t.Fatalf("the failed message was not back within %s (visibility timeout 300 s)", bound)
	}
	back := time.Since(failedAt)
	resp = events.SQSEventResponse{}
	if err := devstack.Invoke(ctx, h, "NotifierFunction", time.Minute, again, &resp); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(resp)
	if len(resp.BatchItemFailures) != 0 || hits.Load() != 1 {
		t.Fatalf("after the repair: %s, %d deliveries; want delivered once", raw, hits.Load())
	}
	t.Logf("failed message back after %s, then delivered", back.Round(time.Millisecond))
}
