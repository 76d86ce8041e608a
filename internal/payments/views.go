package payments

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// TransactionView is a transaction as the lookups return it
// (GET /transactions/{id}, GET /payments/creditCard/status/{paymentId}).
type TransactionView struct {
	ID                  int64                     `json:"id"`
	PaymentID           string                    `json:"paymentId"`
	TransactionNumber   string                    `json:"transactionNumber"`
	PaymentRequestID    int64                     `json:"paymentRequestId"`
	TransactionStatusID payment.TransactionStatus `json:"transactionStatusId"`
	Method              string                    `json:"method"`
	Selector            int                       `json:"selector,omitempty"`
	Amount              payment.Amount            `json:"amount"`
	Unit                string                    `json:"unit"`
	Card                *card.Masked              `json:"card,omitempty"`
	UPIID               string                    `json:"upiId,omitempty"`
	LastLog             payment.LastLog           `json:"lastLog"`
	NextAction          *provider.NextAction      `json:"nextAction,omitempty"`
	ThreeDS             *ThreeDSView              `json:"threeDS,omitempty"`
	Refund              *RefundView               `json:"refund,omitempty"`
	CreatedAt           time.Time                 `json:"createdAt"`
	UpdatedAt           time.Time                 `json:"updatedAt"`
	SettledAt           *time.Time                `json:"settledAt,omitempty"`
}

// ThreeDSView is GET /payments/threeds/status/{transaction3dsId}.
type ThreeDSView struct {
	Transaction3dsID    string                    `json:"transaction3dsId"`
	TransactionID       int64                     `json:"transactionId"`
	PaymentRequestID    int64                     `json:"paymentRequestId"`
	Status              string                    `json:"status"` // challenge_required | authenticated | failed | timed_out
	TransactionStatusID payment.TransactionStatus `json:"transactionStatusId"`
	ChallengeURL        string                    `json:"challengeUrl,omitempty"`
}

// RefundView is GET /payments/h2h/refund/{transactionId}.
type RefundView struct {
	RefundID          string         `json:"refundId"`
	Status            string         `json:"status"` // processing | refunded | failed
	TransactionID     int64          `json:"transactionId"`
	TransactionNumber string         `json:"transactionNumber"`
	PaymentRequestID  int64          `json:"paymentRequestId"`
	Amount            payment.Amount `json:"amount"`
	Unit              string         `json:"unit"`
	Code              codes.Code     `json:"code,omitempty"`
	CreatedAt         time.Time      `json:"createdAt"`
	CompletedAt       *time.Time     `json:"completedAt,omitempty"`
}

// ViewOf renders a transaction; baseURL signs a fresh 3-D Secure URL while
// the challenge is open.
func (s *Service) ViewOf(tx *payment.Transaction, baseURL string) TransactionView {
	v := TransactionView{
		ID: tx.ID, PaymentID: strconv.FormatInt(tx.ID, 10), TransactionNumber: tx.Number, PaymentRequestID: tx.PaymentRequestID,
		TransactionStatusID: tx.Status, Method: tx.Method, Selector: tx.Selector,
		Amount: payment.DisplayAmount(tx.Amount, tx.Unit), Unit: tx.Unit, Card: tx.Card, UPIID: tx.UPIID,
		LastLog:    payment.LastLog{TransactionStatusID: tx.Status, Message: tx.Message, Code: tx.Code},
		NextAction: s.nextAction(tx, baseURL, ""),
		CreatedAt:  tx.CreatedAt.UTC(), UpdatedAt: tx.UpdatedAt.UTC(), SettledAt: tx.SettledAt,
	}
	if tx.ThreeDS != "" {
		tds := s.ThreeDSView(tx, baseURL)
		v.ThreeDS = &tds
	}
	if tx.Refund != nil {
		rv := refundView(tx)
		v.Refund = &rv
	}
	return v
}

func (s *Service) ThreeDSView(tx *payment.Transaction, baseURL string) ThreeDSView {
	v := ThreeDSView{Transaction3dsID: ThreeDSID(tx.ID), TransactionID: tx.ID, PaymentRequestID: tx.PaymentRequestID,
		Status: tx.ThreeDS, TransactionStatusID: tx.Status}
	if tx.Status == payment.TxPending && tx.ThreeDS == payment.ThreeDSChallenge {
		v.ChallengeURL = s.ChallengeURL(baseURL, tx.ID, "")
	}
	return v
}

func refundView(tx *payment.Transaction) RefundView {
	r := tx.Refund
	return RefundView{RefundID: r.ID, Status: r.Status, TransactionID: tx.ID, TransactionNumber: tx.Number,
		PaymentRequestID: tx.PaymentRequestID, Amount: payment.DisplayAmount(r.Amount, r.Unit), Unit: r.Unit,
		Code: codes.Code(r.Code), CreatedAt: r.CreatedAt.UTC(), CompletedAt: r.CompletedAt}
}

func txNotFound(ref string) *errkind.Error {
	return errkind.NotFoundErr("Transaction " + ref + " does not exist.")
}

