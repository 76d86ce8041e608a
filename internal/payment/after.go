package payment

import (
	"time"

	"github.com/shopspring/decimal"
)

// What happens to a charge after its first answer, as the acquirer reports
// it: refunds it settles later (or that were made outside the service, in
// the acquirer's dashboard), disputes, and a charge that succeeded after its
// transaction was declined (voided at once). The payment core
// (internal/paycore) moves these; docs/stripe.md has the lifecycle.

// Refund origins.
const (
	RefundByService  = ""         // made through the service's API or dashboard
	RefundByAcquirer = "acquirer" // made at the acquirer (Stripe's Dashboard), recorded from its event
)

// After is the part of a transaction written after its first answer, as one
// record with a revision: each change reads it, changes it and writes it
// back only if no one else wrote in between (Rev), so concurrent events
// about the same charge are applied one after another, never lost.
type After struct {
	Rev int64
	// Refunds made at the acquirer that the service's own refund slot
	// (Transaction.Refund) does not hold: a second partial refund in
	// Stripe's Dashboard, say.
	Refunds    []Refund
	Dispute    *Dispute
	LateCharge *LateCharge
}

// Dispute states (Stripe's dispute statuses; docs/stripe.md).
const (
	DisputeWarningNeedsResponse = "warning_needs_response"
	DisputeWarningUnderReview   = "warning_under_review"
	DisputeWarningClosed        = "warning_closed"
	DisputeNeedsResponse        = "needs_response"
	DisputeUnderReview          = "under_review"
	DisputeWon                  = "won"
	DisputeLost                 = "lost"
	DisputePrevented            = "prevented"
)

// DisputeClosed reports whether status ends a dispute: it never changes
// again (won, lost, warning_closed, prevented).
func DisputeClosed(status string) bool {
	switch status {
	case DisputeWon, DisputeLost, DisputeWarningClosed, DisputePrevented:
		return true
	}
	return false
}

// DisputeOpen reports whether a dispute in status still waits for the
// merchant or the card network (it counts as open on the dashboard).
func DisputeOpen(status string) bool { return status != "" && !DisputeClosed(status) }

// Dispute is a cardholder's dispute (chargeback or inquiry) of the
// transaction's charge. A charge is disputed at most once.
type Dispute struct {
	ID     string // the acquirer's dispute id (dp_…)
	Status string
	Reason string
	Amount decimal.Decimal
	Unit   string
	// EvidenceDueBy is when the merchant's evidence must be submitted (in
	// the acquirer's dashboard); zero when none is asked for.
	EvidenceDueBy time.Time
	// FundsWithdrawn and FundsReinstated: the disputed amount left the
	// merchant's balance, and came back.
	FundsWithdrawn  bool
	FundsReinstated bool
	// Live is the acquirer's live mode (its dashboard link differs).
	Live      bool
	CreatedAt time.Time
	UpdatedAt time.Time
	// EventAt is the acquirer's time of the last event applied (events
	// arrive in any order: an older one never overwrites a newer one).
	EventAt time.Time
	// LastEvent is the merchant event type of the last change
	// (DisputeCreated, …), LastEventID the acquirer event that made it;
	// Notified is the acquirer event id whose notification was queued.
	LastEvent   string
	LastEventID string
	Notified    string
}

// Merchant event types of refunds and disputes: the `type` of their
// notifications (docs/notifications.md). A payment's own notification has
// none.
const (
	EventRefundSucceeded        = "refund.succeeded"
	EventRefundFailed           = "refund.failed"
	EventDisputeCreated         = "dispute.created"
	EventDisputeUpdated         = "dispute.updated"
	EventDisputeClosed          = "dispute.closed"
	EventDisputeFundsWithdrawn  = "dispute.funds_withdrawn"
	EventDisputeFundsReinstated = "dispute.funds_reinstated"
)

// Late charge states.
const (
	LateVoiding = "voiding" // the void is asked of the acquirer (or must be, after a crash)
	LateVoided  = "voided"  // the acquirer returned the money (or is returning it: a refund it settles later)
	LateFailed  = "failed"  // the acquirer refused the void: an operator must refund it
)

// LateCharge is a charge the acquirer reported succeeded after the
// transaction was declined (the merchant was told "declined"): it is voided
// at once and reported, never booked as a payment.
type LateCharge struct {
	ProviderRef string // the acquirer's charge (intent) id
	RefundRef   string // the acquirer's refund of it
	Status      string
	Amount      decimal.Decimal
	Unit        string
	SeenAt      time.Time
	VoidedAt    *time.Time
	// ConfirmedAt is when the acquirer's event said the money was returned
	// (nil while the acquirer has only taken the void); Action how, when it
	// says (Adyen's reversal: "cancel" of an authorisation, "refund" of a
	// captured payment).
	ConfirmedAt *time.Time
	Action      string
}

// DisputeEntry is one dispute in its merchant's list (the dashboard's open
// disputes with their deadline, the overview's count).
type DisputeEntry struct {
	TransactionID    int64
	PaymentRequestID int64
	DisputeID        string
	Status           string
	Reason           string
	Amount           decimal.Decimal
	Unit             string
	EvidenceDueBy    time.Time
	UpdatedAt        time.Time
	Rev              int64 // the transaction's After.Rev that wrote it: an older one never overwrites
	Live             bool
}

// DashboardURL is where a dispute's evidence is submitted: the acquirer's
// dashboard (Stripe's; its test-mode view unless the dispute is live).
func (d *Dispute) DashboardURL() string {
	if d == nil || d.ID == "" {
		return ""
	}
	if d.Live {
		return "https://dashboard.stripe.com/disputes/" + d.ID
	}
	return "https://dashboard.stripe.com/test/disputes/" + d.ID
}

// RefundByID finds the refund id of transaction t: its service refund (by
// the service's or the acquirer's id) or one made at the acquirer.
func (t *Transaction) RefundByID(id string) *Refund {
	if id == "" {
		return nil
	}
	if r := t.Refund; r != nil && (r.ID == id || r.ProviderRef == id) {
		return r
	}
	if t.After != nil {
		for i := range t.After.Refunds {
			if r := &t.After.Refunds[i]; r.ProviderRef == id {
				return r
			}
		}
	}
	return nil
}
