package paycore

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

// The moves of a refund by the acquirer's statuses (docs/stripe.md,
// "Refunds"): processing → refunded | failed, refunded → failed (a late
// failure); failed is final; a stale pending never moves a refund back; a
// repeated status changes nothing.
func TestMoveRefundRules(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		from, acq string
		changed   bool
		to        string
	}{
		{payment.RefundProcessing, "pending", true, payment.RefundProcessing},
		{payment.RefundProcessing, "succeeded", true, payment.RefundRefunded},
		{payment.RefundProcessing, "failed", true, payment.RefundFailed},
		{payment.RefundProcessing, "canceled", true, payment.RefundFailed},
		{payment.RefundRefunded, "failed", true, payment.RefundFailed},
		{payment.RefundRefunded, "succeeded", false, payment.RefundRefunded},
		{payment.RefundRefunded, "pending", false, payment.RefundRefunded},
		{payment.RefundFailed, "succeeded", false, payment.RefundFailed},
		{payment.RefundFailed, "pending", false, payment.RefundFailed},
	} {
		r := payment.Refund{ID: "RF1", Status: c.from}
		if c.from == payment.RefundProcessing && c.acq == "pending" {
			r.AcquirerStatus = ""
		}
		got := moveRefund(&r, c.acq, "re_1", "lost_or_stolen_card", "", now)
		if got != c.changed || r.Status != c.to {
			t.Errorf("%s + %s: changed %v status %s, want %v %s", c.from, c.acq, got, r.Status, c.changed, c.to)
		}
		if r.Status == payment.RefundFailed && c.changed && (r.Code == "" || r.FailureReason == "") {
			t.Errorf("%s + %s: a failure without its code and reason: %+v", c.from, c.acq, r)
		}
	}
	r := payment.Refund{ID: "RF1", Status: payment.RefundProcessing, AcquirerStatus: "pending", ProviderRef: "re_1"}
	if moveRefund(&r, "pending", "re_1", "", "", now) {
		t.Error("the same pending status again changed the refund")
	}
}

// The moves of a dispute (docs/stripe.md, "Disputes"): the event Stripe made
// last decides; an older one only adds a funds flag; a closed dispute never
// reopens; an event applied twice changes nothing; the merchant hears of it
// first as created, whatever came first.
func TestMoveDisputeRules(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	ev := func(id, typ, status string, at time.Time) DisputeResult {
		return DisputeResult{EventID: id, EventType: typ, EventAt: at, DisputeID: "dp_1", Status: status, Reason: "fraudulent",
			Amount: decimal.RequireFromString("10"), Unit: "EUR"}
	}
	d := &payment.Dispute{ID: "dp_1"}
	if !moveDispute(d, ev("e2", payment.EventDisputeUpdated, "under_review", t0.Add(time.Minute)), t0) || d.LastEvent != payment.EventDisputeCreated {
		t.Fatalf("first event (an update): %+v, want recorded and notified as created", d)
	}
	if moveDispute(d, ev("e2", payment.EventDisputeUpdated, "under_review", t0.Add(time.Minute)), t0) {
		t.Fatal("the same event twice changed it")
	}
	if moveDispute(d, ev("e1", payment.EventDisputeCreated, "needs_response", t0), t0) || d.Status != "under_review" {
		t.Fatalf("an older created moved it back: %+v", d)
	}
	if !moveDispute(d, ev("e0", payment.EventDisputeFundsWithdrawn, "needs_response", t0), t0) || !d.FundsWithdrawn || d.Status != "under_review" {
		t.Fatalf("an older funds_withdrawn: %+v, want the flag and the status kept", d)
	}
	if !moveDispute(d, ev("e3", payment.EventDisputeUpdated, "lost", t0.Add(2*time.Minute)), t0) || d.LastEvent != payment.EventDisputeClosed {
		t.Fatalf("an update to lost: %+v, want notified as closed", d)
	}
	if moveDispute(d, ev("e4", payment.EventDisputeUpdated, "needs_response", t0.Add(3*time.Minute)), t0) || d.Status != "lost" {
		t.Fatalf("a closed dispute reopened: %+v", d)
	}
}
