package wire

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/notify"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/safehttp"
)

// Notifier wires NotifierFunction.
func Notifier(ctx context.Context, getenv config.Getenv, opts Options) (SQSHandler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire notifier: %w", err)
	}
	schedule := notify.DefaultSchedule
	if v := getenv("NOTIFY_RETRY_SCHEDULE"); v != "" {
		if schedule, err = notify.ParseSchedule(v); err != nil {
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
		Store: b.store, Queue: queue.New(sqs.NewFromConfig(b.aws)), Sealer: b.sealer,
		// Loopback and private targets are refused at dial time, except on the
		// local stack where merchants test with receivers on 127.0.0.1.
		Sender: notify.Sender{Client: safehttp.NewClient(safehttp.Options{
			Timeout: timeout, AllowPrivate: b.cfg.Local, RequireHTTPS: !b.cfg.Sandbox()})},
		QueueURL: queueURL, DLQURL: dlqURL, Schedule: schedule,
		BatchQueueURL: getenv("BATCH_NOTIFICATIONS_QUEUE_URL"), BatchDLQURL: getenv("BATCH_NOTIFICATIONS_DLQ_URL"),
		Log: b.cfg.NewLogger().With("function", "notifier"),
		// The dashboard's overview is kept here, after the payment's answer.
		Overview: b.store,
	}
	return n.Handle, nil
}

// auditEveryMinutes spaces the reconciler's invariant audits.
const auditEveryMinutes = 15

// Reconciler wires ReconcilerFunction.
func Reconciler(ctx context.Context, getenv config.Getenv, opts Options) (func(context.Context) error, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire reconciler: %w", err)
	}
	grace := time.Minute
	if v := getenv("OUTBOX_GRACE"); v != "" {
		if grace, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("OUTBOX_GRACE: %w", err)
		}
	}
	var maxInFlight [2]time.Duration
	for i, name := range []string{"OUTBOX_MAX_IN_FLIGHT", "BATCH_OUTBOX_MAX_IN_FLIGHT"} {
		if v := getenv(name); v != "" {
			if maxInFlight[i], err = time.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	svc, err := b.paymentService(getenv, "reconciler")
	if err != nil {
		return nil, fmt.Errorf("wire reconciler: %w", err)
	}
	r := &notifier.Reconciler{Store: b.store, Queue: queue.New(sqs.NewFromConfig(b.aws)), Recover: svc.RecoverOpen,
		QueueURL: getenv("NOTIFICATIONS_QUEUE_URL"), BatchQueueURL: getenv("BATCH_NOTIFICATIONS_QUEUE_URL"),
		Grace: grace, MaxInFlight: maxInFlight[0], BatchMaxInFlight: maxInFlight[1],
		Log: b.cfg.NewLogger().With("function", "reconciler")}
	log := b.cfg.NewLogger().With("function", "reconciler")
	return func(ctx context.Context) error {
		_, err := r.Run(ctx)
		if now := time.Now(); now.Minute()%auditEveryMinutes == 0 {
			// The invariant audit scans whole tables: every 15th minute of
			// the clock, after the repairs, so it judges what they left.
			rep, aerr := audit.Run(ctx, b.store, now)
			if aerr != nil {
				log.Error("audit failed", "error", aerr.Error())
			} else {
				// One line on stdout in the embedded metric format: CloudWatch
				// turns it into PayReq/AuditViolations (alarmed in the template).
				_ = audit.PublishMetric(os.Stdout, rep)
			}
		}
		return err
	}, nil
}
