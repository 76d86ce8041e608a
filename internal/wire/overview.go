package wire

import (
	"context"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dynamo"
)

// dashOverview reads the dashboard's aggregates from the store.
type dashOverview struct{ store *dynamo.Store }

func (o dashOverview) Buckets(ctx context.Context, merchantID string, from, to time.Time, hourly bool) ([]dashboard.Bucket, error) {
	bs, err := o.store.Overview(ctx, merchantID, from, to, hourly)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Bucket, len(bs))
	for i, b := range bs {
		methods := make(map[string]dashboard.MethodPart, len(b.Methods))
		for m, p := range b.Methods {
			methods[m] = dashboard.MethodPart{Count: p.Count, Volume: p.Volume}
		}
		out[i] = dashboard.Bucket{Start: b.Start, Unit: b.Unit, Approved: b.Approved, Declined: b.Declined, Volume: b.Volume,
			Refunds: b.Refunds, RefundVolume: b.RefundVolume, Declines: b.Declines, Methods: methods}
	}
	return out, nil
}

func (o dashOverview) NotificationProblems(ctx context.Context, merchantID string) (failing, dlq int, err error) {
	ps, err := o.store.NotificationProblems(ctx, merchantID)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range ps {
		if p.State == dynamo.NotifyDLQ {
			dlq++
		} else {
			failing++
		}
	}
	return failing, dlq, nil
}
