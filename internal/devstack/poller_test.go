package devstack_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testenv"
)

// testQueue creates a fresh queue with the given visibility timeout and
// sends n messages "m0".."m<n-1>".
func testQueue(t *testing.T, client *sqs.Client, visibility, n int) devstack.Queue {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("poller-test-%d", time.Now().UnixNano())
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name,
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(visibility)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j := i; j < min(n, i+10); j++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String("m" + strconv.Itoa(j))})
		}
		if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: out.QueueUrl, Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
	return devstack.Queue{Name: name, URL: *out.QueueUrl, ARN: "arn:aws:sqs:" + devstack.Region + ":" + devstack.Account + ":" + name}
}

// startPoller runs PollSQS until the returned stop is called (stop waits
// for it to return).
func startPoller(t *testing.T, client devstack.SQSAPI, src devstack.SQSSource, h lambda.Handler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		devstack.PollSQS(ctx, client, src, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func wait(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remaining counts the queue's messages (visible and in flight).
func remaining(t *testing.T, client *sqs.Client, url string) (visible, inFlight int) {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight
}

// The template's notification sources are polled as the template declares
// them: their concurrency limits, batch size, ReportBatchItemFailures, and
// the queues' visibility timeouts (created from the template; a receive's
// short lease is extended to them, TestPollerLostReceiveResponse...).
func TestSQSSourcesFollowTheTemplate(t *testing.T) {
	s := testenv.Stack(t)
	sources, err := s.Resources.SQSSources()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"Notifications": 10, "BatchNotifications": 5}
	batchQueue := 0
	for _, src := range sources {
		if src.FunctionID == "BatchFunction" && src.EventName == "Continue" {
			batchQueue = src.MaxConcurrency
		}
		limit, ok := want[src.EventName]
		if !ok || src.FunctionID != "NotifierFunction" {
			continue
		}
		delete(want, src.EventName)
		if src.MaxConcurrency != limit || src.BatchSize != 10 || !src.ReportBatchItemFailures {
			t.Errorf("%s: %+v", src.EventName, src)
		}
		cfg, _ := testenv.CountingAWSConfig(t)
		out, err := sqs.NewFromConfig(cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &src.Queue.URL,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
		if err != nil {
			t.Fatal(err)
		}
		if v := out.Attributes["VisibilityTimeout"]; v != "300" {
			t.Errorf("%s: visibility timeout %s, the template says 300", src.Queue.Name, v)
		}
	}
	if len(want) > 0 {
		t.Fatalf("sources missing: %v", want)
	}
	// MaximumConcurrency: !Ref BatchQueueConcurrency (default 4) bounds the
	// batch rows' acquirer traffic locally as on AWS.
	if batchQueue != 4 {
		t.Errorf("batch continuation queue concurrency %d, want the parameter's 4", batchQueue)
	}
}

// A handler that reports some messages as failed gets only those again: the
// others are deleted, in batches (DeleteMessageBatch, never one by one).
func TestPollerKeepsOnlyFailedItemsAndDeletesInBatches(t *testing.T) {
	cfg, calls := testenv.CountingAWSConfig(t)
	client := sqs.NewFromConfig(cfg)
	// A visibility timeout of 3 s, not 1: a receipt handle whose message
	// became visible again may no longer delete it (SQS may refuse it), and on
	// a loaded machine a batch's handling and delete took over a second.
	const n, visibility = 60, 3
	q := testQueue(t, client, visibility, n)
	failing := map[string]bool{"m3": true, "m17": true, "m42": true}
	var (
		mu          sync.Mutex
		handled     = map[string]int{}
		invocations int
	)
	h := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		mu.Lock()
		defer mu.Unlock()
		invocations++
		for _, r := range ev.Records {
			handled[r.Body]++
			if failing[r.Body] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	})
	calls.Reset()
	stop := startPoller(t, client, devstack.SQSSource{FunctionID: "TestFunction", Queue: q, BatchSize: 10, MaxConcurrency: 2,
		ReportBatchItemFailures: true, Timeout: 10 * time.Second}, h)
	wait(t, "every message handled", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == n
	})
	stop()
	got := calls.Calls()
	mu.Lock()
	inv := invocations
	for body, c := range handled {
		if !failing[body] && c != 1 {
			t.Errorf("%s handled %d times: a successful message must be deleted", body, c)
		}
	}
	mu.Unlock()

	// What is left: the failed messages only. Everything still in the queue
	// is visible again after its visibility timeout: receive (and keep
	// hidden, 30 s) for a timeout and two seconds and see what comes.
	left := map[string]bool{}
	for end := time.Now().Add((visibility + 2) * time.Second); time.Now().Before(end); {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &q.URL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			left[aws.ToString(m.Body)] = true
		}
	}
	if len(left) != len(failing) {
		t.Errorf("left in the queue: %v, want the failed %v", left, failing)
	}
	for body := range left {
		if !failing[body] {
			t.Errorf("%s is still in the queue but succeeded", body)
		}
	}

	var batchDeletes, singleDeletes int
	for _, c := range got {
		switch c {
		case "SQS.DeleteMessageBatch":
			batchDeletes++
		case "SQS.DeleteMessage":
			singleDeletes++
		}
	}
	// One batch delete per invocation at most (an invocation whose every
	// message failed deletes nothing), never one call per message.
	if singleDeletes != 0 || batchDeletes == 0 || batchDeletes > inv || batchDeletes >= n-len(failing) {
		t.Fatalf("deletes: %d DeleteMessageBatch, %d DeleteMessage for %d invocations of %d messages", batchDeletes, singleDeletes, inv, n)
	}
	t.Logf("%d messages, %d invocations, %d DeleteMessageBatch calls", n, inv, batchDeletes)
}

