// Package reconcilerwire builds ReconcilerFunction, the scheduled repair:
// notifications left in the outbox and open payments (recovered through
// the provider). The invariant audit is AuditFunction's (auditwire).
package reconcilerwire

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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
	return func(ctx context.Context) error {
		_, err := r.Run(ctx)
		return err
	}, nil
}
