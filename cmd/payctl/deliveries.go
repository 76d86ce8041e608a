package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/queue"
)

// deliveriesCmd: `deliveries list --request ID` and `deliveries redeliver --request ID`.
func deliveriesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "deliveries",
		Short: "List a request's notification attempts; send its notification again",
		Example: `  payctl --local deliveries list --request 244259802686839
  payctl --local deliveries redeliver --request 244259802686839`,
	}
	var reqID string
	list := &cobra.Command{
		Use:     "list --request ID",
		Short:   "List every notification attempt of a payment request: time, status, latency, error, outcome",
		Example: "  payctl --local deliveries list --request 244259802686839",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			id, err := requestID(reqID)
			if err != nil {
				return nil, err
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			d, err := e.store.Deliveries(ctx, id, time.Now())
			if err != nil {
				return nil, err
			}
			if d == nil {
				d = []payment.DeliveryAttempt{}
			}
			return map[string]any{"requestId": id, "attempts": d}, nil
		}),
	}
	list.Flags().StringVar(&reqID, "request", "", "payment request id")
	redeliver := &cobra.Command{
		Use:     "redeliver --request ID",
		Short:   "Send the latest settled event of a request again (same webhook-id, fresh schedule)",
		Example: "  payctl --local deliveries redeliver --request 244259802686839",
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			id, err := requestID(reqID)
			if err != nil {
				return nil, err
			}
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			req, err := e.store.PaymentRequest(ctx, id)
			if errkind.Is(err, errkind.NotFound) {
				return nil, fmt.Errorf("payment request %d not found", id)
			}
			if err != nil {
				return nil, err
			}
			eventID, err := notifier.Redeliver(ctx, queue.New(sqs.NewFromConfig(e.cfg)), e.notificationsQueue, req, time.Now())
			if err != nil {
				return nil, fmt.Errorf("payment request %d: %w", id, err)
			}
			return map[string]any{"requestId": id, "eventId": eventID, "queued": true}, nil
		}),
	}
	redeliver.Flags().StringVar(&reqID, "request", "", "payment request id")
	c.AddCommand(list, redeliver)
	return c
}

func requestID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError("--request must be a payment request id")
	}
	return id, nil
}

// dlqCmd: `dlq redrive [--queue all|interactive|batch] [--dry-run]` moves
// exhausted notifications back to their queue.
func dlqCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "Dead-lettered notifications: list them, send them back",
		Example: `  payctl --local dlq redrive --dry-run
  payctl --local dlq redrive`,
	}
	var dryRun bool
	var which string
	redrive := &cobra.Command{
		Use:   "redrive [--queue all|interactive|batch] [--dry-run]",
		Short: "Move every dead-lettered notification back to its queue (fresh schedule)",
		Long: `redrive moves every notification of the dead-letter queues back to its
notifications queue with a fresh retry schedule (same webhook-id). There are
two: interactive payments' (API, hosted page, callbacks) and batch rows';
--queue picks one, default both.

--dry-run lists what would be moved (event, request, transaction, status,
attempts) and moves nothing: the messages stay in the dead-letter queue.`,
		Example: `  payctl --local dlq redrive --dry-run
  payctl --local dlq redrive --queue batch
  payctl --stack payreq-sandbox dlq redrive`,
		RunE: jsonCommand(func(ctx context.Context) (any, error) {
			type pair struct{ name, dlq, queue string }
			e, err := connect(ctx, *g)
			if err != nil {
				return nil, err
			}
			all := []pair{{"interactive", e.notificationsDLQ, e.notificationsQueue}, {"batch", e.batchNotificationsDLQ, e.batchNotificationsQueue}}
			var pairs []pair
			for _, p := range all {
				if which == "all" || which == p.name {
					pairs = append(pairs, p)
				}
			}
			if len(pairs) == 0 {
				return nil, usageError(fmt.Sprintf("--queue %q: want all, interactive or batch", which))
			}
			api := sqs.NewFromConfig(e.cfg)
			out := map[string]any{}
			for _, p := range pairs {
				if p.dlq == "" || p.queue == "" {
					return nil, fmt.Errorf("the stack has no %s notifications queue and DLQ", p.name)
				}
				if dryRun {
					events, unreadable, err := peekDLQ(ctx, api, p.dlq)
					if err != nil {
						return nil, err
					}
					out[p.name] = map[string]any{"dryRun": true, "wouldMove": len(events), "events": events, "leftUnreadable": unreadable}
					continue
				}
				moved, skipped, err := notifier.Redrive(ctx, queue.New(api), p.dlq, p.queue)
				if err != nil {
					return nil, err
				}
				out[p.name] = map[string]any{"moved": moved, "leftUnreadable": skipped}
			}
			return out, nil
		}),
	}
	redrive.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be redriven; move nothing")
	redrive.Flags().StringVar(&which, "queue", "all", "which dead-letter queue: all, interactive or batch")
	c.AddCommand(redrive)
	return c
}
