package payment

import (
	"time"

	"github.com/shopspring/decimal"
)

// OverviewBucket is one hour or one UTC day of one currency's settled
// payments of a merchant: the aggregates the dashboard's overview reads
// instead of the payments.
type OverviewBucket struct {
	Start        time.Time // UTC hour or day
	Hourly       bool
	Unit         string
	Approved     int64
	Declined     int64
	Volume       decimal.Decimal
	Refunds      int64
	RefundVolume decimal.Decimal
	Declines     map[string]int64          // spec code -> declined attempts
	Methods      map[string]OverviewMethod // method -> approved attempts
	// Connectors are the settled attempts by the connector that charged
	// them (transactions that record one).
	Connectors map[string]OverviewConnector
}

// OverviewConnector is one connector's part of a bucket.
type OverviewConnector struct {
	Approved int64
	Declined int64
	Volume   decimal.Decimal // approved amount
}

// OverviewMethod is the approved part of one payment method.
type OverviewMethod struct {
	Count  int64
	Volume decimal.Decimal
}
