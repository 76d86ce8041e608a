// Package queue sends JSON messages to SQS queues. Messages carry ids and
// states only: never card data or secrets (DESIGN §6, §7).
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
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
