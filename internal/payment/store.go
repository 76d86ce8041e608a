package payment

import (
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

// The payment store's contract, in domain terms: what the core
// (internal/paycore) asks of storage and what storage answers. The
// DynamoDB store implements it; its names (dynamo.Lease, …) are aliases.

// OpenShards is the number of shards open attempts are spread over, so
// the reconciler finds every attempt a crash left mid-way with one query
// per shard.
const OpenShards = 8

// AttemptLease is the attempt lease on a payment request: the transaction
// that may currently charge it, and until when.
type AttemptLease struct {
	TransactionID int64 `dynamodbav:"attemptTx"`
	Until         int64 `dynamodbav:"leaseUntil"` // unix ms
}

// Active reports whether the lease still blocks other attempts at now.
func (l AttemptLease) Active(now time.Time) bool {
	return l.TransactionID != 0 && l.Until >= now.UnixMilli()
}

// Lease asks for the attempt lease of a payment request.
type Lease struct {
	RequestID     int64
	MerchantID    string
	TransactionID int64
	Now, Until    time.Time
	// Amount and Unit, when set, must equal the request's.
	Amount *decimal.Decimal
	Unit   string
}

// AttemptCommit records the result of the attempt holding a request's lease.
type AttemptCommit struct {
	RequestID         int64
	TransactionID     int64
	TransactionNumber string            // kept when empty
	Status            TransactionStatus // 1, 2 or 3
	Code              codes.Code
	Message           string
	Now               time.Time
	// LeaseUntil extends the lease of a pending attempt (Status 3).
	LeaseUntil time.Time
}

// Pending moves a waiting transaction to pending (status 3) with what the
// payer must do next.
type Pending struct {
	TransactionID int64
	Message       string
	ProviderRef   string // written once: kept when one is stored
	NextAction    *TxNextAction
	ThreeDS       string
	PendingUntil  time.Time
	RecoverAfter  time.Time
	Now           time.Time
}

// Failover moves a waiting transaction from connector From (as recorded:
// "" on a record written before connectors were recorded) to connector To,
// after From did not process its charge; FailedOver is the transaction's
// list of connectors that did not, From appended.
type Failover struct {
	TransactionID int64
	From, To      string
	FailedOver    []string
	Now           time.Time
}

// Settlement moves an open (waiting or pending) transaction to its final
// state and puts its merchant notification in the outbox, in one write.
type Settlement struct {
	TransactionID int64
	Status        TransactionStatus // TxApproved or TxDeclined
	Code          codes.Code
	Message       string
	ProviderRef   string // written once: kept when empty, and when one is stored
	ThreeDS       string // kept when empty
	// Event is the notification of this final state (outbox entry).
	Event NotifyEvent
	Now   time.Time
}

// LimitCaps are the limits a reservation must stay within; zero or nil means
// no limit on that counter.
type LimitCaps struct {
	DailyCount    int64
	MonthlyCount  int64
	DailyAmount   *decimal.Decimal
	MonthlyAmount *decimal.Decimal
}

// Any reports whether any counter is limited.
func (c LimitCaps) Any() bool {
	return c.DailyCount > 0 || c.MonthlyCount > 0 || c.DailyAmount != nil || c.MonthlyAmount != nil
}

// LimitUsage is what a merchant's counters hold for one day and month.
type LimitUsage struct {
	DailyCount    int64
	MonthlyCount  int64
	DailyAmount   decimal.Decimal
	MonthlyAmount decimal.Decimal
}

// LimitWindow names the counters of one attempt.
type LimitWindow struct {
	MerchantID string
	Month      string // YYYY-MM, UTC
	Day        string // DD, UTC
	Unit       string
}

// WindowAt returns the UTC month and day of t.
func WindowAt(merchantID, unit string, t time.Time) LimitWindow {
	t = t.UTC()
	return LimitWindow{MerchantID: merchantID, Month: t.Format("2006-01"), Day: t.Format("02"), Unit: unit}
}
