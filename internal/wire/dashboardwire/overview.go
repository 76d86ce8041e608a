package dashboardwire

import (
	"context"
	"github.com/payreq/payreq/internal/payment"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dynamo"
)

// dashOverview reads the dashboard's aggregates from the store.
type dashOverview struct{ store *dynamo.Store }

func (o dashOverview) Buckets(ctx context.Context, merchantID string, from, to time.Time, hourly bool) ([]dashboard.Bucket, error) {
	return o.store.Overview(ctx, merchantID, from, to, hourly)
}

func (o dashOverview) NotificationProblems(ctx context.Context, merchantID string) (failing, dlq int, err error) {
	ps, err := o.store.NotificationProblems(ctx, merchantID)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range ps {
		if p.State == payment.NotifyDLQ {
			dlq++
		} else {
			failing++
		}
	}
	return failing, dlq, nil
}
