package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testing/needs"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// The money paths after Stripe's first answer, killed at their crash
// points on the production stage: stripe-mock behind a front that keeps
// Stripe's state and signs events as Stripe does (stripetest.Front). Stripe
// sends an event again when its delivery got no 2xx answer (a dead process
// answers nothing); the test plays that retry.

const afterSecret = "whsec_crash_after"

func startAfterFront(t *testing.T) *stripetest.Front {
	t.Helper()
	front, err := stripetest.NewFront(stripetest.Start(t, stripemock.Succeeded))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	return front.KeepState()
}

func productionArgs(front *stripetest.Front) []string {
	return []string{"-stage", "production", "-param", "LocalStripeSecretKey=sk_test_crash",
		"-param", "LocalStripeApiBase=" + front.URL, "-param", "LocalStripeWebhookSecrets=" + afterSecret}
}

// startOn starts the stack and points the front's events at it.
func startOn(t *testing.T, front *stripetest.Front, dir, crashAt string) *proc {
	t.Helper()
	p := startStack(t, dir, crashAt, productionArgs(front)...)
	front.SendEventsTo(p.info.APIBase+"/callbacks/svcwh", afterSecret)
	return p
}

// payApplePM pays an amount through the wallet route with a Stripe
// PaymentMethod (a card payment at Stripe) and returns the answer.
func payApplePM(t *testing.T, p *proc, amount string) map[string]any {
	t.Helper()
	r := p.call("POST", "/payments/h2h/48", "", payerBody("amount", amount, "unit", "EUR", "token", "pm_card_visa"))
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("payment: %v %d %s", r.err, r.status, r.body)
	}
	return r.json(t)
}

// waitDelivery waits for an attempt of notification eventID.
func waitDelivery(t *testing.T, p *proc, requestID int64, eventID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := p.store(t).Deliveries(context.Background(), requestID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.EventID == eventID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification %s of request %d never attempted", eventID, requestID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCrashInRefundEvent: Stripe answered a refund pending; its
// refund.updated (succeeded) reaches the stack, which dies after storing
// the refunded status and before queueing the merchant's notification.
// Stripe's retry of the event (the first got no answer) finishes it: the
// refund is refunded once, Stripe was asked to refund once, and the
// merchant's refund.succeeded notification goes out.
func TestCrashInRefundEvent(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	t.Parallel() // mostly Stripe's wait before its retry: side by side with the other waits
	front := startAfterFront(t)
	front.AnswerRefunds("pending")
	dir := t.TempDir()
	p := startOn(t, front, dir, crashpoint.InRefundEvent)
	res := payApplePM(t, p, "42.00")
	txID, reqID := int64(res["transactionId"].(float64)), int64(res["paymentRequestId"].(float64))
	rf := p.call("GET", "/payments/h2h/refund/"+strconv.FormatInt(txID, 10), "", "")
	if rf.err != nil || rf.status != http.StatusOK || rf.json(t)["status"] != "processing" {
		t.Fatalf("refund: %v %d %s", rf.err, rf.status, rf.body)
	}
	re := rf.json(t)["acquirerRefundId"].(string)
	obj := front.Refund(re)
	obj["status"] = "succeeded"
	body := front.Event("refund.updated", obj)
	if a, err := front.Post(body); err == nil {
		t.Fatalf("the stack answered the event it should have died in: %d %s", a.Status, a.Body)
	}
	p.died()

	p = startOn(t, front, dir, "")
	time.Sleep(16 * time.Second) // Stripe's first retry comes later than this
	a, err := front.Post(body)
	if err != nil || a.Status != http.StatusOK {
		t.Fatalf("Stripe's retry: %v %d %s", err, a.Status, a.Body)
	}
	tx, err := p.store(t).Transaction(context.Background(), txID)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Refund == nil || tx.Refund.Status != payment.RefundRefunded {
		t.Fatalf("refund after the crash and the retry: %+v", tx.Refund)
	}
	if n := front.RefundPosts.Load(); n != 1 {
		t.Fatalf("Stripe was asked to refund %d times, want once", n)
	}
	waitDelivery(t, p, reqID, fmt.Sprintf("evt_%d_rf_%s_refunded", txID, tx.Refund.ID))
	auditClean(t, p)
}

// TestCrashInLateVoid: a charge succeeds at Stripe after its transaction
// was declined; the stack records the late charge and dies before asking
// for the void. Stripe's retry of the event (or, without one, the
// reconciler) asks for it: one refund at Stripe, the transaction still
// declined, the late charge voided.
func TestCrashInLateVoid(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	t.Parallel() // mostly Stripe's wait before its retry: side by side with the other waits
	front := startAfterFront(t)
	front.ModifyIntents(func(form url.Values, pi map[string]any) {
		if form.Get("amount") == "1313" {
			pi["status"] = "requires_payment_method"
			pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "generic_decline"}
		}
	})
	dir := t.TempDir()
	p := startOn(t, front, dir, crashpoint.InLateVoid)
	res := payApplePM(t, p, "13.13")
	if res["transactionStatusId"] != 2.0 {
		t.Fatalf("payment: %v (want declined)", res)
	}
	txID := int64(res["transactionId"].(float64))
	tx, err := p.store(t).Transaction(context.Background(), txID)
	if err != nil {
		t.Fatal(err)
	}
	front.SetIntentStatus(tx.ProviderRef, "succeeded")
	body := front.Event("payment_intent.succeeded", front.Intent(tx.ProviderRef))
	if a, err := front.Post(body); err == nil {
		t.Fatalf("the stack answered the event it should have died in: %d %s", a.Status, a.Body)
	}
	p.died()
	if n := len(front.RefundsOf(tx.ProviderRef)); n != 0 {
		t.Fatalf("%d refunds before the void was asked", n)
	}

	p = startOn(t, front, dir, "")
	time.Sleep(16 * time.Second)
	a, err := front.Post(body)
	if err != nil || a.Status != http.StatusOK || strings.Contains(string(a.Body), `"ignored":true`) {
		t.Fatalf("Stripe's retry: %v %d %s", err, a.Status, a.Body)
	}
	if _, err := front.Post(body); err != nil { // and once more: nothing new
		t.Fatal(err)
	}
	got, err := p.store(t).Transaction(context.Background(), txID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != payment.TxDeclined || got.After == nil || got.After.LateCharge == nil || got.After.LateCharge.Status != payment.LateVoided {
		t.Fatalf("after the crash and the retry: status %d, after %+v", got.Status, got.After)
	}
	if rs := front.RefundsOf(tx.ProviderRef); len(rs) != 1 {
		t.Fatalf("refunds of the late charge at Stripe: %d, want 1", len(rs))
	}
	auditClean(t, p)
}
