package notifier_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/webhook"
)

// TestEventNotificationBodies: a refund's and a dispute's notifications are
// their own events (docs/notifications.md, "Refunds and disputes"): the
// payment's fields with its statuses unchanged (transactionStatusId 1,
// paymentRequestStatusId 1, never 2 for a paid request), then a type and
// the object's fields read from the stored record; signed like every
// notification (X-Signature, and in the JSON variant an embedded signature
// over the event's own signing string). A notification naming an object
// the transaction does not hold is dropped, never sent.
func TestEventNotificationBodies(t *testing.T) {
	ctx := context.Background()
	e := newDelivery(t, 200)
	if failed := e.handle(t, e.ev); len(failed) != 0 { // the payment's own notification
		t.Fatalf("retried %v", failed)
	}
	now := time.Now().UTC()
	tx, err := e.st.BeginRefund(ctx, e.tx, "mer_delivery", payment.NewRefund("RFTEST", decimal.RequireFromString("9.99"), "EUR", now), now)
	if err != nil {
		t.Fatal(err)
	}
	r := *tx.Refund
	r.Status, r.ProviderRef, r.AcquirerStatus = payment.RefundRefunded, "re_1", "succeeded"
	if _, err := e.st.WriteRefund(ctx, e.tx, 0, r, time.Time{}); err != nil {
		t.Fatal(err)
	}
	due := now.Add(10 * 24 * time.Hour).Truncate(time.Second)
	if _, err := e.st.WriteAfter(ctx, e.tx, 0, payment.After{Dispute: &payment.Dispute{ID: "dp_1", Status: "needs_response",
		Reason: "fraudulent", Amount: decimal.RequireFromString("9.99"), Unit: "EUR", EvidenceDueBy: due}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	base := payment.NotifyEvent{RequestID: e.req, MerchantID: "mer_delivery", TransactionID: e.tx,
		TransactionStatusID: payment.TxApproved, PaymentRequestStatusID: payment.RequestPaid, OccurredAt: now}

	post := func(ev payment.NotifyEvent) webhook.Request {
		t.Helper()
		n := e.ep.count()
		if failed := e.handle(t, ev); len(failed) != 0 {
			t.Fatalf("retried %v", failed)
		}
		if e.ep.count() != n+1 {
			t.Fatalf("%s not posted", ev.Type)
		}
		e.ep.mu.Lock()
		defer e.ep.mu.Unlock()
		return e.ep.posts[len(e.ep.posts)-1]
	}

	refund := base
	refund.EventID, refund.Type, refund.ObjectID = "evt_1_rf_RFTEST_refunded", payment.EventRefundSucceeded, "RFTEST"
	got := post(refund)
	if !webhook.VerifyXSignature(got.Body, got.Header.Get(webhook.HeaderXSignature), "pk_test_delivery") {
		t.Fatal("refund notification: X-Signature does not verify")
	}
	v, _ := url.ParseQuery(string(got.Body))
	if v.Get("type") != "refund.succeeded" || v.Get("refundId") != "RFTEST" || v.Get("refundStatus") != "refunded" ||
		v.Get("refundAmount") != "9.99" || v.Get("transactionStatusId") != "1" || v.Get("paymentRequestStatusId") != "1" ||
		got.Header.Get(webhook.HeaderWebhookID) != "msg_"+refund.EventID {
		t.Fatalf("refund notification %s (webhook-id %s)", got.Body, got.Header.Get(webhook.HeaderWebhookID))
	}

	dispute := base
	dispute.EventID, dispute.Type, dispute.ObjectID = "evt_1_dp_front_1", payment.EventDisputeCreated, "dp_1"
	v, _ = url.ParseQuery(string(post(dispute).Body))
	if v.Get("type") != "dispute.created" || v.Get("disputeId") != "dp_1" || v.Get("disputeStatus") != "needs_response" ||
		v.Get("disputeReason") != "fraudulent" || v.Get("disputeAmount") != "9.99" || v.Get("evidenceDueBy") != due.Format(time.RFC3339) ||
		v.Get("disputeUrl") != "https://dashboard.stripe.com/test/disputes/dp_1" || v.Get("transactionStatusId") != "1" {
		t.Fatalf("dispute notification %v", v)
	}

	// The JSON variant: its own shape and signing string.
	m, _ := e.st.Merchant(ctx, "mer_delivery")
	m.NotificationFormat = "json"
	e.st.PutMerchant(m)
	got = post(dispute)
	secret, _ := e.n.Sealer.Open(m.SealedSecret, m.ID)
	j, err := webhook.VerifyJSONEventBody(got.Body, secret)
	if err != nil || j.Type != "dispute.created" || j.Dispute == nil || j.Dispute.ID != "dp_1" || j.Dispute.Amount != "9.99" || j.Refund != nil {
		t.Fatalf("JSON dispute notification %s: %+v %v", got.Body, j, err)
	}
	if _, err := webhook.VerifyJSONBody(got.Body, secret); err != nil {
		t.Fatalf("the receivers' JSON check refuses an event: %v", err)
	}
	var raw map[string]any
	_ = json.Unmarshal(got.Body, &raw)
	if _, ok := raw["status"]; ok {
		t.Fatalf("a dispute's JSON notification carries a payment status: %s", got.Body)
	}
	m.NotificationFormat = ""
	e.st.PutMerchant(m)

	// An object the transaction does not hold: dropped, not posted.
	other := base
	other.EventID, other.Type, other.ObjectID = "evt_1_dp_front_2", payment.EventDisputeCreated, "dp_other"
	n := e.ep.count()
	if failed := e.handle(t, other); len(failed) != 0 || e.ep.count() != n {
		t.Fatalf("a notification of another dispute was posted or retried: %v", failed)
	}
	_ = merchant.Merchant{}
}
