// Package notifierwire builds NotifierFunction: merchant notifications from
// the notifications queue. It needs no provider and no payments core.
package notifierwire

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/safehttp"
	"github.com/payreq/payreq/internal/webhook"
	"github.com/payreq/payreq/internal/wire"
)

// NotifierLambda is NotifierFunction's Lambda handler (SQS, partial batch responses).
func NotifierLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.SQSHandler, error) {
	return Notifier(ctx, getenv, opts)
}

// Notifier wires NotifierFunction.
func Notifier(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.SQSHandler, error) {
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire notifier: %w", err)
	}
	schedule := webhook.DefaultSchedule
	if v := getenv("NOTIFY_RETRY_SCHEDULE"); v != "" {
		if schedule, err = webhook.ParseSchedule(v); err != nil {
			return nil, fmt.Errorf("NOTIFY_RETRY_SCHEDULE: %w", err)
		}
	}
	timeout := safehttp.DefaultTimeout
	if v := getenv("NOTIFY_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("NOTIFY_TIMEOUT: %w", err)
		}
	}
	queueURL, dlqURL := getenv("NOTIFICATIONS_QUEUE_URL"), getenv("NOTIFICATIONS_DLQ_URL")
	if queueURL == "" || dlqURL == "" {
		return nil, fmt.Errorf("wire notifier: NOTIFICATIONS_QUEUE_URL and NOTIFICATIONS_DLQ_URL are required")
	}
	n := &notifier.Notifier{
		Store: b.Store, Queue: queue.New(sqs.NewFromConfig(b.AWS)), Sealer: b.Sealer,
		// Loopback and private targets are refused at dial time, except on the
		// local stack where merchants test with receivers on 127.0.0.1.
		Sender: webhook.Sender{Client: safehttp.NewClient(safehttp.Options{
			Timeout: timeout, AllowPrivate: b.Cfg.Local, RequireHTTPS: !b.Cfg.Sandbox()})},
		QueueURL: queueURL, DLQURL: dlqURL, Schedule: schedule,
		BatchQueueURL: getenv("BATCH_NOTIFICATIONS_QUEUE_URL"), BatchDLQURL: getenv("BATCH_NOTIFICATIONS_DLQ_URL"),
		Log: b.Logger("notifier"),
		// The dashboard's overview is kept here, after the payment's answer.
		Overview: b.Store,
	}
	return n.Handle, nil
}
