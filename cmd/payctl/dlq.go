package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/payment"
)

// dlqEvent is one dead-lettered notification as --dry-run lists it.
type dlqEvent struct {
	EventID             string    `json:"eventId"`
	RequestID           int64     `json:"requestId"`
	TransactionID       int64     `json:"transactionId"`
	TransactionStatusID int       `json:"transactionStatusId"`
	Attempts            int       `json:"attempts"`
	OccurredAt          time.Time `json:"occurredAt"`
}

// dlqPeekAPI is the part of SQS peekDLQ uses.
type dlqPeekAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// peekDLQ lists the dead-letter queue without moving or deleting anything.
// SQS has no peek: each message is received (hidden for a minute, so the
// listing reaches the next ones) and made visible again at the end, also
// when the listing fails half-way.
func peekDLQ(ctx context.Context, api dlqPeekAPI, dlqURL string) (events []dlqEvent, unreadable int, err error) {
	events = []dlqEvent{}
	var handles []string
	defer func() {
		// Even when ctx has ended: the messages must not stay hidden.
		rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, h := range handles {
			_, verr := api.ChangeMessageVisibility(rctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &dlqURL, ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
			if verr != nil && err == nil {
				err = fmt.Errorf("make a dead-lettered message visible again: %w", verr)
			}
		}
	}()
	seen := map[string]bool{}
	for {
		out, rerr := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 60})
		if rerr != nil {
			return events, unreadable, fmt.Errorf("receive from DLQ: %w", rerr)
		}
		progress := false
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id], progress = true, true
			var ev payment.NotifyEvent
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &ev) != nil || ev.EventID == "" {
				unreadable++
				continue
			}
			events = append(events, dlqEvent{EventID: ev.EventID, RequestID: ev.RequestID, TransactionID: ev.TransactionID,
				TransactionStatusID: int(ev.TransactionStatusID), Attempts: ev.Attempts, OccurredAt: ev.OccurredAt})
		}
		if !progress {
			return events, unreadable, nil
		}
	}
}
