package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/cfn"
)

// DefaultPollers is the concurrency of an SQS event source whose template
// sets neither ScalingConfig.MaximumConcurrency nor the function's
// ReservedConcurrentExecutions: the five pollers an event source mapping
// starts with on AWS.
const DefaultPollers = 5

// SQSSource is one SQS event source mapping of the template.
type SQSSource struct {
	FunctionID string
	EventName  string
	Queue      Queue
	BatchSize  int32
	// MaxConcurrency bounds the concurrent invocations of this source: the
	// event's ScalingConfig.MaximumConcurrency, else the function's
	// ReservedConcurrentExecutions, else DefaultPollers (the smaller of the
	// two when both are set).
	MaxConcurrency int
	// ReportBatchItemFailures is the event's FunctionResponseTypes: only
	// with it does a handler's batchItemFailures keep just those messages;
	// without it a successful invocation deletes the whole batch (as Lambda).
	ReportBatchItemFailures bool
	Timeout                 time.Duration // the function's template Timeout
	// ReceiveLease is how long a receive hides its messages before the
	// poller, holding them, extends them to the queue's visibility timeout
	// (0: DefaultReceiveLease).
	ReceiveLease time.Duration
}

// DefaultReceiveLease is the visibility a receive asks for, extended to the
// queue's own as soon as the messages are in hand. A receive whose response
// never reaches the poller (its HTTP call timed out on a loaded machine and
// the SDK retried; SQS had already handed the messages out) hides them for
// this long instead of the queue's 300 s.
const DefaultReceiveLease = 20 * time.Second

// SQSSources lists the template's SQS event sources with their created queues.
func (r *Resources) SQSSources() ([]SQSSource, error) {
	var out []SQSSource
	for _, f := range r.Functions {
		for _, ev := range f.Events {
			if ev.Type != "SQS" {
				continue
			}
			qn := cfn.Path(ev.Properties, "Queue")
			id, _, ok := cfn.GetAttTarget(qn)
			if !ok {
				return nil, fmt.Errorf("function %s event %s: Queue must be !GetAtt <Queue>.Arn", f.LogicalID, ev.Name)
			}
			q, ok := r.Queues[id]
			if !ok {
				return nil, fmt.Errorf("function %s event %s: queue %s not created", f.LogicalID, ev.Name, id)
			}
			src := SQSSource{FunctionID: f.LogicalID, EventName: ev.Name, Queue: q, BatchSize: 10,
				Timeout: r.functionTimeout(f.LogicalID)}
			if bs := cfn.Path(ev.Properties, "BatchSize"); bs != nil {
				if n, err := strconv.Atoi(bs.Value); err == nil && n > 0 && n <= 10 {
					src.BatchSize = int32(n)
				}
			}
			if types := cfn.Path(ev.Properties, "FunctionResponseTypes"); types != nil {
				for _, t := range types.Content {
					src.ReportBatchItemFailures = src.ReportBatchItemFailures || t.Value == "ReportBatchItemFailures"
				}
			}
			var limits []int
			maxConc := ""
			if n := cfn.Path(ev.Properties, "ScalingConfig", "MaximumConcurrency"); n != nil {
				maxConc = n.Value
				if r.resolver != nil {
					// A !Ref to a per-stage parameter (BatchQueueConcurrency).
					if v, err := r.resolver.String(n); err == nil {
						maxConc = v
					}
				}
			}
			for _, n := range []string{maxConc, r.functionProperty(f.LogicalID, "ReservedConcurrentExecutions")} {
				if v, err := strconv.Atoi(n); err == nil && v > 0 {
					limits = append(limits, v)
				}
			}
			src.MaxConcurrency = DefaultPollers
			if len(limits) > 0 {
				src.MaxConcurrency = slices.Min(limits)
			}
			out = append(out, src)
		}
	}
	return out, nil
}

// functionProperty is a scalar property of a function (resolved), "" when absent.
func (r *Resources) functionProperty(id, prop string) string {
	n := cfn.Path(r.Template.Resources[id].Properties, prop)
	if n == nil {
		return ""
	}
	if r.resolver != nil {
		if v, err := r.resolver.String(n); err == nil {
			return v
		}
	}
	return n.Value
}

// SQSAPI is the SQS subset the pollers use (*sqs.Client).
type SQSAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// settleTimeout bounds the SQS calls a poller makes after its context ended
// (the last receive, deletes, releases): they run on a context of their own
// so that what is in hand is settled, not abandoned.
const settleTimeout = 10 * time.Second

