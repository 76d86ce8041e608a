package batchproc

import (
	"context"
	"errors"
	"strconv"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// Charger charges one valid row of a batch file: it creates the payment
// request and runs a card attempt with no cardholder present (a card that
// needs 3-D Secure is declined with 004).
//
// The processor allocates the payment request id once per (merchant, file
// content, row) and stores it in the row's idempotency record before the
// first call, so every later attempt at the row — a redelivered event, a
// concurrent invocation, a retry after a crash — calls ChargeRow with the
// same id. ChargeRow must therefore be idempotent on the id: when that
// payment request already exists for this row with an outcome, it returns
// that outcome and charges nothing.
//
// Ids are random (package ids), so an id can also belong to another payment
// request: ChargeRow then returns ErrPaymentRequestIDTaken and the processor
// gives the row a new id.
//
// The returned Result needs Status, PaymentRequestID, TransactionID, Code and
// Message; the processor sets Row. An error means no outcome could be
// determined (the row is retried); a decline is a Result.
type Charger interface {
	ChargeRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref RowRef) (batch.Result, error)
}

// Peeker is implemented by chargers that can tell, without charging,
// whether a row's payment request already has an attempt outcome. A row
// held by another invocation is answered from it instead of waiting for
// that invocation to store the row's result.
//
// PeekRequest reads payment request id of merchant m, whatever row it was
// created for: a duplicate line reports the original's ids and outcome, and
// an abandoned job tells a request never created (nothing can charge it
// any more) from one whose outcome is not known yet.
type Peeker interface {
	PeekRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref RowRef) (res batch.Result, ok bool, err error)
	PeekRequest(ctx context.Context, m *merchant.Merchant, id int64) (batch.Result, RequestState, error)
}

// RequestState is what PeekRequest found.
type RequestState int

const (
	RequestMissing    RequestState = iota // no payment request of the merchant has the id
	RequestNoOutcome                      // the request exists without an attempt outcome
	RequestHasOutcome                     // the Result is its outcome
)

// RowRef is the payment request a row is charged as.
type RowRef struct {
	PaymentRequestID int64
}

// ErrPaymentRequestIDTaken: the row's payment request id belongs to another
// payment request.
var ErrPaymentRequestIDTaken = errors.New("payment request id already taken by another payment request")

// ChargerFunc adapts a function to Charger.
type ChargerFunc func(ctx context.Context, m *merchant.Merchant, row batch.Row, ref RowRef) (batch.Result, error)

// ChargeRow calls f.
func (f ChargerFunc) ChargeRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref RowRef) (batch.Result, error) {
	return f(ctx, m, row, ref)
}

// IsRowRequest reports whether payment request r is the one created for row
// of merchant m: everything the row put into it matches. (A different row of
// the same merchant with identical data drawing the same random id after a
// crash is not worth another write per row to rule out.)
func IsRowRequest(r *payment.Request, m *merchant.Merchant, row batch.Row) bool {
	c := r.Client
	if c == nil {
		c = &payment.Client{}
	}
	return r.MerchantID == m.ID && r.Amount.Equal(row.Amount) && r.Unit == row.Unit && r.ReferenceID == row.ReferenceID &&
		c.Name == row.HolderName && c.Email == row.Email && c.Phone == row.Phone
}

// StatusOf maps a transaction status to the result file's status.
func StatusOf(ts payment.TransactionStatus) batch.Status {
	switch ts {
	case payment.TxApproved:
		return batch.StatusApproved
	case payment.TxPending, payment.TxWaiting:
		return batch.StatusPending
	}
	return batch.StatusDeclined
}

// ResultOfRequest is the result line of a payment request that already has
// an attempt (replays read it from the request).
func ResultOfRequest(r *payment.Request) batch.Result {
	res := batch.Result{PaymentRequestID: strconv.FormatInt(r.ID, 10), Status: batch.StatusPending}
	if r.TransactionID != 0 {
		res.TransactionID = strconv.FormatInt(r.TransactionID, 10)
	}
	switch {
	case r.TransactionStatus != nil:
		res.Status = StatusOf(*r.TransactionStatus)
	case r.Status == payment.RequestCancelled:
		res.Status, res.Code = batch.StatusDeclined, codes.TransactionCancelled
		res.Message = declinedMessage(res.Code, "Cancelled")
		return res
	}
	if r.LastLog != nil {
		res.Code = r.LastLog.Code
		if res.Status != batch.StatusApproved {
			res.Message = r.LastLog.Message
		}
	}
	if res.Status == batch.StatusApproved {
		res.Code = ""
	}
	return res
}

// declinedMessage is the message of a declined result: the spec's text for
// its code.
func declinedMessage(c codes.Code, fallback string) string {
	if m := c.Message(); m != "" {
		return m
	}
	return fallback
}
