package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// BatchAPI is the SQS call a Coalescer uses (*sqs.Client has it).
type BatchAPI interface {
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQS's limits for one SendMessageBatch.
const (
	maxBatchEntries = 10
	maxBatchBytes   = 256 << 10
)

// coalesceInFlight is how many SendMessageBatch calls one queue may have
// in flight at once; sends arriving meanwhile wait and go together. One:
// the batch's rows settle a few milliseconds apart, and a second slot
// would let nearly every send leave alone.
const coalesceInFlight = 1

// sendTimeout bounds one SendMessageBatch: it carries several callers'
// messages, so no single caller's context may cancel it.
const sendTimeout = 10 * time.Second

// Coalescer sends like Client.Send, but concurrent sends to one queue share
// SendMessageBatch calls (group commit): a send made while the queue has a
// batch in flight waits and leaves with the sends that queued behind it,
// up to 10. A lone send leaves at once, so nothing waits
// for company. Send returns only when its own message is accepted or
// refused, so a caller knows, as with Client.Send, whether it was sent.
//
// The batch function uses it: its rows settle many at a time, and each
// settles with one notification to send.
type Coalescer struct {
	api    BatchAPI
	mu     sync.Mutex
	queues map[string]*pendingSends
}

type pendingSends struct {
	inFlight int
	waiting  []*pendingSend
}

type pendingSend struct {
	body  string
	delay int32
	done  chan error // buffered: the sender never blocks on a caller that gave up
}

// NewCoalescer returns a Coalescer over api.
func NewCoalescer(api BatchAPI) *Coalescer {
	return &Coalescer{api: api, queues: map[string]*pendingSends{}}
}

// Send JSON-encodes body and sends it to queueURL, delivered after delay
// (rounded down to whole seconds, at most MaxDelay). When ctx ends first it
// returns ctx's error; the message may still be sent (at least once).
func (c *Coalescer) Send(ctx context.Context, queueURL string, body any, delay time.Duration) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	e := &pendingSend{body: string(b), delay: DelaySeconds(delay), done: make(chan error, 1)}
	c.mu.Lock()
	q := c.queues[queueURL]
	if q == nil {
		q = &pendingSends{}
		c.queues[queueURL] = q
	}
	q.waiting = append(q.waiting, e)
	c.mu.Unlock()
	c.pump(ctx, queueURL, q)
	select {
	case err := <-e.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pump sends waiting messages while the queue has room in flight; the
// goroutine that frees a slot sends what queued behind it.
func (c *Coalescer) pump(ctx context.Context, queueURL string, q *pendingSends) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q.inFlight < coalesceInFlight && len(q.waiting) > 0 {
		n, size := 0, 0
		for n < len(q.waiting) && n < maxBatchEntries && (n == 0 || size+len(q.waiting[n].body) <= maxBatchBytes) {
			size += len(q.waiting[n].body)
			n++
		}
		batch := q.waiting[:n:n]
		q.waiting = q.waiting[n:]
		q.inFlight++
		go func() {
			c.sendBatch(ctx, queueURL, batch)
			c.mu.Lock()
			q.inFlight--
			c.mu.Unlock()
			c.pump(ctx, queueURL, q)
		}()
	}
}

func (c *Coalescer) sendBatch(ctx context.Context, queueURL string, batch []*pendingSend) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
	for i, e := range batch {
		entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(e.body),
			DelaySeconds: e.delay}
	}
	out, err := c.api.SendMessageBatch(sctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err != nil {
		for _, e := range batch {
			e.done <- fmt.Errorf("send message: %w", err)
		}
		return
	}
	failed := map[string]string{}
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
	}
	for i, e := range batch {
		if msg, ok := failed[strconv.Itoa(i)]; ok {
			e.done <- fmt.Errorf("send message: %s", msg)
			continue
		}
		e.done <- nil
	}
}