// Without ReportBatchItemFailures in the template, a successful invocation
// deletes its whole batch, whatever the handler answered (as Lambda).
func TestPollerIgnoresItemFailuresWhenTheSourceDoesNotReportThem(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	client := sqs.NewFromConfig(cfg)
	q := testQueue(t, client, 1, 10)
	var mu sync.Mutex
	seen := map[string]int{}
	h := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			seen[r.Body]++
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
		return resp, nil
	})
	stop := startPoller(t, client, devstack.SQSSource{FunctionID: "TestFunction", Queue: q, BatchSize: 10, MaxConcurrency: 1, Timeout: 10 * time.Second}, h)
	wait(t, "every message handled", 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 10 })
	stop()
	wait(t, "queue empty", 10*time.Second, func() bool { v, f := remaining(t, client, q.URL); return v == 0 && f == 0 })
	for body, c := range seen {
		if c != 1 {
			t.Errorf("%s handled %d times", body, c)
		}
	}
}

// Concurrent invocations grow up to the source's limit while batches come
// full, and never beyond it.
func TestPollerConcurrencyReachesButNeverExceedsTheLimit(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	client := sqs.NewFromConfig(cfg)
	const limit, n = 3, 200
	q := testQueue(t, client, 30, n)
	var (
		mu               sync.Mutex
		cur, peak, total int
		reached          = make(chan struct{})
		reachedOnce      sync.Once
	)
	h := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		if cur == limit {
			reachedOnce.Do(func() { close(reached) })
		}
		mu.Unlock()
		// Hold the first invocations until the limit is reached, so that
		// reaching it does not depend on the machine's speed.
		select {
		case <-reached:
		case <-time.After(20 * time.Second):
		case <-ctx.Done():
		}
		mu.Lock()
		cur--
		total += len(ev.Records)
		mu.Unlock()
		return events.SQSEventResponse{}, nil
	})
	stop := startPoller(t, client, devstack.SQSSource{FunctionID: "TestFunction", Queue: q, BatchSize: 10, MaxConcurrency: limit,
		ReportBatchItemFailures: true, Timeout: 30 * time.Second}, h)
	select {
	case <-reached:
	case <-time.After(25 * time.Second):
		t.Fatalf("concurrency never reached %d (peak %d)", limit, peak)
	}
	wait(t, "every message handled", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return total >= n })
	stop()
	mu.Lock()
	defer mu.Unlock()
	if peak != limit {
		t.Fatalf("peak concurrency %d, limit %d", peak, limit)
	}
}

