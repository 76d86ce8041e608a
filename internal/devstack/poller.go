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
	// ShortPoll, when set, replaces the 1 s long poll by a receive without
	// wait every ShortPoll. moto's long poll does not return a delayed (or
	// visibility-expired) message that becomes available during the wait,
	// only at the next poll; SQS returns it as soon as it is available.
	ShortPoll time.Duration
	Timeout   time.Duration // the function's template Timeout
}

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
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// PollSQS does what the Lambda event source mapping does, until ctx ends:
//
//   - pollers long-poll the queue (its visibility timeout is the template's:
//     receives do not override it) and hand each batch to the function's
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
// receives, exactly as on AWS.
func PollSQS(ctx context.Context, client SQSAPI, src SQSSource, h lambda.Handler, log *slog.Logger) {
	p := &poller{client: client, src: src, h: h, log: log, max: int32(max(1, src.MaxConcurrency))}
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
	active atomic.Int32 // pollers running
	wg     sync.WaitGroup
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

// retire stops the calling poller unless it is the last one.
func (p *poller) retire() bool {
	for {
		n := p.active.Load()
		if n <= 1 {
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
	wait := int32(1)
	if src.ShortPoll > 0 {
		wait = 0
	}
	for ctx.Err() == nil {
		out, err := p.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &src.Queue.URL,
			MaxNumberOfMessages:         src.BatchSize,
			WaitTimeSeconds:             wait,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
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
			if src.ShortPoll > 0 {
				sleep(ctx, src.ShortPoll)
			}
			continue
		}
		if len(out.Messages) == int(src.BatchSize) {
			p.scaleUp(ctx) // a full batch: more may be waiting
		}
		p.handle(ctx, out.Messages)
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
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(entries) == 0 {
		return
	}
	out, err := p.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &src.Queue.URL, Entries: entries})
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("sqs delete failed; the batch will be received again", "queue", src.Queue.Name, "error", err.Error())
		}
		return
	}
	for _, f := range out.Failed {
		p.log.Warn("sqs delete of one message failed; it will be received again", "queue", src.Queue.Name,
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
