package lostanswer

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// payOnTheHostedPage pays the run's request by card on the hosted page,
// as a shopper does (Stripe's test card on the production stage).
func payOnTheHostedPage(r *run, number string) map[string]any {
	r.t.Helper()
	s := expect(r, "session", testenv.Do(r.t, "POST", r.api+"/payment-requests/"+strconv.FormatInt(r.requestID, 10)+"/checkout-session", r.m.APIKey, nil), 201)
	resp := testenv.Do(r.t, "POST", r.api+"/checkout/api/pay/card", "",
		`{"holderName":"Ann Lee","number":"`+number+`","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", s["token"].(string))
	return approvedPayment(r, "pay on the hosted page", resp)
}

// paidOnStripe is a setup: a request paid on the hosted page; its
// transaction and Stripe's PaymentIntent in vars; its notification in.
func paidOnStripe(r *run) {
	r.requestID = createRequest(r)
	res := payOnTheHostedPage(r, "4242 4242 4242 4242")
	txID := idOf(r, res["paymentId"])
	r.vars["tx"] = strconv.FormatInt(txID, 10)
	tx, err := testenv.PatientStore(r.t, r.st).Transaction(context.Background(), txID)
	if err != nil {
		r.t.Fatal(err)
	}
	r.vars["pi"] = tx.ProviderRef
	checkNotified(r, &payment.Request{ID: r.requestID}, nil, 1)
}

// TestLostAnswerProduction runs the sweep on the production stage: the
// Stripe connector against stripe-mock behind a front that keeps state as
// Stripe does (saved results per Idempotency-Key, refunds, disputes) and
// sends Stripe's signed events to the webhook endpoint.
func TestLostAnswerProduction(t *testing.T) {
	stg := production(t)

	t.Run("hosted page", func(t *testing.T) {
		sweepOn(t, stg, path{name: "pay on the hosted page (Stripe)", setup: withRequest,
			act:  func(r *run) { payOnTheHostedPage(r, "4242 4242 4242 4242") },
			want: paidOnce})
	})

	t.Run("refund settled by Stripe's event", func(t *testing.T) {
		stg.front.AnswerRefunds("pending")
		defer stg.front.AnswerRefunds("")
		sweepOn(t, stg, path{name: "refund (Stripe: pending, then refund.updated)", setup: paidOnStripe,
			act: func(r *run) {
				res := expect(r, "refund", testenv.Do(r.t, "GET", r.api+"/payments/h2h/refund/"+r.vars["tx"], r.m.APIKey, nil), 200)
				re, _ := res["acquirerRefundId"].(string)
				if res["status"] != "processing" || re == "" {
					r.t.Fatalf("refund Stripe answered pending: %v", res)
				}
				ans, err := stg.front.SettleRefund(re, "succeeded", "")
				if err != nil || ans[0].Status != 200 {
					r.t.Fatalf("refund.updated: %v %+v", err, ans)
				}
				deadline := time.Now().Add(15 * time.Second)
				for {
					res = expect(r, "refund", testenv.Do(r.t, "GET", r.api+"/payments/h2h/refund/"+r.vars["tx"], r.m.APIKey, nil), 200)
					if res["status"] == "refunded" {
						break
					}
					if time.Now().After(deadline) {
						r.t.Fatalf("refund after its event: %v", res)
					}
					time.Sleep(100 * time.Millisecond)
				}
				if n := len(stg.front.RefundsOf(r.vars["pi"])); n != 1 {
					r.t.Fatalf("%d refunds at Stripe, want 1", n)
				}
			},
			want: want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true, events: []string{"refund.succeeded"}}})
	})

	t.Run("dispute from Stripe's event", func(t *testing.T) {
		sweepOn(t, stg, path{name: "a Stripe event (charge.dispute.created)", setup: paidOnStripe,
			act: func(r *run) {
				due := time.Now().Add(14 * 24 * time.Hour).Truncate(time.Second).UTC()
				ans, err := stg.front.Dispute("charge.dispute.created", "dp_"+r.vars["tx"], r.vars["pi"], 2500, "fraudulent", "needs_response", due)
				if err != nil || ans.Status != 200 {
					r.t.Fatalf("charge.dispute.created: %v %d %s (a lost answer must not cost the event)", err, ans.Status, ans.Body)
				}
				view := expect(r, "transaction", testenv.Do(r.t, "GET", r.api+"/transactions/"+r.vars["tx"], r.m.APIKey, nil), 200)
				if d, _ := view["dispute"].(map[string]any); d == nil || d["status"] != "needs_response" {
					r.t.Fatalf("dispute on the transaction: %v", view["dispute"])
				}
			},
			want: want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true, events: []string{"dispute.created"}}})
	})
}
