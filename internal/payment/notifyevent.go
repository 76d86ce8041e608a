package payment

import (
	"fmt"
	"time"

	"github.com/payreq/payreq/internal/codes"
)

// NotifyEvent is one merchant notification to deliver: a transaction of a
// request reached approved (1) or declined (2). The write that settles the
// transaction also stores the event on the payment request (the outbox), so
// a crash before it reaches the queue loses nothing: the reconciler finds it.
// It carries ids and statuses only — the notifier reads everything else from
// the stored request when it sends.
type NotifyEvent struct {
	EventID       string `json:"eventId" dynamodbav:"eventId"`
	RequestID     int64  `json:"requestId" dynamodbav:"requestId"`
	TransactionID int64  `json:"transactionId" dynamodbav:"transactionId"`
	// MerchantID lets the notifier read the merchant with the transaction
	// and the request in one call; the stored request's merchant wins.
	MerchantID             string            `json:"merchantId,omitempty" dynamodbav:"merchantId,omitempty"`
	TransactionStatusID    TransactionStatus `json:"transactionStatusId" dynamodbav:"transactionStatusId"`
	PaymentRequestStatusID RequestStatus     `json:"paymentRequestStatusId" dynamodbav:"paymentRequestStatusId"`
	Code                   codes.Code        `json:"code,omitempty" dynamodbav:"code,omitempty"`
	Message                string            `json:"message,omitempty" dynamodbav:"message,omitempty"`
	OccurredAt             time.Time         `json:"occurredAt" dynamodbav:"occurredAt"`
	// Channel routes the event to its queue (interactive or batch); it is
	// the transaction's own, copied when the transaction settles.
	Channel Channel `json:"channel,omitempty" dynamodbav:"channel,omitempty"`
	// Type is set on the notification of a refund or a dispute
	// (EventRefundSucceeded, EventDisputeCreated, …), never on a payment's;
	// ObjectID names the refund or dispute. The notifier builds such a
	// notification from the stored record, in its own words.
	Type     string `json:"type,omitempty" dynamodbav:"type,omitempty"`
	ObjectID string `json:"objectId,omitempty" dynamodbav:"objectId,omitempty"`

	// Delivery state, carried between attempts in the queue message.
	Attempts int       `json:"attempts,omitempty" dynamodbav:"-"`
	DueAt    time.Time `json:"dueAt,omitzero" dynamodbav:"-"`
	// Resent: sent again by hand (a DLQ redrive, a redelivery), with a
	// fresh schedule; its delivery ends a failure the dashboard lists.
	Resent bool `json:"resent,omitempty" dynamodbav:"-"`
}

// NewNotifyEvent builds the event for a settled transaction; only approved
// and declined transactions notify (the spec's status values 1 and 2).
func NewNotifyEvent(r *Request, txID int64, tx TransactionStatus, log LastLog, at time.Time) (NotifyEvent, error) {
	if tx != TxApproved && tx != TxDeclined {
		return NotifyEvent{}, fmt.Errorf("transaction status %d does not notify", tx)
	}
	reqStatus := RequestUnpaid
	if tx == TxApproved {
		reqStatus = RequestPaid
	}
	return NotifyEvent{
		// Stable across retries and redeliveries: it becomes webhook-id.
		EventID:   fmt.Sprintf("evt_%d_%d", txID, tx),
		RequestID: r.ID, MerchantID: r.MerchantID, TransactionID: txID, TransactionStatusID: tx, PaymentRequestStatusID: reqStatus,
		Code: log.Code, Message: log.Message, OccurredAt: at.UTC(),
	}, nil
}

// EventOf returns ev with the stored state of its transaction: the
// notifier signs only what the store says, whatever a queue message claims.
// A cancelled request is reported as unpaid (the spec's values are 1 and 2).
func EventOf(ev NotifyEvent, txID int64, tx TransactionStatus, req RequestStatus, code codes.Code, message string) NotifyEvent {
	ev.TransactionID, ev.TransactionStatusID, ev.Code, ev.Message = txID, tx, code, message
	ev.PaymentRequestStatusID = RequestUnpaid
	if req == RequestPaid && tx == TxApproved {
		ev.PaymentRequestStatusID = RequestPaid
	}
	return ev
}
