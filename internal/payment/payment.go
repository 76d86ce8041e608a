// Package payment is the domain of payment requests: their fields, states and
// the validation of what a merchant may create. It has no storage or AWS code.
package payment

import (
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

// RequestStatus is paymentRequestStatusId.
type RequestStatus int

const (
	RequestPaid      RequestStatus = 1
	RequestUnpaid    RequestStatus = 2
	RequestCancelled RequestStatus = 3
)

func (s RequestStatus) String() string {
	switch s {
	case RequestPaid:
		return "paid"
	case RequestUnpaid:
		return "unpaid"
	case RequestCancelled:
		return "cancelled"
	}
	return "unknown"
}

// TransactionStatus is transactionStatusId (also in lastLog).
type TransactionStatus int

const (
	TxWaiting  TransactionStatus = 0
	TxApproved TransactionStatus = 1
	TxDeclined TransactionStatus = 2
	TxPending  TransactionStatus = 3
)

// Final reports whether s ends a transaction (approved or declined).
func (s TransactionStatus) Final() bool { return s == TxApproved || s == TxDeclined }

// Client is the paying customer as the merchant describes it.
type Client struct {
	ID       string `json:"id,omitempty"`
	Name     string `json:"name,omitempty"`
	Email    string `json:"email,omitempty"`
	Phone    string `json:"phone,omitempty"`
	MemberID string `json:"memberId,omitempty"`
}

// LastLog summarises the latest payment attempt.
type LastLog struct {
	TransactionStatusID TransactionStatus `json:"transactionStatusId"`
	Message             string            `json:"message"`
	Code                codes.Code        `json:"code"`
}

// Request is a payment request.
type Request struct {
	ID            int64
	MerchantID    string
	RecipientName string
	Status        RequestStatus
	Amount        decimal.Decimal
	Unit          string
	ReferenceID   string
	Notes         string
	Client        *Client
	NotifyURL     string
	SuccessURL    string
	FailureURL    string

	// Set once a payment attempt exists.
	TransactionID     int64
	TransactionNumber string
	TransactionStatus *TransactionStatus
	LastLog           *LastLog

	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// ChargeReference is the provider reference of transaction txID's charge:
// written with the transaction before the provider is called, and sent as
// the provider's idempotency key, so the same attempt can never be charged
// twice.
func ChargeReference(txID int64) string { return "ptx_" + strconv.FormatInt(txID, 10) }

// Query selects a merchant's payment requests, newest first.
type Query struct {
	MerchantID string
	Status     int // 0: any
	From, To   time.Time
	Reference  string
	Cursor     string // opaque, from the previous page
	Limit      int
}
