package webhook

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Refund and dispute notifications (docs/notifications.md, "Refunds and
// disputes"). A payment's notification says what became of an attempt;
// once a merchant was told "approved, paid", no later notification says
// otherwise: a refund or a dispute is its own event, with a `type` like
// Stripe's (refund.succeeded, refund.failed, dispute.created,
// dispute.updated, dispute.closed, dispute.funds_withdrawn,
// dispute.funds_reinstated). Its transactionStatusId and
// paymentRequestStatusId stay the payment's (1 and 1), and its own fields
// say what happened. It is signed like every notification.

// Event types (the same strings as payment.Event…).
const (
	EventRefundSucceeded = "refund.succeeded"
	EventRefundFailed    = "refund.failed"
)

// Event is what a refund's or dispute's notification adds to the payment's
// fields.
type Event struct {
	Type    string // refund.succeeded, …, dispute.created, …
	EventID string // stable across retries (also webhook-id's)
	// ObjectID is the refund's id (the service's, or the acquirer's for a
	// refund made in its dashboard) or the dispute's (the acquirer's).
	ObjectID string
	Status   string // refund: refunded | failed; dispute: Stripe's status
	Amount   decimal.Decimal
	// Reason: a dispute's reason, or a failed refund's.
	Reason string
	// Dispute only.
	EvidenceDueBy time.Time
	DashboardURL  string
}

// IsRefund reports whether e is a refund's notification (else a dispute's).
func (e *Event) IsRefund() bool { return strings.HasPrefix(e.Type, "refund.") }

// EventFormFields are the form body's keys after FormFields for a refund
// and for a dispute, in order.
var (
	RefundFormFields  = []string{"type", "eventId", "refundId", "refundStatus", "refundAmount", "refundFailureReason"}
	DisputeFormFields = []string{"type", "eventId", "disputeId", "disputeStatus", "disputeReason", "disputeAmount", "evidenceDueBy", "disputeUrl"}
)

func (e *Event) formValues(decimals int32) []string {
	if e.IsRefund() {
		return []string{e.Type, e.EventID, e.ObjectID, e.Status, e.Amount.StringFixed(decimals), e.Reason}
	}
	due := ""
	if !e.EvidenceDueBy.IsZero() {
		due = e.EvidenceDueBy.UTC().Format(time.RFC3339)
	}
	return []string{e.Type, e.EventID, e.ObjectID, e.Status, e.Reason, e.Amount.StringFixed(decimals), due, e.DashboardURL}
}

func (e *Event) formKeys() []string {
	if e.IsRefund() {
		return RefundFormFields
	}
	return DisputeFormFields
}

func (e *Event) validate() error {
	switch e.Type {
	case EventRefundSucceeded, EventRefundFailed, "dispute.created", "dispute.updated", "dispute.closed",
		"dispute.funds_withdrawn", "dispute.funds_reinstated":
	default:
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	if e.ObjectID == "" || e.EventID == "" {
		return fmt.Errorf("event %s needs its object and event ids", e.Type)
	}
	if e.Amount.IsNegative() {
		return fmt.Errorf("event %s: negative amount", e.Type)
	}
	return nil
}

// appendForm writes e's fields after the payment's (FormBody).
func (e *Event) appendForm(b *strings.Builder, decimals int32) {
	keys := e.formKeys()
	for i, v := range e.formValues(decimals) {
		b.WriteByte('&')
		b.WriteString(keys[i])
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(v))
	}
}

// JSONEvent is the JSON variant of a refund's or dispute's notification.
// Amounts are strings with the currency's decimals, as in the payment's.
type JSONEvent struct {
	Type             string       `json:"type"`
	EventID          string       `json:"eventId"`
	PaymentRequestID int64        `json:"paymentRequestId"`
	TransactionID    int64        `json:"transactionId"`
	Amount           string       `json:"amount"` // the payment's
	Currency         string       `json:"currency"`
	Refund           *JSONRefund  `json:"refund,omitempty"`
	Dispute          *JSONDispute `json:"dispute,omitempty"`
	Timestamp        string       `json:"timestamp"`
	Signature        string       `json:"signature"`
}

// JSONRefund is a refund in a JSON event.
type JSONRefund struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	Amount        string `json:"amount"`
	FailureReason string `json:"failureReason,omitempty"`
}

// JSONDispute is a dispute in a JSON event.
type JSONDispute struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	Reason        string `json:"reason"`
	Amount        string `json:"amount"`
	EvidenceDueBy string `json:"evidenceDueBy,omitempty"`
	DashboardURL  string `json:"dashboardUrl,omitempty"`
}

// SigningString is what a JSON event's embedded signature covers, "|"
// joined:
//
//	type|eventId|paymentRequestId|transactionId|objectId|objectStatus|objectAmount|currency|timestamp
func (j JSONEvent) SigningString() []byte {
	id, status, amount := "", "", ""
	switch {
	case j.Refund != nil:
		id, status, amount = j.Refund.ID, j.Refund.Status, j.Refund.Amount
	case j.Dispute != nil:
		id, status, amount = j.Dispute.ID, j.Dispute.Status, j.Dispute.Amount
	}
	return []byte(strings.Join([]string{j.Type, j.EventID, strconv.FormatInt(j.PaymentRequestID, 10),
		strconv.FormatInt(j.TransactionID, 10), id, status, amount, j.Currency, j.Timestamp}, "|"))
}

func (n Notification) eventJSON(decimals int32, now time.Time, webhookSecret string) []byte {
	e := n.Event
	j := JSONEvent{Type: e.Type, EventID: e.EventID, PaymentRequestID: n.ID, TransactionID: n.TransactionID,
		Amount: n.GrossAmount.StringFixed(decimals), Currency: n.Unit, Timestamp: now.UTC().Format(time.RFC3339)}
	if e.IsRefund() {
		j.Refund = &JSONRefund{ID: e.ObjectID, Status: e.Status, Amount: e.Amount.StringFixed(decimals), FailureReason: e.Reason}
	} else {
		j.Dispute = &JSONDispute{ID: e.ObjectID, Status: e.Status, Reason: e.Reason, Amount: e.Amount.StringFixed(decimals),
			DashboardURL: e.DashboardURL}
		if !e.EvidenceDueBy.IsZero() {
			j.Dispute.EvidenceDueBy = e.EvidenceDueBy.UTC().Format(time.RFC3339)
		}
	}
	j.Signature = SignHex(j.SigningString(), webhookSecret)
	b, err := json.Marshal(j)
	if err != nil {
		panic(err) // strings and integers only
	}
	return b
}

// VerifyJSONEventBody parses a JSON event body and checks its embedded
// signature.
func VerifyJSONEventBody(body []byte, webhookSecret string) (JSONEvent, error) {
	var j JSONEvent
	if err := json.Unmarshal(body, &j); err != nil {
		return JSONEvent{}, fmt.Errorf("webhook: JSON event body: %w", err)
	}
	if !VerifyHex(j.SigningString(), j.Signature, webhookSecret) {
		return j, ErrSignature
	}
	return j, nil
}

// isJSONEvent reports whether a JSON body is a refund's or dispute's
// notification (it has a type).
func isJSONEvent(body []byte) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.Type != ""
}
