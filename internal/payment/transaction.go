package payment

import (
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
)

// Transaction is one payment attempt on a payment request: the entity the
// payment core moves through its states (internal/paycore). Its stored
// form lives in internal/dynamo. Card data is kept masked (brand, first
// six, last four) only; nothing here is secret.
//
// States: 0 waiting (written before the provider is called) → 3 pending →
// 1 approved | 2 declined, or 0 → 1 | 2 directly. A final status never
// changes again.
type Transaction struct {
	ID               int64
	Number           string // public transactionNumber
	PaymentRequestID int64
	MerchantID       string
	Status           TransactionStatus
	Code             codes.Code
	Message          string
	Method           string // provider.Method
	Selector         int
	Channel          Channel // batch rows are notified through their own queue
	Amount           decimal.Decimal
	Unit             string
	Card             *card.Masked
	Payer            *TxPayer
	UPIID            string
	ProviderRef      string
	// Connector names the acquirer connection that charges the attempt
	// (internal/connector), fixed when the record is written: every later
	// call about the transaction goes to it. "" on records written before
	// connectors were recorded (the stage's legacy connector).
	Connector string
	// FailedOver lists, in order, the connectors that did not process the
	// attempt's charge before Connector took it (failover).
	FailedOver []string
	// Reference is the write-ahead reference sent to the provider with the
	// charge (its idempotency key), fixed when the record is written:
	// ChargeReference(ID).
	Reference string
	// RecoverAfter, while the attempt is open (waiting, pending, or a refund
	// in processing), is when the reconciler may drive it to a final state.
	RecoverAfter time.Time
	NextAction   *TxNextAction // while pending
	ThreeDS      string        // "" when no 3-D Secure challenge happened
	PendingUntil time.Time     // while pending: when the attempt is given up
	Limits       *LimitHold    // counters to release if the attempt ends declined
	Refund       *Refund
	// RecoverTries counts the recoveries that left the attempt open: its
	// next one waits longer each time (a bounded back-off).
	RecoverTries int
	// After holds what the acquirer reported after the first answer
	// (acquirer refunds, a dispute, a late charge); nil when nothing.
	After     *After
	CreatedAt time.Time
	UpdatedAt time.Time
	SettledAt *time.Time
}

// Values of Transaction.ThreeDS.
const (
	ThreeDSChallenge     = "challenge_required"
	ThreeDSAuthenticated = "authenticated"
	ThreeDSFailed        = "failed"
	ThreeDSTimedOut      = "timed_out"
)

// TxPayer is the part of the payer data kept with a transaction.
type TxPayer struct {
	Name    string
	Email   string
	Phone   string
	Country string
}

// TxNextAction is the kept part of a pending attempt's next action (the
// 3-D Secure URL is signed and short-lived, so it is rebuilt, never kept).
type TxNextAction struct {
	Type      string
	QRPayload string
	Reference string
}

// LimitHold records what an attempt added to the merchant's limit counters.
type LimitHold struct {
	Month  string // YYYY-MM (UTC)
	Day    string // DD
	Unit   string
	Amount decimal.Decimal
}

// Refund states.
const (
	RefundProcessing = "processing"
	RefundRefunded   = "refunded"
	RefundFailed     = "failed"
)

// Refund of an approved transaction.
type Refund struct {
	ID          string
	Status      string
	Amount      decimal.Decimal
	Unit        string
	ProviderRef string
	Code        string
	CreatedAt   time.Time
	CompletedAt *time.Time
	// Origin is RefundByService or RefundByAcquirer.
	Origin string
	// AcquirerStatus is the acquirer's own status (Stripe: pending,
	// requires_action, succeeded, failed, canceled) once it answered;
	// FailureReason its reason for a failure.
	AcquirerStatus string
	FailureReason  string
	// Notified is the Status whose merchant notification was queued.
	Notified string
	// Rev counts the writes after the refund began (each is guarded by it).
	Rev int64
}

// NewRefund returns a refund in processing.
func NewRefund(id string, amount decimal.Decimal, unit string, createdAt time.Time) Refund {
	return Refund{ID: id, Status: RefundProcessing, Amount: amount, Unit: unit, CreatedAt: createdAt.UTC()}
}

// NewLimitHold builds a LimitHold.
func NewLimitHold(month, day, unit string, amount decimal.Decimal) *LimitHold {
	return &LimitHold{Month: month, Day: day, Unit: unit, Amount: amount}
}
