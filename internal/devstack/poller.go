package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/cfn"
)

// SQSSource is one SQS event source mapping of the template.
type SQSSource struct {
	FunctionID string
	Queue      Queue
	BatchSize  int32
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
			src := SQSSource{FunctionID: f.LogicalID, Queue: q, BatchSize: 10, Timeout: r.functionTimeout(f.LogicalID)}
			if bs := cfn.Path(ev.Properties, "BatchSize"); bs != nil {
				if n, err := strconv.Atoi(bs.Value); err == nil && n > 0 && n <= 10 {
					src.BatchSize = int32(n)
				}
			}
			out = append(out, src)
		}
	}
	return out, nil
}

// PollSQS does what the Lambda event source mapping does: long-poll the
// queue, hand batches to the function's Lambda handler as the JSON of an
// events.SQSEvent within the function's Timeout, and delete
// the messages the handler did not report as failed. Failed messages become
// visible again after their visibility timeout, and SQS moves them to the
// dead-letter queue after maxReceiveCount receives, exactly as on AWS.
func PollSQS(ctx context.Context, client *sqs.Client, src SQSSource, h lambda.Handler, log *slog.Logger) {
	wait := int32(1)
	if src.ShortPoll > 0 {
		wait = 0
	}
	for ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &src.Queue.URL,
			MaxNumberOfMessages:         src.BatchSize,
			WaitTimeSeconds:             wait,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("sqs receive failed", "queue", src.Queue.Name, "error", err.Error())
				time.Sleep(500 * time.Millisecond)
			}
			continue
		}
		if len(out.Messages) == 0 {
			if src.ShortPoll > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(src.ShortPoll):
				}
			}
			continue
		}
		ev := events.SQSEvent{}
		for _, m := range out.Messages {
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
		if err := Invoke(ctx, h, src.FunctionID, src.Timeout, ev, &resp); err != nil {
			log.Warn("sqs handler failed; batch will be retried", "function", src.FunctionID, "error", err.Error())
			continue
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				continue
			}
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &src.Queue.URL, ReceiptHandle: m.ReceiptHandle}); err != nil && ctx.Err() == nil {
				log.Warn("sqs delete failed", "queue", src.Queue.Name, "error", err.Error())
			}
		}
	}
}

// arnRegion is the region field of an ARN (the stack's region may be any).
func arnRegion(arn string) string {
	if p := strings.SplitN(arn, ":", 5); len(p) == 5 && p[3] != "" {
		return p[3]
	}
	return Region
}