// PollSQS does what the Lambda event source mapping does, until ctx ends:
//
//   - pollers long-poll the queue (its visibility timeout is the template's;
//     a receive only leases for src.ReceiveLease until the poller extends
//     the batch to it, see below) and hand each batch to the function's
//     Lambda handler as the JSON of an events.SQSEvent, within the
//     function's Timeout;
//   - they scale like Lambda's: one poller while the queue is idle, one
//     more each time a receive comes back full, up to src.MaxConcurrency
//     concurrent invocations, and back down when receives come back empty;
//   - after a successful invocation the batch is deleted with
//     DeleteMessageBatch, except the messages the handler reported in
//     batchItemFailures (when the source declares ReportBatchItemFailures;
//     an unknown identifier fails the whole batch, as on AWS). A failed
//     invocation deletes nothing.
//
// Messages not deleted become visible again after their visibility timeout,
// and SQS moves them to the dead-letter queue after maxReceiveCount
// receives, exactly as on AWS: a function error or timeout, and an item
// failure, keep the message hidden for the queue's whole visibility timeout
// (300 s for the notifications queues), so the local stack shows what AWS
// would do.
//
// Where Lambda has nothing to say, nothing is left hidden: a receive asks
// for a short lease (src.ReceiveLease) and the poller extends the messages
// to the queue's visibility timeout once it holds them, so a receive
// response lost on the way hides its messages for seconds, not minutes;
// and when ctx ends (the stack stops, a test ends), a receive already sent
// is awaited and what it brought is made visible again at once (ChangeMessageVisibility 0),
// as is every message of an invocation cut short by the shutdown that it did
// not finish; what it finished is still deleted. A poller scaling down only
// retires after an empty receive, with nothing in hand.
func PollSQS(ctx context.Context, client SQSAPI, src SQSSource, h lambda.Handler, log *slog.Logger) {
	p := &poller{client: client, src: src, h: h, log: log, max: int32(max(1, src.MaxConcurrency))}
	p.lease, p.visibility = leaseFor(ctx, client, src, log)
	p.active.Store(1)
	p.wg.Add(1)
	go p.run(ctx)
	p.wg.Wait()
}

type poller struct {
	client SQSAPI
	src    SQSSource
	h      lambda.Handler
	log    *slog.Logger
	max    int32
	// lease and visibility (seconds): a receive hides for lease, extended
	// to visibility once in hand; lease 0: no lease, the queue's own.
	lease, visibility int32
	active            atomic.Int32 // pollers running
	// busy: pollers invoking the function. While fewer than max are busy one
	// more keeps receiving, as Lambda's pollers go on polling while an
	// invocation runs: a message sent meanwhile starts at once (up to
	// MaximumConcurrency) instead of waiting for a running invocation.
	busy atomic.Int32
	wg   sync.WaitGroup
}

// scaleUp starts one more poller unless max are running.
func (p *poller) scaleUp(ctx context.Context) {
	for {
		n := p.active.Load()
		if n >= p.max {
			return
		}
		if p.active.CompareAndSwap(n, n+1) {
			p.wg.Add(1) // the caller is counted: Wait cannot have returned
			go p.run(ctx)
			return
		}
	}
}

// retire stops the calling poller unless it is the last one receiving.
func (p *poller) retire() bool {
	for {
		n := p.active.Load()
		if n <= 1 || n-p.busy.Load() <= 1 {
			return false
		}
		if p.active.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (p *poller) run(ctx context.Context) {
	defer p.wg.Done()
	src := p.src
	const wait = 1 // s: a long poll, as Lambda's event source mapping makes
	for ctx.Err() == nil {
		// Not cancelled with ctx: a receive abandoned mid-flight would leave
		// the messages SQS handed out hidden for the visibility timeout.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(wait)*time.Second+settleTimeout)
		out, err := p.client.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &src.Queue.URL,
			MaxNumberOfMessages:         src.BatchSize,
			WaitTimeSeconds:             wait,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
			VisibilityTimeout:           p.lease,
		})
		cancel()
		if err == nil && ctx.Err() != nil {
			p.release(ctx, out.Messages)
			break
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("sqs receive failed", "queue", src.Queue.Name, "error", err.Error())
				sleep(ctx, 500*time.Millisecond)
			}
			continue
		}
		if len(out.Messages) == 0 {
			if p.retire() {
				return
			}
			continue
		}
		busy := p.busy.Add(1)
		if len(out.Messages) == int(src.BatchSize) || p.active.Load()-busy <= 0 {
			p.scaleUp(ctx) // a full batch (more may be waiting), or nobody left receiving
		}
		p.extend(ctx, out.Messages)
		p.handle(ctx, out.Messages)
		p.busy.Add(-1)
	}
	p.active.Add(-1)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// handle invokes the function with one batch and deletes what succeeded.
