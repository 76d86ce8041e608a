package batchproc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// PaymentService is the part of paycore.Service the batch uses.
type PaymentService interface {
	Pay(ctx context.Context, m *merchant.Merchant, requestID int64, a paycore.Attempt) (paycore.Result, error)
	PayNew(ctx context.Context, m *merchant.Merchant, r payment.Request, a paycore.Attempt) (paycore.Result, error)
}

// RequestStore creates and reads payment requests (*dynamo.Store).
type RequestStore interface {
	CreatePaymentRequest(ctx context.Context, r *payment.Request) error
	PaymentRequest(ctx context.Context, id int64) (*payment.Request, error)
}

// PaymentsCharger is the Charger of the service: a row becomes payment
// request paymentRequestID (created here with the id the row record fixed)
// and one card attempt with no cardholder present: paycore.Service.PayNew
// creates the request (leased) and writes its attempt's transaction ahead
// in one write; a request that exists already is paid with
// paycore.Service.Pay. It is idempotent on the id: the request is created at most once,
// the payment service's attempt lease lets one attempt run at a time, and a
// request that already has an attempt is answered from that attempt.
type PaymentsCharger struct {
	Service PaymentService
	Store   RequestStore
	// Wait bounds how long a row waits for a concurrent attempt on its
	// request to finish (default 30 s, the payment service's attempt lease).
	Wait time.Duration
}

