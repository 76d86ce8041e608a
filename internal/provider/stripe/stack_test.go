package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/payreq/payreq/internal/devstack/stripemock"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// TestLocalProductionStack runs the whole local stack in the production
// stage (the Stripe connector, not the sandbox) against stripe-mock, through
// the public HTTP API: a hosted-page card payment approved with its
// notification recorded, a refund, a pending payment settled by a signed
// Stripe webhook, a replay of that webhook changing nothing, and forged and
// stale signatures refused; and the sandbox selector and a method not routed
// in the request's currency refused.
//
// stripe-mock is stateless and answers every PaymentIntent from one
// fixture (patched here to succeeded). It cannot leave an intent
// "processing", so a reverse proxy in front of it rewrites the status of the
// confirmed intent for the one payment that must stay pending; every request
// still reaches stripe-mock and is validated against Stripe's OpenAPI
// description. stripe-mock also cannot send webhooks: the test signs the
// event itself with stripe-go's webhook package, as Stripe would.
func TestLocalProductionStack(t *testing.T) {
	// stripe-mock's one fixture (patched to succeeded) cannot stay
	// processing: the front rewrites the status for the one payment that must.
	front := startRecordingFront(t, stripetest.Start(t, stripemock.Succeeded))
	const whsec = "whsec_local_test_secret"
	stack := startProductionStack(t, front.URL, whsec)
	ctx := context.Background()
	base, key := stack.Info.APIBase, stack.Info.Merchant.APIKey
	if stack.Info.Merchant.Sandbox() {
		t.Fatal("a production stack must seed a production merchant")
	}

	// payByCard creates a request, opens a hosted checkout session and pays
	// it by card, as the hosted page does.
	payByCard := func() (requestID int64, res map[string]any) {
		t.Helper()
		cr := testenv.Do(t, "POST", base+"/payment-requests", key,
			`{"amount":19.99,"unit":"EUR","referenceId":"order-`+strconv.FormatInt(time.Now().UnixNano(), 10)+`","notifyUrl":"https://shop.example/notify","successUrl":"https://shop.example/ok"}`)
		if cr.Status != 201 {
			t.Fatalf("create: %d %s", cr.Status, cr.Body)
		}
		requestID = int64(cr.JSON(t)["id"].(float64))
		id := strconv.FormatInt(requestID, 10)
		s := testenv.Do(t, "POST", base+"/payment-requests/"+id+"/checkout-session", key, nil)
		if s.Status != 201 && s.Status != 200 {
			t.Fatalf("checkout session: %d %s", s.Status, s.Body)
		}
		tok := s.JSON(t)["token"].(string)
		// The hosted page offers only what the connector serves in EUR
		// (no QR method in EUR, no UPI outside INR, no typed wallet token).
		if ms := testenv.Do(t, "GET", base+"/checkout/api/session", "", nil, "X-Checkout-Token", tok).JSON(t)["methods"]; fmt.Sprint(ms) != "[card]" {
			t.Fatalf("hosted page methods in production with Stripe: %v", ms)
		}
		pay := testenv.Do(t, "POST", base+"/checkout/api/pay/card", "",
			`{"holderName":"Ann Lee","number":"4242 4242 4242 4242","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", tok)
		if pay.Status != 200 {
			t.Fatalf("pay: %d %s", pay.Status, pay.Body)
		}
		return requestID, pay.JSON(t)
	}
	txID := func(res map[string]any) int64 { return int64(res["transactionId"].(float64)) }

	// 0. Routing: selector 1 is the sandbox's (400 045 in production); the
	// other methods are routed by currency (TestProductionMethodsThroughStripe),
	// so a QR payment of an EUR request is 400 020, before any Stripe call.
	if r := testenv.Do(t, "POST", base+"/payments/h2h/1", key, `{"amount":5,"unit":"EUR"}`); r.Status != 400 || r.JSON(t)["code"] != "045" {
		t.Fatalf("h2h selector 1 in production: %d %s", r.Status, r.Body)
	}
	cr := testenv.Do(t, "POST", base+"/payment-requests", key, `{"amount":5,"unit":"EUR"}`)
	unpaid := strconv.FormatInt(int64(cr.JSON(t)["id"].(float64)), 10)
	if r := testenv.Do(t, "POST", base+"/payments/qr/"+unpaid, key, `{"name":"Ann Lee","email":"ann@example.com","phoneNumber":"4915112345678","address":"1 Main St","city":"Berlin","state":"BE","postalCode":"10115","country":"DE"}`); r.Status != 400 || r.JSON(t)["code"] != "020" {
		t.Fatalf("QR of an EUR request in production: %d %s", r.Status, r.Body)
	}

	// 1. Approved end to end, notification recorded.
	prID, res := payByCard()
	if res["transactionStatusId"] != 1.0 || res["paymentRequestStatusId"] != 1.0 {
		t.Fatalf("card payment through Stripe: %v", res)
	}
	approved := txID(res)
	tx, err := stack.Store.Transaction(ctx, approved)
	if err != nil || !strings.HasPrefix(tx.ProviderRef, "pi_") {
		t.Fatalf("transaction %d: %+v %v (want the PaymentIntent id as provider reference)", approved, tx, err)
	}
	// The notification leaves the transaction's outbox for the notifier,
	// which records every attempt. shop.example does not resolve offline, so
	// the attempt is recorded as a retry: what matters is that it was made.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := stack.Store.Deliveries(ctx, prID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(d) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification attempt recorded for the approved payment")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 2. Refund through Stripe (stripe-mock's refund fixture has succeeded).
	rf := testenv.Do(t, "GET", base+"/payments/h2h/refund/"+strconv.FormatInt(approved, 10), key, nil)
	if v := rf.JSON(t); rf.Status != 200 || v["status"] != "refunded" {
		t.Fatalf("refund: %d %s", rf.Status, rf.Body)
	}

	// 3. A payment Stripe leaves processing is pending until its webhook.
	front.forceStatus("processing")
	pendingPR, res := payByCard()
	front.forceStatus("")
	if res["transactionStatusId"] != 3.0 {
		t.Fatalf("processing intent: %v (want pending)", res)
	}
	pending := txID(res)
	ptx, err := stack.Store.Transaction(ctx, pending)
	if err != nil {
		t.Fatal(err)
	}
	event, _ := json.Marshal(map[string]any{
		"id": "evt_local_1", "object": "event", "type": "payment_intent.succeeded", "api_version": "2025-01-27.acacia",
		"created": time.Now().Unix(), "livemode": false,
		"data": map[string]any{"object": map[string]any{
			"id": ptx.ProviderRef, "object": "payment_intent", "status": "succeeded", "amount": 1999, "currency": "eur",
			"metadata": map[string]string{stripeprov.MetaTransactionID: strconv.FormatInt(pending, 10),
				stripeprov.MetaPaymentRequestID: strconv.FormatInt(pendingPR, 10), stripeprov.MetaReference: "ptx_" + strconv.FormatInt(pending, 10)},
		}},
	})
	send := func(secret string, at time.Time) testenv.Response {
		t.Helper()
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: secret, Timestamp: at})
		return testenv.Do(t, "POST", base+"/callbacks/svcwh", "", event, "Stripe-Signature", signed.Header)
	}
	status := func() float64 {
		t.Helper()
		v := testenv.Do(t, "GET", base+"/transactions/"+strconv.FormatInt(pending, 10), key, nil).JSON(t)
		f, _ := v["transactionStatusId"].(float64)
		return f
	}

	// Forged (another secret) and stale (older than the 5-minute tolerance)
	// signatures are refused and settle nothing.
	if r := send("whsec_forged", time.Now()); r.Status != 401 {
		t.Fatalf("forged signature: %d %s", r.Status, r.Body)
	}
	if r := send(whsec, time.Now().Add(-10*time.Minute)); r.Status != 401 {
		t.Fatalf("stale signature: %d %s", r.Status, r.Body)
	}
	if st := status(); st != 3 {
		t.Fatalf("after refused webhooks the payment is %v, want pending (3)", st)
	}

	// The signed event settles it.
	r := send(whsec, time.Now())
	if ack := r.JSON(t); r.Status != 200 || ack["changed"] != true || ack["duplicate"] != false {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	if st := status(); st != 1 {
		t.Fatalf("after the webhook the payment is %v, want approved (1)", st)
	}
	// Stripe redelivers: the replay is acknowledged and changes nothing.
	r = send(whsec, time.Now())
	if ack := r.JSON(t); r.Status != 200 || ack["changed"] != false || ack["duplicate"] != true {
		t.Fatalf("replayed webhook: %d %s", r.Status, r.Body)
	}
	if st := status(); st != 1 {
		t.Fatalf("after the replay the payment is %v, want approved (1)", st)
	}
}