func (p *poller) handle(ctx context.Context, msgs []sqstypes.Message) {
	src := p.src
	ev := events.SQSEvent{}
	for _, m := range msgs {
		rec := events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSourceARN: src.Queue.ARN, EventSource: "aws:sqs", AWSRegion: arnRegion(src.Queue.ARN),
		}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
		ev.Records = append(ev.Records, rec)
	}
	var resp events.SQSEventResponse
	if err := Invoke(ctx, p.h, src.FunctionID, src.Timeout, ev, &resp); err != nil {
		if ctx.Err() != nil {
			p.release(ctx, msgs) // cut short by the shutdown, not failed
			return
		}
		p.log.Warn("sqs handler failed; batch will be retried", "function", src.FunctionID, "error", err.Error())
		return
	}
	failed := map[string]bool{}
	if src.ReportBatchItemFailures {
		for _, f := range resp.BatchItemFailures {
			if !slices.ContainsFunc(msgs, func(m sqstypes.Message) bool { return aws.ToString(m.MessageId) == f.ItemIdentifier }) {
				// Lambda treats an empty or unknown identifier as the
				// failure of the whole batch.
				p.log.Warn("batchItemFailures names an unknown message; the whole batch will be retried", "function", src.FunctionID)
				return
			}
			failed[f.ItemIdentifier] = true
		}
	}
	var (
		entries []sqstypes.DeleteMessageBatchRequestEntry
		retry   []sqstypes.Message
	)
	for i, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		} else {
			retry = append(retry, m)
		}
	}
	if ctx.Err() != nil {
		// The item failures of an invocation the shutdown cut short are
		// mostly its cancelled calls: they are tried again at once, after a
		// restart, not in 5 minutes.
		p.release(ctx, retry)
	}
	if len(entries) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	out, err := p.client.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: &src.Queue.URL, Entries: entries})
	if err != nil {
		p.log.Warn("sqs delete failed; the batch will be received again", "queue", src.Queue.Name, "error", err.Error())
		return
	}
	for _, f := range out.Failed {
		p.log.Warn("sqs delete of one message failed; it will be received again", "queue", src.Queue.Name,
			"code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
	}
}

// leaseFor is the receive lease and the queue's visibility timeout, in
// seconds; no lease (0, 0) when the timeout is unknown or not longer than
// the lease.
func leaseFor(ctx context.Context, client SQSAPI, src SQSSource, log *slog.Logger) (lease, visibility int32) {
	l := src.ReceiveLease
	if l <= 0 {
		l = DefaultReceiveLease
	}
	actx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	out, err := client.GetQueueAttributes(actx, &sqs.GetQueueAttributesInput{QueueUrl: &src.Queue.URL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		log.Warn("sqs visibility timeout unknown; receives use it without a lease", "queue", src.Queue.Name, "error", err.Error())
		return 0, 0
	}
	v, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	if err != nil || time.Duration(v)*time.Second <= l {
		return 0, 0
	}
	return int32(max(1, l/time.Second)), int32(v)
}

// extend gives received messages the queue's visibility timeout, counted
// from now (one ChangeMessageVisibilityBatch per receive). Should it fail,
// a message may come back after the lease while still being handled: a
// duplicate, never a loss.
func (p *poller) extend(ctx context.Context, msgs []sqstypes.Message) {
	if p.lease == 0 || len(msgs) == 0 {
		return
	}
	var entries []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range msgs {
		entries = append(entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
			ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: p.visibility})
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	out, err := p.client.ChangeMessageVisibilityBatch(ectx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &p.src.Queue.URL, Entries: entries})
	if err != nil {
		p.log.Warn("sqs visibility extension failed; the batch may be received twice", "queue", p.src.Queue.Name, "error", err.Error())
		return
	}
	for _, f := range out.Failed {
		p.log.Warn("sqs visibility extension of one message failed; it may be received twice", "queue", p.src.Queue.Name,
			"code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
	}
}

// release makes msgs visible again at once (ChangeMessageVisibilityBatch to
// 0), on a context of its own since ctx may have ended: messages in hand
// when a poller stops are received again at the next poll, not after the
// visibility timeout.
func (p *poller) release(ctx context.Context, msgs []sqstypes.Message) {
	if len(msgs) == 0 {
		return
	}
	var entries []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range msgs {
		entries = append(entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
			ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	out, err := p.client.ChangeMessageVisibilityBatch(rctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &p.src.Queue.URL, Entries: entries})
	if err != nil {
		p.log.Warn("sqs release of in-hand messages failed; they return after the visibility timeout", "queue", p.src.Queue.Name,
			"messages", len(msgs), "error", err.Error())
		return
	}
	for _, f := range out.Failed {
		p.log.Warn("sqs release of one message failed; it returns after the visibility timeout", "queue", p.src.Queue.Name,
			"code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
	}
}

// arnRegion is the region field of an ARN (the stack's region may be any).
func arnRegion(arn string) string {
	if p := strings.SplitN(arn, ":", 5); len(p) == 5 && p[3] != "" {
		return p[3]
	}
	return Region
}
