package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/payment"
)

// RedriveAPI is the SQS subset Redrive uses.
type RedriveAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Redrive moves the dead-letter queue's notifications back to the queue with
// a fresh retry schedule (after the merchant fixed its endpoint). A message
// is deleted from the DLQ only after it was sent, so a failure midway loses
// nothing (at worst one notification is sent twice; receivers dedupe on
// webhook-id). Unreadable messages stay in the DLQ.
func Redrive(ctx context.Context, api RedriveAPI, dlqURL, queueURL string) (moved, skipped int, err error) {
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
			var ev payment.NotifyEvent
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &ev) != nil || ev.EventID == "" {
				skipped++
				continue
			}
			ev.Attempts, ev.DueAt, ev.Resent = 0, time.Time{}, true
			body, _ := json.Marshal(ev)
			if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(string(body))}); err != nil {
				return moved, skipped, fmt.Errorf("send event %s: %w", ev.EventID, err)
			}
			if _, err := api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &dlqURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				return moved, skipped, fmt.Errorf("delete event %s from DLQ: %w", ev.EventID, err)
			}
			moved++
		}
		if !progress {
			return moved, skipped, nil
		}
	}
}

// ErrNotSettled: the request has no settled transaction whose notification
// could be sent again.
var ErrNotSettled = errors.New("no settled transaction to notify")

// Redeliver queues a request's latest settled event again, for payctl
// deliveries redeliver and the dashboard: the same webhook-id, so receivers
// that processed it can ignore it, with a fresh retry schedule.
func Redeliver(ctx context.Context, q Queue, queueURL string, r *payment.Request, now time.Time) (eventID string, err error) {
	if r.TransactionID == 0 || r.TransactionStatus == nil || r.LastLog == nil {
		return "", ErrNotSettled
	}
	ev, err := payment.NewNotifyEvent(r, r.TransactionID, *r.TransactionStatus, *r.LastLog, now)
	if err != nil {
		return "", err
	}
	ev.Resent = true
	if err := q.Send(ctx, queueURL, ev, 0); err != nil {
		return "", err
	}
	return ev.EventID, nil
}
