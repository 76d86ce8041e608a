package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
)

// deliveriesCmd: `deliveries list --request ID` and `deliveries redeliver --request ID`.
func deliveriesCmd(ctx context.Context, g globals, sub string, args []string, stderr io.Writer) (any, error) {
	fs := flag.NewFlagSet("deliveries "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	reqID := fs.String("request", "", "payment request id")
	if err := fs.Parse(args); err != nil {
		return nil, usageError(err.Error())
	}
	id, err := strconv.ParseInt(*reqID, 10, 64)
	if err != nil || id <= 0 {
		return nil, usageError("--request must be a payment request id")
	}
	e, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	switch sub {
	case "list":
		d, err := e.store.Deliveries(ctx, id, time.Now())
		if err != nil {
			return nil, err
		}
		if d == nil {
			d = []dynamo.DeliveryAttempt{}
		}
		return map[string]any{"requestId": id, "attempts": d}, nil
	case "redeliver":
		// Rebuild the event of the request's latest settled transaction and
		// send it again with a fresh schedule (same webhook-id, so receivers
		// that already processed it can ignore it).
		req, err := e.store.PaymentRequest(ctx, id)
		if errors.Is(err, dynamo.ErrNotFound) {
			return nil, fmt.Errorf("payment request %d not found", id)
		}
		if err != nil {
			return nil, err
		}
		if req.TransactionID == 0 || req.TransactionStatus == nil || req.LastLog == nil {
			return nil, fmt.Errorf("payment request %d has no settled transaction to notify", id)
		}
		ev, err := payment.NewNotifyEvent(req, req.TransactionID, *req.TransactionStatus, *req.LastLog, time.Now())
		if err != nil {
			return nil, fmt.Errorf("payment request %d: %w", id, err)
		}
		if err := queue.New(sqs.NewFromConfig(e.cfg)).Send(ctx, e.notificationsQueue, ev, 0); err != nil {
			return nil, err
		}
		return map[string]any{"requestId": id, "eventId": ev.EventID, "queued": true}, nil
	}
	return nil, usageError(fmt.Sprintf("unknown deliveries command %q", sub))
}

// dlqCmd: `dlq redrive` moves exhausted notifications back to the queue.
func dlqCmd(ctx context.Context, g globals, sub string, _ []string) (any, error) {
	if sub != "redrive" {
		return nil, usageError(fmt.Sprintf("unknown dlq command %q", sub))
	}
	e, err := connect(ctx, g)
	if err != nil {
		return nil, err
	}
	moved, skipped, err := notifier.Redrive(ctx, sqs.NewFromConfig(e.cfg), e.notificationsDLQ, e.notificationsQueue)
	if err != nil {
		return nil, err
	}
	return map[string]any{"moved": moved, "leftUnreadable": skipped}, nil
}