// A poller stopped while invocations hold messages (the stack stops, a test
// ends) makes what they did not finish visible again at once, and still
// deletes what they finished: nothing waits out the queue's 300 s
// visibility timeout. Each invocation finishes its first record and is
// still busy with the rest when the poller stops.
func TestPollerStoppedMidBatchReleasesWhatItHolds(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	client := sqs.NewFromConfig(cfg)
	const n, conc = 30, 3
	q := testQueue(t, client, 300, n)
	var (
		mu       sync.Mutex
		finished = map[string]bool{}
		holding  int
	)
	allHeld := make(chan struct{})
	var heldOnce sync.Once
	h := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		mu.Lock()
		finished[ev.Records[0].Body] = true
		holding++
		if holding == conc {
			heldOnce.Do(func() { close(allHeld) })
		}
		mu.Unlock()
		<-ctx.Done() // busy until the shutdown cuts it short
		for _, r := range ev.Records[1:] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
		return resp, nil
	})
	stop := startPoller(t, client, devstack.SQSSource{FunctionID: "TestFunction", Queue: q, BatchSize: 10, MaxConcurrency: conc,
		ReportBatchItemFailures: true, Timeout: time.Minute}, h)
	select {
	case <-allHeld:
	case <-time.After(30 * time.Second):
		t.Fatalf("the poller never held %d batches at once", conc)
	}
	stop()
	// Everything not finished is receivable now (the test's receive keeps
	// it hidden for 30 s, so each is counted once); the finished are gone.
	left := map[string]bool{}
	for end := time.Now().Add(20 * time.Second); len(left) < n-conc && time.Now().Before(end); {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &q.URL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			left[aws.ToString(m.Body)] = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(left) != n-conc {
		t.Fatalf("%d of the %d unfinished messages receivable after the poller stopped (the rest hidden for 300 s)", len(left), n-conc)
	}
	for body := range finished {
		if left[body] {
			t.Errorf("%s was finished but not deleted", body)
		}
	}
}

// An invocation the shutdown cuts short with an error (the handler gives up
// its whole batch) gets its messages made visible again at once too.
func TestPollerStoppedMidInvocationErrorReleasesTheBatch(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	client := sqs.NewFromConfig(cfg)
	const n = 10
	q := testQueue(t, client, 300, n)
	held := make(chan struct{}, 1)
	h := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return events.SQSEventResponse{}, ctx.Err()
	})
	stop := startPoller(t, client, devstack.SQSSource{FunctionID: "TestFunction", Queue: q, BatchSize: 10, MaxConcurrency: 1,
		ReportBatchItemFailures: true, Timeout: time.Minute}, h)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the poller never invoked the handler")
	}
	stop()
	wait(t, "the batch visible again", 10*time.Second, func() bool { v, f := remaining(t, client, q.URL); return v == n && f == 0 })
}

// losingClient is the real SQS client whose first receive that brings
// messages loses its response on the way back, as a receive whose HTTP
// call timed out on a loaded machine: SQS handed the messages out, the
// poller never saw them.
type losingClient struct {
	*sqs.Client
	mu   sync.Mutex
	lost []string
}

func (c *losingClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.Client.ReceiveMessage(ctx, in, opts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && len(out.Messages) > 0 && c.lost == nil {
		for _, m := range out.Messages {
			c.lost = append(c.lost, aws.ToString(m.Body))
		}
		return nil, fmt.Errorf("receive: response lost (simulated client timeout)")
	}
	return out, err
}

// A batch whose receive response is lost is back well within the queue's
// 300 s visibility timeout: the receive only leased it for a few seconds.
// Every message is handled, the lost ones within a bound far below 300 s.
func TestPollerLostReceiveResponseComesBackAfterTheLease(t *testing.T) {
	cfg, _ := testenv.CountingAWSConfig(t)
	client := &losingClient{Client: sqs.NewFromConfig(cfg)}
	const n = 30
	q := testQueue(t, client.Client, 300, n)
	var mu sync.Mutex
	handled := map[string]time.Duration{}
	start := time.Now()
	h := lambda.NewHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			if _, ok := handled[r.Body]; !ok {
				handled[r.Body] = time.Since(start)
			}
		}
		return events.SQSEventResponse{}, nil
	})
	startPoller(t, client, devstack.SQSSource{FunctionID: "TestFunction", Queue: q, BatchSize: 10, MaxConcurrency: 2,
		ReportBatchItemFailures: true, Timeout: time.Minute, ReceiveLease: 2 * time.Second}, h)
	const bound = time.Minute // the lease is 2 s; without it, 300 s
	wait(t, "every message handled", bound, func() bool { mu.Lock(); defer mu.Unlock(); return len(handled) == n })
	client.mu.Lock()
	lost := client.lost
	client.mu.Unlock()
	if len(lost) == 0 {
		t.Fatal("no receive response was lost")
	}
	mu.Lock()
	defer mu.Unlock()
	var slowest time.Duration
	for _, b := range lost {
		slowest = max(slowest, handled[b])
	}
	t.Logf("%d messages of a lost receive handled, the last after %s", len(lost), slowest.Round(time.Millisecond))
	// Messages the poller held were extended to the queue's timeout, not
	// left on the 2 s lease: handled once each and deleted.
	wait(t, "queue empty", 20*time.Second, func() bool { v, f := remaining(t, client.Client, q.URL); return v == 0 && f == 0 })
}