// TransactionOf loads transaction id of merchant m; another merchant's
// transaction is a 404 (043) like a missing one.
func (s *Service) TransactionOf(ctx context.Context, m *merchant.Merchant, id int64) (*payment.Transaction, error) {
	tx, err := s.Store.Transaction(ctx, id)
	if errors.Is(err, payment.ErrNotFound) || (err == nil && tx.MerchantID != m.ID) {
		return nil, txNotFound(strconv.FormatInt(id, 10))
	}
	return tx, err
}

// TransactionByRef loads a transaction of m by id or by transactionNumber.
func (s *Service) TransactionByRef(ctx context.Context, m *merchant.Merchant, ref string) (*payment.Transaction, error) {
	if id, ok := ParseID(ref); ok {
		return s.TransactionOf(ctx, m, id)
	}
	if !strings.HasPrefix(ref, "TX") || len(ref) != 18 {
		return nil, errkind.BadInput("The id must be a transaction id (a positive integer) or a transaction number (TX…), got "+strconv.Quote(ref)+".", "")
	}
	tx, err := s.Store.TransactionByNumber(ctx, ref)
	if errors.Is(err, payment.ErrNotFound) || (err == nil && tx.MerchantID != m.ID) {
		return nil, txNotFound(ref)
	}
	return tx, err
}

// Refund refunds approved transaction id of m in full, once: the first call
// records the refund with a conditional write and asks the provider;
// repeating the call returns the same refund. Anything but an approved
// transaction is a 409.
func (s *Service) Refund(ctx context.Context, m *merchant.Merchant, id int64) (RefundView, error) {
	tx, err := s.TransactionOf(ctx, m, id)
	if err != nil {
		return RefundView{}, err
	}
	now := s.Now().UTC()
	if tx.Refund == nil {
		if tx.Status != payment.TxApproved {
			return RefundView{}, errkind.ConflictErr(fmt.Sprintf("Transaction %d is not approved; only approved transactions can be refunded.", id), "")
		}
		if rc, ok := s.Provider.(provider.RefundChecker); ok && !s.Sandbox {
			if err := rc.CheckRefund(provider.Method(tx.Method), tx.Selector, tx.Unit); err != nil {
				return RefundView{}, errkind.ConflictErr(fmt.Sprintf("Transaction %d cannot be refunded through the acquirer: %s", id, err), "")
			}
		}
		got, err := s.Store.BeginRefund(ctx, tx.ID, m.ID, payment.NewRefund(newRefundID(), tx.Amount, tx.Unit, now), now.Add(s.SyncLease))
		if errors.Is(err, payment.ErrConflict) { // a concurrent call began it
			if got, err = s.Store.Transaction(ctx, tx.ID); err == nil && got.Refund == nil {
				return RefundView{}, errkind.ConflictErr(fmt.Sprintf("Transaction %d cannot be refunded.", id), "")
			}
		}
		if err != nil {
			return RefundView{}, err
		}
		tx = got
	}
	if tx.Refund.Status == payment.RefundProcessing {
		if tx, err = s.finishRefund(ctx, tx); err != nil {
			return RefundView{}, err
		}
	}
	return refundView(tx), nil
}

// finishRefund asks the provider for tx's processing refund (first call, or
// one a crash cut short: asking again with the same refund id cannot refund
// twice) and records its answer.
func (s *Service) finishRefund(ctx context.Context, tx *payment.Transaction) (*payment.Transaction, error) {
	out, err := s.Provider.Refund(ctx, provider.RefundRequest{RefundID: tx.Refund.ID, TransactionID: tx.ID,
		ChargeReference: tx.Reference, ProviderRef: tx.ProviderRef, Amount: tx.Refund.Amount, Unit: tx.Refund.Unit,
		Reason: "merchant refund"})
	if err != nil {
		return nil, fmt.Errorf("refund transaction %d: %w", tx.ID, err)
	}
	status := payment.RefundProcessing
	switch out.Status {
	case provider.Approved:
		status = payment.RefundRefunded
	case provider.Declined:
		status = payment.RefundFailed
	}
	if status == payment.RefundProcessing {
		return tx, nil
	}
	got, err := s.Store.CompleteRefund(ctx, tx.ID, tx.Refund.ID, status, out.ProviderRef, out.Code, s.Now())
	if errors.Is(err, payment.ErrConflict) {
		got, err = s.Store.Transaction(ctx, tx.ID)
	}
	if err == nil {
		s.aggregateRefund(ctx, got)
	}
	return got, err
}

// refundAggregator keeps the dashboard's overview (*dynamo.Store has it).
type refundAggregator interface {
	AggregateRefund(ctx context.Context, tx *payment.Transaction, now time.Time) (bool, error)
}

// aggregateRefund adds a completed refund to the merchant's overview, once
// (the transaction carries a mark). Bookkeeping after the refund is made:
// a failure is logged and the refund's answer stands (the overview's refund
// count then misses it; docs/dashboard.md).
func (s *Service) aggregateRefund(ctx context.Context, tx *payment.Transaction) {
	a, ok := s.Store.(refundAggregator)
	if !ok || tx == nil || tx.Refund == nil || tx.Refund.Status != payment.RefundRefunded {
		return
	}
	if _, err := a.AggregateRefund(ctx, tx, s.Now()); err != nil {
		s.Log.Warn("adding a refund to the dashboard overview failed", "transaction_id", tx.ID, "error", err.Error())
	}
}

func newRefundID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "RF" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}
