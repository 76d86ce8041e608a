package paycore

import (
	"context"
	"crypto/rand"
	"encoding/base32"
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
	// Connector is the acquirer connection that charged (or charges) the
	// attempt; refunds and lookups go to it (internal/connector).
	Connector string `json:"connector"`
	// FailedOver lists the connectors that did not process the charge
	// before Connector took it.
	FailedOver []string             `json:"failedOver,omitempty"`
	LastLog    payment.LastLog      `json:"lastLog"`
	NextAction *provider.NextAction `json:"nextAction,omitempty"`
	ThreeDS    *ThreeDSView         `json:"threeDS,omitempty"`
	Refund     *RefundView          `json:"refund,omitempty"`
	// Refunds made at the acquirer (Stripe's Dashboard), recorded from its
	// events.
	Refunds    []RefundView    `json:"refunds,omitempty"`
	Dispute    *DisputeView    `json:"dispute,omitempty"`
	LateCharge *LateChargeView `json:"lateCharge,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
	SettledAt  *time.Time      `json:"settledAt,omitempty"`
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
	// Origin is "service" (the API or the dashboard) or "acquirer" (made in
	// Stripe's Dashboard); AcquirerRefundID the acquirer's id once it
	// answered; FailureReason the acquirer's reason for a failure.
	Origin           string `json:"origin,omitempty"`
	AcquirerRefundID string `json:"acquirerRefundId,omitempty"`
	FailureReason    string `json:"failureReason,omitempty"`
}

// DisputeView is a transaction's dispute (GET /transactions/{id}).
type DisputeView struct {
	ID              string         `json:"id"`
	Status          string         `json:"status"`
	Reason          string         `json:"reason,omitempty"`
	Amount          payment.Amount `json:"amount"`
	Unit            string         `json:"unit"`
	EvidenceDueBy   *time.Time     `json:"evidenceDueBy,omitempty"`
	FundsWithdrawn  bool           `json:"fundsWithdrawn"`
	FundsReinstated bool           `json:"fundsReinstated"`
	// DashboardURL is where the evidence is submitted (Stripe's Dashboard).
	DashboardURL string    `json:"dashboardUrl"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// LateChargeView is a charge that succeeded after its transaction was
// declined, voided at once.
type LateChargeView struct {
	Status      string         `json:"status"` // voiding | voided | failed
	ProviderRef string         `json:"providerRef"`
	RefundRef   string         `json:"refundRef,omitempty"`
	Amount      payment.Amount `json:"amount"`
	Unit        string         `json:"unit"`
	SeenAt      time.Time      `json:"seenAt"`
	VoidedAt    *time.Time     `json:"voidedAt,omitempty"`
	ConfirmedAt *time.Time     `json:"confirmedAt,omitempty"`
	Action      string         `json:"action,omitempty"` // cancel | refund, when the acquirer says
}

// ViewOf renders a transaction; baseURL signs a fresh 3-D Secure URL while
// the challenge is open.
func (s *Service) ViewOf(tx *payment.Transaction, baseURL string) TransactionView {
	v := TransactionView{
		ID: tx.ID, PaymentID: strconv.FormatInt(tx.ID, 10), TransactionNumber: tx.Number, PaymentRequestID: tx.PaymentRequestID,
		TransactionStatusID: tx.Status, Method: tx.Method, Selector: tx.Selector,
		Amount: payment.DisplayAmount(tx.Amount, tx.Unit), Unit: tx.Unit, Card: tx.Card, UPIID: tx.UPIID,
		Connector: s.ConnectorOf(tx), FailedOver: tx.FailedOver,
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
	if a := tx.After; a != nil {
		for i := range a.Refunds {
			v.Refunds = append(v.Refunds, refundViewOf(tx, &a.Refunds[i]))
		}
		if d := a.Dispute; d != nil {
			dv := DisputeView{ID: d.ID, Status: d.Status, Reason: d.Reason, Amount: payment.DisplayAmount(d.Amount, d.Unit), Unit: d.Unit,
				FundsWithdrawn: d.FundsWithdrawn, FundsReinstated: d.FundsReinstated, DashboardURL: d.DashboardURL(),
				CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC()}
			if !d.EvidenceDueBy.IsZero() {
				due := d.EvidenceDueBy.UTC()
				dv.EvidenceDueBy = &due
			}
			v.Dispute = &dv
		}
		if l := a.LateCharge; l != nil {
			v.LateCharge = &LateChargeView{Status: l.Status, ProviderRef: l.ProviderRef, RefundRef: l.RefundRef,
				Amount: payment.DisplayAmount(l.Amount, l.Unit), Unit: l.Unit, SeenAt: l.SeenAt.UTC(), VoidedAt: l.VoidedAt,
				ConfirmedAt: l.ConfirmedAt, Action: l.Action}
		}
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

func refundView(tx *payment.Transaction) RefundView { return refundViewOf(tx, tx.Refund) }

func refundViewOf(tx *payment.Transaction, r *payment.Refund) RefundView {
	v := RefundView{RefundID: r.ID, Status: r.Status, TransactionID: tx.ID, TransactionNumber: tx.Number,
		PaymentRequestID: tx.PaymentRequestID, Amount: payment.DisplayAmount(r.Amount, r.Unit), Unit: r.Unit,
		Code: codes.Code(r.Code), CreatedAt: r.CreatedAt.UTC(), CompletedAt: r.CompletedAt,
		Origin: "service", AcquirerRefundID: r.ProviderRef, FailureReason: r.FailureReason}
	if r.Origin == payment.RefundByAcquirer {
		v.Origin, v.RefundID = "acquirer", r.ProviderRef
	}
	return v
}

func txNotFound(ref string) *errkind.Error {
	return errkind.NotFoundErr("Transaction " + ref + " does not exist.")
}

// TransactionOf loads transaction id of merchant m; another merchant's
// transaction is a 404 (043) like a missing one.
func (s *Service) TransactionOf(ctx context.Context, m *merchant.Merchant, id int64) (*payment.Transaction, error) {
	tx, err := s.txs.Transaction(ctx, id)
	if errkind.Is(err, errkind.NotFound) || (err == nil && tx.MerchantID != m.ID) {
		return nil, txNotFound(strconv.FormatInt(id, 10))
	}
	return tx, err
}

// AsCommitted is tx as the lookups show it. An attempt's outcome is written
// twice: first the request commit, which decides it, then the
// transaction's settle. Between the two (a moment, or until the reconciler
// when the process died there) the request already shows the final status;
// the transaction lookups show the same decision, so a merchant who saw
// the request paid never finds its transaction pending. The stored
// transaction is not changed: its settle still comes from complete.
func (s *Service) AsCommitted(ctx context.Context, tx *payment.Transaction) (*payment.Transaction, error) {
	if tx.Status.Final() {
		return tx, nil
	}
	req, err := s.requests.PaymentRequest(ctx, tx.PaymentRequestID)
	if err != nil {
		return nil, err
	}
	if req.TransactionID != tx.ID || req.TransactionStatus == nil || !req.TransactionStatus.Final() {
		return tx, nil
	}
	c := *tx
	c.Status = *req.TransactionStatus
	if req.LastLog != nil {
		c.Code, c.Message = req.LastLog.Code, req.LastLog.Message
	}
	return &c, nil
}

// TransactionByRef loads a transaction of m by id or by transactionNumber.
func (s *Service) TransactionByRef(ctx context.Context, m *merchant.Merchant, ref string) (*payment.Transaction, error) {
	if id, ok := ParseID(ref); ok {
		return s.TransactionOf(ctx, m, id)
	}
	if !strings.HasPrefix(ref, "TX") || len(ref) != 18 {
		return nil, errkind.BadInput("The id must be a transaction id (a positive integer) or a transaction number (TX…), got "+strconv.Quote(ref)+".", "")
	}
	tx, err := s.txs.TransactionByNumber(ctx, ref)
	if errkind.Is(err, errkind.NotFound) || (err == nil && tx.MerchantID != m.ID) {
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
		if n, total := acquirerRefunded(tx); n > 0 {
			return RefundView{}, errkind.ConflictErr(fmt.Sprintf("Transaction %d was refunded at the acquirer already (%s %s in %d refunds, in Stripe's Dashboard); the service refunds in full only.", id, total, tx.Unit, n), "")
		}
		if rc, ok := s.ProviderOf(ctx, tx).(provider.RefundChecker); ok && !s.Sandbox {
			if err := rc.CheckRefund(provider.Method(tx.Method), tx.Selector, tx.Unit); err != nil {
				return RefundView{}, errkind.ConflictErr(fmt.Sprintf("Transaction %d cannot be refunded through the acquirer: %s", id, err), "")
			}
		}
		got, err := s.refunds.BeginRefund(ctx, tx.ID, m.ID, payment.NewRefund(newRefundID(), tx.Amount, tx.Unit, now), now.Add(s.SyncLease))
		if errkind.Is(err, errkind.Conflict) { // a concurrent call began it
			if got, err = s.txs.Transaction(ctx, tx.ID); err == nil && got.Refund == nil {
				return RefundView{}, errkind.ConflictErr(fmt.Sprintf("Transaction %d cannot be refunded.", id), "")
			}
		}
		if err != nil {
			return RefundView{}, err
		}
		tx = got
	}
	if tx.Refund.Status == payment.RefundProcessing && tx.Refund.ProviderRef == "" {
		// Not answered yet (first call, or a crash): ask. A refund the
		// acquirer answered pending is settled by its events, never asked
		// for again.
		if tx, err = s.finishRefund(ctx, tx); err != nil {
			return RefundView{}, err
		}
	}
	return refundView(tx), nil
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
