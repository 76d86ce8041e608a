package stripe_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// due makes transaction id's next reconciler look (and a pending attempt's
// window, when it has one) lie in the past, as if that much time had gone
// by: the local stack runs on the real clock.
func (e *afterEnv) due(t *testing.T, id int64) {
	t.Helper()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	past := &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)}
	expr := "SET openUntil = :p"
	tx := e.tx(t, id)
	if !tx.PendingUntil.IsZero() {
		expr += ", pendingUntil = :p"
	}
	_, err = dynamodb.NewFromConfig(cfg).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:        aws.String(e.stack.Tables().Transactions),
		Key:              map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(id, 10)}},
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String("attribute_exists(openUntil)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": past},
	})
	if err != nil {
		t.Fatalf("age transaction %d: %v", id, err)
	}
}

// refund asks for the refund of tx through the API.
func (e *afterEnv) refund(t *testing.T, id int64) map[string]any {
	t.Helper()
	r := testenv.Do(t, "GET", e.base+"/payments/h2h/refund/"+strconv.FormatInt(id, 10), e.key, nil)
	if r.Status != 200 {
		t.Fatalf("refund of %d: %d %s", id, r.Status, r.Body)
	}
	return r.JSON(t)
}

// firstAttempts counts the first delivery attempts of notification eventID
// (one per queued message: a second message of one event would make two).
func (e *afterEnv) firstAttempts(t *testing.T, prID int64, eventID string) int {
	t.Helper()
	ds, err := e.stack.Store.Deliveries(context.Background(), prID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ds {
		if d.EventID == eventID && d.Attempt == 1 {
			n++
		}
	}
	return n
}

// TestRefundsFinishByEvent: Stripe answers a refund pending and settles it
// later by event (docs.stripe.com/refunds). On the local production stack:
//
//   - the API answers the refund processing with Stripe's refund id, and
//     nothing asks Stripe to refund it again: a reconciler pass once it is
//     due only reads it (GET), no second POST;
//   - refund.updated (succeeded) moves it to refunded, charge.refund.updated
//     for the same change is a duplicate; the merchant gets refund.succeeded
//     (its own event, the payment stays approved and paid);
//   - the same refund.updated 30 times at once changes it once and queues
//     one notification;
//   - refund.failed moves a pending refund to failed (refund.failed to the
//     merchant); a refund that succeeded and fails later is failed too and
//     notified again;
//   - a refund made in Stripe's Dashboard (partial here) is recorded from
//     its event, shown on GET /transactions/{id}, notified, and the API's
//     full refund is then refused with a clear 409.
//
// Before, the events were answered {"ignored":true}, the refund stayed
// processing and the reconciler sent it to Stripe again.
func TestRefundsFinishByEvent(t *testing.T) {
	e := startAfter(t)
	e.front.AnswerRefunds("pending")

	t.Run("pending-then-succeeded", func(t *testing.T) {
		tx := e.paid(t, "40.00", "EUR")
		posts := e.front.RefundPosts.Load()
		v := e.refund(t, tx.ID)
		re, _ := v["acquirerRefundId"].(string)
		if v["status"] != "processing" || !strings.HasPrefix(re, "re_") {
			t.Fatalf("refund Stripe answered pending: %v", v)
		}
		// Due for the reconciler: it reads, never asks again.
		e.due(t, tx.ID)
		e.reconcile(t)
		if n := e.front.RefundPosts.Load() - posts; n != 1 {
			t.Fatalf("refund requests sent to Stripe: %d, want 1", n)
		}
		if e.front.RefundReads.Load() == 0 {
			t.Fatal("the due pending refund was not read")
		}
		if got := e.tx(t, tx.ID); got.Refund.Status != payment.RefundProcessing {
			t.Fatalf("refund %+v, want still processing", got.Refund)
		}
		// Stripe settles it: refund.updated then charge.refund.updated.
		ans, err := e.front.SettleRefund(re, "succeeded", "")
		if err != nil {
			t.Fatal(err)
		}
		if a := ack(t, ans[0]); ans[0].Status != 200 || a["changed"] != true {
			t.Fatalf("%s: %d %s", ans[0].Type, ans[0].Status, ans[0].Body)
		}
		if a := ack(t, ans[1]); ans[1].Status != 200 || a["changed"] != false || a["ignored"] == true {
			t.Fatalf("%s: %d %s (want a duplicate)", ans[1].Type, ans[1].Status, ans[1].Body)
		}
		view := e.view(t, tx.ID)
		if rf := view["refund"].(map[string]any); rf["status"] != "refunded" || rf["acquirerRefundId"] != re {
			t.Fatalf("refund after its event: %v", rf)
		}
		if view["transactionStatusId"] != 1.0 {
			t.Fatalf("the refunded payment's status is %v, want still approved (1)", view["transactionStatusId"])
		}
		got := e.tx(t, tx.ID)
		e.notified(t, tx.PaymentRequestID, fmt.Sprintf("evt_%d_rf_%s_refunded", tx.ID, got.Refund.ID))
		if n := e.front.RefundPosts.Load() - posts; n != 1 {
			t.Fatalf("refund requests sent to Stripe: %d, want 1", n)
		}

		// Later, Stripe reports the refund failed (the card was closed):
		// the money is back with the merchant, who hears it.
		ans, err = e.front.SettleRefund(re, "failed", "expired_or_canceled_card")
		if err != nil {
			t.Fatal(err)
		}
		if a := ack(t, ans[0]); ans[0].Status != 200 || a["changed"] != true {
			t.Fatalf("late refund.failed: %d %s", ans[0].Status, ans[0].Body)
		}
		rf := e.view(t, tx.ID)["refund"].(map[string]any)
		if rf["status"] != "failed" || rf["failureReason"] != "expired_or_canceled_card" {
			t.Fatalf("refund after its late failure: %v", rf)
		}
		e.notified(t, tx.PaymentRequestID, fmt.Sprintf("evt_%d_rf_%s_failed", tx.ID, got.Refund.ID))
	})

	t.Run("failed", func(t *testing.T) {
		tx := e.paid(t, "15.00", "EUR")
		re := e.refund(t, tx.ID)["acquirerRefundId"].(string)
		ans, err := e.front.SettleRefund(re, "failed", "lost_or_stolen_card")
		if err != nil {
			t.Fatal(err)
		}
		if ans[0].Type != "refund.failed" || ans[0].Status != 200 || ack(t, ans[0])["changed"] != true {
			t.Fatalf("%s: %d %s", ans[0].Type, ans[0].Status, ans[0].Body)
		}
		rf := e.view(t, tx.ID)["refund"].(map[string]any)
		if rf["status"] != "failed" || rf["code"] == "" {
			t.Fatalf("refund after refund.failed: %v", rf)
		}
		got := e.tx(t, tx.ID)
		e.notified(t, tx.PaymentRequestID, fmt.Sprintf("evt_%d_rf_%s_failed", tx.ID, got.Refund.ID))
	})

	t.Run("30-at-once", func(t *testing.T) {
		tx := e.paid(t, "22.00", "EUR")
		re := e.refund(t, tx.ID)["acquirerRefundId"].(string)
		obj := e.front.Refund(re)
		obj["status"] = "succeeded"
		body := e.front.Event("refund.updated", obj)
		var (
			wg         sync.WaitGroup
			mu         sync.Mutex
			changed    int
			unanswered int // 503: the service's deadline passed; Stripe delivers again
			bad        []string
		)
		deliver := func() {
			a, err := e.front.Post(body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && a.Status == 503:
				unanswered++
			case err != nil || a.Status != 200:
				bad = append(bad, fmt.Sprintf("%v %d %s", err, a.Status, a.Body))
			case ack(t, a)["changed"] == true:
				changed++
			}
		}
		for range 30 {
			wg.Add(1)
			go func() { defer wg.Done(); deliver() }()
		}
		wg.Wait()
		// As Stripe does, a delivery answered 503 is sent again (once each
		// here, one after another). A 503 may hide the change itself (its
		// answer lost after the write): then no answer says changed, and
		// the refund's state and its one notification below prove it.
		for retries := unanswered; retries > 0; retries-- {
			deliver()
		}
		if len(bad) > 0 || changed > 1 || (changed == 0 && unanswered == 0) {
			t.Fatalf("30 deliveries of one refund.updated: %d changed, %d answered 503, failures %v; want exactly one change", changed, unanswered, bad)
		}
		got := e.tx(t, tx.ID)
		if got.Refund.Status != payment.RefundRefunded {
			t.Fatalf("refund %+v", got.Refund)
		}
		ev := fmt.Sprintf("evt_%d_rf_%s_refunded", tx.ID, got.Refund.ID)
		e.notified(t, tx.PaymentRequestID, ev)
		time.Sleep(2 * time.Second) // a second message, if any, would be attempted by now
		if n := e.firstAttempts(t, tx.PaymentRequestID, ev); n != 1 {
			t.Fatalf("refund notification queued %d times, want once", n)
		}
	})

	t.Run("made-in-stripe-dashboard", func(t *testing.T) {
		tx := e.paid(t, "50.00", "EUR")
		r, ans, err := e.front.RefundOutside(tx.ProviderRef, 1250, "succeeded") // 12.50 EUR of 50.00
		if err != nil {
			t.Fatal(err)
		}
		if ans[0].Status != 200 || ack(t, ans[0])["changed"] != true {
			t.Fatalf("refund.created of a Dashboard refund: %d %s", ans[0].Status, ans[0].Body)
		}
		view := e.view(t, tx.ID)
		rfs, _ := view["refunds"].([]any)
		if len(rfs) != 1 {
			t.Fatalf("refunds %v, want the Dashboard's", view["refunds"])
		}
		rf := rfs[0].(map[string]any)
		if rf["refundId"] != r["id"] || rf["origin"] != "acquirer" || rf["status"] != "refunded" || rf["amount"] != 12.5 {
			t.Fatalf("recorded Dashboard refund %v", rf)
		}
		e.notified(t, tx.PaymentRequestID, fmt.Sprintf("evt_%d_rf_%s_refunded", tx.ID, r["id"]))
		// The service refunds in full only: a partly refunded payment is
		// refused with the reason, before anything is sent.
		posts := e.front.RefundPosts.Load()
		resp := testenv.Do(t, "GET", e.base+"/payments/h2h/refund/"+strconv.FormatInt(tx.ID, 10), e.key, nil)
		if resp.Status != 409 || !strings.Contains(string(resp.Body), "in full only") {
			t.Fatalf("API refund after a partial Dashboard refund: %d %s", resp.Status, resp.Body)
		}
		if e.front.RefundPosts.Load() != posts {
			t.Fatal("a refused refund reached Stripe")
		}
	})
	_ = stripetest.EventAnswer{}
}