// ChargeRow implements Charger.
func (c *PaymentsCharger) ChargeRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref RowRef) (batch.Result, error) {
	id := ref.PaymentRequestID
	now := time.Now().UTC()
	req := &payment.Request{ID: id, MerchantID: m.ID, Status: payment.RequestUnpaid, Amount: row.Amount, Unit: row.Unit,
		ReferenceID: row.ReferenceID, Client: &payment.Client{Name: row.HolderName, Email: row.Email, Phone: row.Phone},
		CreatedAt: now, UpdatedAt: now}
	attempt := paycore.Attempt{
		Method: provider.MethodCard,
		Payer: &payer.Data{Name: row.HolderName, Email: row.Email, PhoneNumber: row.Phone, Address: row.Address,
			City: row.City, State: row.State, PostalCode: row.PostalCode, Country: row.Country},
		Card:              &card.Input{Holder: row.HolderName, Number: row.CardNumber, Expiry: row.CardExpiry, CVV: row.CVV},
		CardholderPresent: false,                // no payer to answer a 3-D Secure challenge: declined with 004
		Channel:           payment.ChannelBatch, // notified through the batch queue
	}
	// The row's attempt has a transaction id derived from its payment
	// request, as an Idempotency-Key gives one: a retry of the row (Lambda's
	// retry, a redelivery, recovery) resumes the attempt a dead run began —
	// same transaction, same provider reference — instead of starting a
	// second one.
	ctx = ids.WithSeed(ctx, []byte("batch-row:"+strconv.FormatInt(id, 10)))
	out, err := c.Service.PayNew(ctx, m, *req, attempt)
	switch p, _ := errkind.As(err); {
	case err == nil:
		return resultOfAttempt(id, out), nil
	case p != nil && p.Kind == errkind.Invalid:
		// The payment service's rules refused the row before anything was
		// written (e.g. the card expired since the file was read): its
		// request is still created (unpaid), declined before any attempt.
		if err := c.Store.CreatePaymentRequest(ctx, req); err != nil && !errkind.Is(err, errkind.Exists) {
			return batch.Result{}, err
		}
		return declinedBeforeAttempt(id, p), nil
	case errkind.Is(err, errkind.Exists):
		// Even an id drawn for this very call may be taken by the row
		// itself: a write applied whose answer was lost (a timeout, then the
		// SDK's retry) comes back as "exists". Only a request that is not
		// this row's makes the id another's (ErrPaymentRequestIDTaken).
		res, done, err := c.existing(ctx, m, row, id)
		if err != nil || done {
			return res, err
		}
		// Created by an attempt at the row that stopped before charging:
		// paid below.
	default:
		return batch.Result{}, err
	}

	wait := c.Wait
	if wait <= 0 {
		wait = paycore.DefaultSyncLease
	}
	deadline := time.Now().Add(wait)
	for {
		out, err := c.Service.Pay(ctx, m, id, attempt)
		if err == nil {
			return resultOfAttempt(id, out), nil
		}
		p, ok := errkind.As(err)
		if !ok {
			return batch.Result{}, err
		}
		switch p.Kind {
		case errkind.Invalid:
			// The payment service's rules refused the row (e.g. the card
			// expired since the file was read): declined before any attempt.
			return declinedBeforeAttempt(id, p), nil
		case errkind.Conflict:
			// Paid or settled meanwhile, or another attempt holds the lease.
			res, done, err := c.existing(ctx, m, row, id)
			if err != nil || done {
				return res, err
			}
			if time.Now().After(deadline) {
				return batch.Result{}, fmt.Errorf("payment request %d still busy: %w", id, p)
			}
			select {
			case <-ctx.Done():
				return batch.Result{}, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		default:
			return batch.Result{}, fmt.Errorf("pay payment request %d: %w", id, err)
		}
	}
}

// PeekRow implements Peeker: the outcome of the row's payment request, if
// it exists, is this row's, and has an attempt outcome. It only reads.
func (c *PaymentsCharger) PeekRow(ctx context.Context, m *merchant.Merchant, row batch.Row, ref RowRef) (batch.Result, bool, error) {
	res, done, err := c.existing(ctx, m, row, ref.PaymentRequestID)
	if errkind.Is(err, errkind.NotFound) || errors.Is(err, ErrPaymentRequestIDTaken) {
		return batch.Result{}, false, nil
	}
	return res, done && err == nil, err
}

// PeekRequest implements Peeker.
func (c *PaymentsCharger) PeekRequest(ctx context.Context, m *merchant.Merchant, id int64) (batch.Result, RequestState, error) {
	cur, err := c.Store.PaymentRequest(ctx, id)
	if errkind.Is(err, errkind.NotFound) {
		return batch.Result{}, RequestMissing, nil
	}
	if err != nil {
		return batch.Result{}, RequestMissing, err
	}
	if cur.MerchantID != m.ID {
		return batch.Result{}, RequestMissing, nil
	}
	if cur.TransactionStatus == nil && cur.Status == payment.RequestUnpaid {
		return batch.Result{}, RequestNoOutcome, nil
	}
	return ResultOfRequest(cur), RequestHasOutcome, nil
}

// existing answers from a request that already exists: done is true when it
// has an attempt outcome to report.
func (c *PaymentsCharger) existing(ctx context.Context, m *merchant.Merchant, row batch.Row, id int64) (batch.Result, bool, error) {
	cur, err := c.Store.PaymentRequest(ctx, id)
	if err != nil {
		return batch.Result{}, false, err
	}
	if !IsRowRequest(cur, m, row) {
		return batch.Result{}, false, ErrPaymentRequestIDTaken
	}
	if cur.TransactionStatus == nil && cur.Status == payment.RequestUnpaid {
		return batch.Result{}, false, nil
	}
	return ResultOfRequest(cur), true, nil
}

func resultOfAttempt(id int64, out paycore.Result) batch.Result {
	res := batch.Result{Status: StatusOf(out.TransactionStatusID), PaymentRequestID: strconv.FormatInt(id, 10)}
	if out.TransactionID != 0 {
		res.TransactionID = strconv.FormatInt(out.TransactionID, 10)
	}
	if res.Status != batch.StatusApproved {
		res.Code = out.LastLog.Code
		res.Message = declinedMessage(out.LastLog.Code, out.LastLog.Message)
	}
	return res
}

func declinedBeforeAttempt(id int64, p *errkind.Error) batch.Result {
	res := batch.Result{Status: batch.StatusDeclined, PaymentRequestID: strconv.FormatInt(id, 10), Code: p.Code, Message: p.Detail}
	if len(p.Fields) > 0 {
		parts := make([]string, 0, len(p.Fields))
		for _, e := range p.Fields {
			parts = append(parts, e.Field+": "+e.Detail)
		}
		res.Code, res.Message = p.Fields[0].Code, strings.Join(parts, ", ")
	}
	return res
}
