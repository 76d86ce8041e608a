// Package reconcilerwire builds ReconcilerFunction, the scheduled repair:
// notifications left in the outbox, open payments (recovered through the
// provider), and the invariant audit.
package reconcilerwire

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/notifier"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// ReconcilerLambda is ReconcilerFunction's Lambda handler (EventBridge schedule).
func ReconcilerLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.ScheduledLambda, error) {
	run, err := Reconciler(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, _ events.EventBridgeEvent) error { return run(ctx) }, nil
}

// auditEveryMinutes spaces the reconciler's invariant audits.
const auditEveryMinutes = 15

// Reconciler wires ReconcilerFunction.
func Reconciler(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ func(context.Context) error, err error) {
	defer wire.Annotate(&err, "reconciler")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
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
	svc, err := paywire.Service(b, getenv, "reconciler")
	if err != nil {
		return nil, err
	}
	r := &notifier.Reconciler{Store: b.Store, Queue: queue.New(sqs.NewFromConfig(b.AWS)), Recover: svc.RecoverOpen,
		QueueURL: getenv("NOTIFICATIONS_QUEUE_URL"), BatchQueueURL: getenv("BATCH_NOTIFICATIONS_QUEUE_URL"),
		Grace: grace, MaxInFlight: maxInFlight[0], BatchMaxInFlight: maxInFlight[1],
		Log: b.Logger("reconciler")}
	log := b.Logger("reconciler")
	return func(ctx context.Context) error {
		_, err := r.Run(ctx)
		if now := time.Now(); now.Minute()%auditEveryMinutes == 0 {
			// The invariant audit scans whole tables: every 15th minute of
			// the clock, after the repairs, so it judges what they left.
			rep, aerr := audit.Run(ctx, b.Store, now, b.Cfg.Sandbox())
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
