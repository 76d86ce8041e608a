// Package queue sends JSON messages to SQS queues. Messages carry ids and
// states only: never card data or secrets.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// MaxDelay is the longest delay SQS allows for one message.
const MaxDelay = 15 * time.Minute

// API is the subset of the SQS client used.
type API interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Client sends messages.
type Client struct{ api API }

// New returns a Client over api.
func New(api API) *Client { return &Client{api: api} }

// DelaySeconds is the SQS delay for d: whole seconds, rounded down (the
// consumer waits out the remainder itself), capped at MaxDelay.
func DelaySeconds(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	if d > MaxDelay {
		d = MaxDelay
	}
	return int32(d / time.Second)
}

// Send JSON-encodes body and sends it to queueURL, delivered after delay
// (rounded down to whole seconds, at most MaxDelay).
func (c *Client) Send(ctx context.Context, queueURL string, body any, delay time.Duration) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	_, err = c.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(queueURL),
		MessageBody:  aws.String(string(b)),
		DelaySeconds: DelaySeconds(delay),
	})
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	return nil
}

// AttributesAPI is the SQS call Backlog uses (*sqs.Client has it).
type AttributesAPI interface {
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Backlog is what a queue holds, by SQS's approximate counters.
type Backlog struct {
	Visible  int64 // waiting to be received
	InFlight int64 // received, not yet deleted (being processed, or failed and waiting out the visibility timeout)
	Delayed  int64 // sent with a delay that has not passed
}

// Holds reports whether the queue holds a message that was sent without a
// delay and not yet deleted: one waiting or one being processed. Delayed
// messages are not counted: a first send is never delayed (only retries are).
func (b Backlog) Holds() bool { return b.Visible > 0 || b.InFlight > 0 }

// Backlog reads queueURL's counters (one GetQueueAttributes call). The API
// given to New must implement AttributesAPI.
func (c *Client) Backlog(ctx context.Context, queueURL string) (Backlog, error) {
	api, ok := c.api.(AttributesAPI)
	if !ok {
		return Backlog{}, fmt.Errorf("queue: %T cannot read queue attributes", c.api)
	}
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return Backlog{}, fmt.Errorf("read attributes of queue %s: %w", queueURL, err)
	}
	var b Backlog
	for name, dst := range map[sqstypes.QueueAttributeName]*int64{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages:           &b.Visible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible: &b.InFlight,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed:    &b.Delayed,
	} {
		v, ok := out.Attributes[string(name)]
		if !ok {
			return Backlog{}, fmt.Errorf("queue %s: attribute %s missing", queueURL, name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Backlog{}, fmt.Errorf("queue %s: attribute %s = %q", queueURL, name, v)
		}
		*dst = n
	}
	return b, nil
}

// Holding is what queueURL holds that was sent without a delay: messages
// waiting to be received, and received but not yet deleted (Backlog's
// Visible and InFlight).
func (c *Client) Holding(ctx context.Context, queueURL string) (waiting, inFlight int64, err error) {
	b, err := c.Backlog(ctx, queueURL)
	return b.Visible, b.InFlight, err
}

// RedriveAPI is the SQS subset Redrive uses (*sqs.Client has it).
type RedriveAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Redrive moves the messages of dead-letter queue dlqURL back to queueURL,
// each with the body rewrite gives it; a message rewrite refuses (false)
// stays in the DLQ, counted as skipped. A message is deleted from the DLQ
// only after it was sent, so a failure midway loses nothing (at worst one
// message is sent twice). The API given to New must implement RedriveAPI.
func (c *Client) Redrive(ctx context.Context, dlqURL, queueURL string, rewrite func(body []byte) ([]byte, bool)) (moved, skipped int, err error) {
	api, ok := c.api.(RedriveAPI)
	if !ok {
		return 0, 0, fmt.Errorf("queue: %T cannot redrive", c.api)
	}
	seen := map[string]bool{}
	for {
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 0, VisibilityTimeout: 60})
		if err != nil {
			return moved, skipped, fmt.Errorf("receive from DLQ: %w", err)
		}
		if len(out.Messages) == 0 {
			return moved, skipped, nil
		}
		progress := false
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id] = true
			progress = true
			body, ok := rewrite([]byte(aws.ToString(m.Body)))
			if !ok {
				skipped++
				continue
			}
			if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(string(body))}); err != nil {
				return moved, skipped, fmt.Errorf("send message %s: %w", id, err)
			}
			if _, err := api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &dlqURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				return moved, skipped, fmt.Errorf("delete message %s from DLQ: %w", id, err)
			}
			moved++
		}
		if !progress {
			return moved, skipped, nil
		}
	}
}

// VisibilityAPI is the SQS call ChangeVisibility uses (*sqs.Client has it).
type VisibilityAPI interface {
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// ChangeVisibility makes a received message visible again after d (whole
// seconds) instead of the queue's visibility timeout. The API given to New
// must implement VisibilityAPI.
func (c *Client) ChangeVisibility(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error {
	api, ok := c.api.(VisibilityAPI)
	if !ok {
		return fmt.Errorf("queue: %T cannot change visibility", c.api)
	}
	_, err := api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL),
		ReceiptHandle: aws.String(receiptHandle), VisibilityTimeout: int32(max(0, d/time.Second))})
	if err != nil {
		return fmt.Errorf("change visibility in queue %s: %w", queueURL, err)
	}
	return nil
}
