package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
)

// gatedSQS answers SendMessageBatch only when released, so a test decides
// how many sends are waiting when a batch leaves; it can refuse one entry.
type gatedSQS struct {
	mu      sync.Mutex
	calls   [][]string // bodies per call
	release chan struct{}
	refuse  string // a body answered as a failed entry
	aborted int    // calls whose context ended while held
}

func (g *gatedSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var bodies []string
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		bodies = append(bodies, aws.ToString(e.MessageBody))
		if aws.ToString(e.MessageBody) == g.refuse {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidMessageContents"),
				Message: aws.String("refused"), SenderFault: true})
		} else {
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
		}
	}
	g.mu.Lock()
	g.calls = append(g.calls, bodies)
	g.mu.Unlock()
	if g.release != nil {
		select {
		case <-g.release:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			g.mu.Lock()
			g.aborted++
			g.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	return out, nil
}

func (g *gatedSQS) callCount() int { g.mu.Lock(); defer g.mu.Unlock(); return len(g.calls) }

// A lone send leaves at once, alone: nothing waits for company.
func TestCoalescerLoneSendLeavesAtOnce(t *testing.T) {
	g := &gatedSQS{}
	if err := queue.NewCoalescer(g).Send(context.Background(), "http://q", map[string]int{"a": 1}, 0); err != nil {
		t.Fatal(err)
	}
	if len(g.calls) != 1 || len(g.calls[0]) != 1 || g.calls[0][0] != `{"a":1}` {
		t.Fatalf("calls %v", g.calls)
	}
}

// Sends made while a batch is in flight wait and leave together, at most
// 10 per call; each caller learns its own entry's fate.
func TestCoalescerGroupsWaitingSendsAndReportsEachEntry(t *testing.T) {
	g := &gatedSQS{release: make(chan struct{}), refuse: `"m-7"`}
	c := queue.NewCoalescer(g)
	ctx := context.Background()
	errs := make([]error, 25)
	var wg sync.WaitGroup
	send := func(i int) {
		defer wg.Done()
		errs[i] = c.Send(ctx, "http://q", "m-"+strconv.Itoa(i), 0)
	}
	// The first send takes the in-flight slot and is held there.
	wg.Add(1)
	go send(0)
	waitFor(t, func() bool { return g.callCount() == 1 })
	// 24 more queue behind it.
	for i := 1; i < 25; i++ {
		wg.Add(1)
		go send(i)
	}
	waitFor(t, func() bool { return c.Waiting("http://q") == 24 })
	close(g.release)
	wg.Wait()
	if n := g.callCount(); n != 4 { // 1 held, then 10 + 10 + 4
		t.Errorf("%d SendMessageBatch calls for 25 sends, want 4: %v", n, g.calls)
	}
	seen := map[string]int{}
	for _, call := range g.calls {
		if len(call) > 10 {
			t.Errorf("a call carries %d entries", len(call))
		}
		for _, b := range call {
			seen[b]++
		}
	}
	for i := 0; i < 25; i++ {
		if seen[fmt.Sprintf("%q", "m-"+strconv.Itoa(i))] != 1 {
			t.Errorf("message %d sent %d times", i, seen[fmt.Sprintf("%q", "m-"+strconv.Itoa(i))])
		}
		if (errs[i] != nil) != (i == 7) {
			t.Errorf("send %d: error %v", i, errs[i])
		}
	}
}

// A caller that gives up returns its context's error; the batch it rode in
// is not cancelled with it.
func TestCoalescerCallerGivingUpDoesNotCancelTheBatch(t *testing.T) {
	g := &gatedSQS{release: make(chan struct{})}
	c := queue.NewCoalescer(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Send(ctx, "http://q", "gives-up", 0) }()
	waitFor(t, func() bool { return g.callCount() == 1 })
	other := make(chan error, 1)
	go func() { other <- c.Send(context.Background(), "http://q", "stays", 0) }()
	waitFor(t, func() bool { return c.Waiting("http://q") == 1 })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Send after cancel = %v", err)
	}
	close(g.release) // the held call returns normally: its context was not cancelled
	if err := <-other; err != nil {
		t.Fatalf("the other send failed: %v", err)
	}
	if n := g.callCount(); n != 2 || g.calls[1][0] != `"stays"` || g.aborted != 0 {
		t.Fatalf("calls %v, %d aborted", g.calls, g.aborted)
	}
}

// On the emulator: 200 concurrent sends arrive exactly once each, with
// their delays, in fewer calls than messages.
func TestCoalescerOnTheEmulator(t *testing.T) {
	testenv.Stack(t)
	cfg, counter := testenv.CountingAWSConfig(t)
	client := sqs.NewFromConfig(cfg)
	ctx := context.Background()
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("coalesce-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(q.QueueUrl)
	c := queue.NewCoalescer(client)
	counter.Reset()
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Send(ctx, url, map[string]int{"n": i}, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	calls := len(counter.Calls())
	t.Logf("200 sends in %d SendMessageBatch calls", calls)
	if calls >= 200 {
		t.Errorf("%d calls for 200 concurrent sends: nothing was coalesced", calls)
	}
	seen := map[int]int{}
	for len(seen) < 200 {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("only %d of 200 messages arrived", len(seen))
		}
		for _, m := range out.Messages {
			var b struct{ N int }
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &b); err != nil {
				t.Fatal(err)
			}
			seen[b.N]++
			if seen[b.N] > 1 {
				t.Fatalf("message %d arrived twice", b.N)
			}
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
