package dashboardwire

import (
	"context"
	"time"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
)

// dashOverview reads the dashboard's aggregates from the store.
type dashOverview struct{ store *dynamo.Store }

func (o dashOverview) Buckets(ctx context.Context, merchantID string, from, to time.Time, hourly bool) ([]payment.OverviewBucket, error) {
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

// Disputes lists the merchant's disputes (the overview's open ones).
func (o dashOverview) Disputes(ctx context.Context, merchantID string, now time.Time) ([]payment.DisputeEntry, error) {
	return o.store.Disputes(ctx, merchantID, now)
}
