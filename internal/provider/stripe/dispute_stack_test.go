package stripe_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/testing/stripetest"
)

// disputeEvent is the merchant notification's event id of Stripe event a.
func disputeEvent(txID int64, a stripetest.EventAnswer) string {
	return fmt.Sprintf("evt_%d_dp_%s", txID, strings.TrimPrefix(a.EventID, "evt_"))
}

// TestDisputesAreRecordedAndNotified: Stripe reports a dispute weeks after
// the payment (charge.dispute.created, .funds_withdrawn, .updated, .closed,
// .funds_reinstated; docs.stripe.com/disputes). On the local production
// stack each is recorded on the transaction (GET /transactions/{id} shows
// status, reason, amount, evidence due date and the Stripe Dashboard link
// where the evidence is submitted) and notified to the merchant with its
// own type (the payment stays approved and paid; the body is
// TestEventNotificationBodies's, internal/notifier); the same
// event 30 times at once changes it once; an event older than the last
// applied never moves the status back; a closed dispute never reopens.
// Before, every dispute event was answered {"ignored":true}.
func TestDisputesAreRecordedAndNotified(t *testing.T) {
	e := startAfter(t)
	tx := e.paid(t, "80.00", "EUR")
	pr := tx.PaymentRequestID

	due := time.Now().Add(14 * 24 * time.Hour).Truncate(time.Second).UTC()
	created, err := e.front.Dispute("charge.dispute.created", "dp_after1", tx.ProviderRef, 8000, "fraudulent", "needs_response", due)
	if err != nil {
		t.Fatal(err)
	}
	if a := ack(t, created); created.Status != 200 || a["changed"] != true {
		t.Fatalf("charge.dispute.created: %d %s", created.Status, created.Body)
	}
	view := e.view(t, tx.ID)
	d, _ := view["dispute"].(map[string]any)
	if d == nil || d["id"] != "dp_after1" || d["status"] != "needs_response" || d["reason"] != "fraudulent" || d["amount"] != 80.0 ||
		d["evidenceDueBy"] != due.Format(time.RFC3339) || d["dashboardUrl"] != "https://dashboard.stripe.com/test/disputes/dp_after1" {
		t.Fatalf("dispute on GET /transactions/%d: %v", tx.ID, view["dispute"])
	}
	if view["transactionStatusId"] != 1.0 {
		t.Fatalf("a disputed payment's status is %v, want still approved (1)", view["transactionStatusId"])
	}
	e.notified(t, pr, disputeEvent(tx.ID, created))

	withdrawn, _ := e.front.Dispute("charge.dispute.funds_withdrawn", "dp_after1", tx.ProviderRef, 8000, "fraudulent", "needs_response", due)
	if ack(t, withdrawn)["changed"] != true {
		t.Fatalf("funds_withdrawn: %s", withdrawn.Body)
	}
	e.notified(t, pr, disputeEvent(tx.ID, withdrawn))

	// The same update delivered 30 times at once: one change, one notification.
	if a, _ := e.front.Dispute("charge.dispute.updated", "dp_after1", tx.ProviderRef, 8000, "fraudulent", "under_review", due); ack(t, a)["changed"] != true {
		t.Fatalf("updated: %s", a.Body)
	}
	obj := map[string]any{"id": "dp_after1", "object": "dispute", "amount": 8000, "currency": "eur", "reason": "fraudulent",
		"status": "under_review", "payment_intent": tx.ProviderRef, "evidence_details": map[string]any{"due_by": due.Unix()}}
	body := e.front.Event("charge.dispute.updated", obj)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changed int
	)
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.front.Post(body)
			if err != nil || a.Status != 200 {
				t.Errorf("delivery: %v %d %s", err, a.Status, a.Body)
				return
			}
			if ack(t, a)["changed"] == true {
				mu.Lock()
				changed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if changed != 0 {
		t.Fatalf("30 deliveries of an update already applied changed it %d times", changed)
	}
	fresh := map[string]any{"id": "dp_after1", "object": "dispute", "amount": 8000, "currency": "eur", "reason": "fraudulent",
		"status": "under_review", "payment_intent": tx.ProviderRef, "evidence_details": map[string]any{"due_by": due.Unix()}}
	fresh["metadata"] = map[string]any{"n": "2"}
	body = e.front.Event("charge.dispute.funds_reinstated", fresh)
	changed = 0
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.front.Post(body)
			if err != nil || a.Status != 200 {
				t.Errorf("delivery: %v %d %s", err, a.Status, a.Body)
				return
			}
			if ack(t, a)["changed"] == true {
				mu.Lock()
				changed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if changed != 1 {
		t.Fatalf("30 deliveries of one dispute event at once changed it %d times, want once", changed)
	}
	var ev struct{ ID string }
	_ = json.Unmarshal(body, &ev)
	reinstated := fmt.Sprintf("evt_%d_dp_%s", tx.ID, strings.TrimPrefix(ev.ID, "evt_"))
	e.notified(t, pr, reinstated)
	time.Sleep(2 * time.Second) // a second message, if any, would be attempted by now
	if c := e.firstAttempts(t, pr, reinstated); c != 1 {
		t.Fatalf("dispute.funds_reinstated notification queued %d times, want once", c)
	}

	// Closed: won. A stale event (the first, delivered again) never moves
	// it back, and a closed dispute never reopens.
	closed, _ := e.front.Dispute("charge.dispute.closed", "dp_after1", tx.ProviderRef, 8000, "fraudulent", "won", due)
	if ack(t, closed)["changed"] != true {
		t.Fatalf("closed: %s", closed.Body)
	}
	e.notified(t, pr, disputeEvent(tx.ID, closed))
	if a, err := e.front.Post(e.front.Event("charge.dispute.updated", map[string]any{"id": "dp_after1", "object": "dispute", "amount": 8000,
		"currency": "eur", "reason": "fraudulent", "status": "needs_response", "payment_intent": tx.ProviderRef})); err != nil || ack(t, a)["changed"] == true {
		t.Fatalf("an update after the close reopened it: %v %s", err, a.Body)
	}
	if d := e.view(t, tx.ID)["dispute"].(map[string]any); d["status"] != "won" || d["fundsWithdrawn"] != true || d["fundsReinstated"] != true {
		t.Fatalf("dispute at the end: %v", d)
	}
	// Another intent's dispute never lands on this transaction.
	if a, _ := e.front.Dispute("charge.dispute.created", "dp_other", "pi_not_ours", 8000, "general", "needs_response", due); ack(t, a)["changed"] == true {
		t.Fatalf("a dispute of another charge changed something: %s", a.Body)
	}
}
