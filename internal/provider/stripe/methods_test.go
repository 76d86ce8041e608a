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
	"github.com/payreq/payreq/internal/payment"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// TestProductionMethodsThroughStripe runs every method class the sandbox
// sells through the Stripe connector on the local production stack, as a
// merchant calls them: UPI (selector 30), QR (Pix in BRL), an alternative
// method (selector 27, Cash App Pay in USD), each pending with its next
// action until Stripe's signed webhook settles it, with the merchant's
// notification and the status; a wallet token through /payments/walletA
// charged as a card; a QR that expires leaves the request payable again
// with a new code; and a method the routing cannot serve in the request's
// currency refused with 020 before any Stripe call.
//
// stripe-mock answers every intent from one fixture with no next action:
// the recording front answers a confirmed intent of each payment method
// type with the next action Stripe documents for it (the OpenAPI
// description embedded in stripe-mock), and records what the service sent.
func TestProductionMethodsThroughStripe(t *testing.T) {
	front := startRecordingFront(t, stripetest.Start(t, stripemock.Succeeded))
	exp := time.Now().Add(30 * time.Minute).Unix()
	front.answerWith("upi", map[string]any{"type": "upi_handle_redirect_or_display_qr_code",
		"upi_handle_redirect_or_display_qr_code": map[string]any{"hosted_instructions_url": "https://payments.stripe.com/upi/instructions/test",
			"qr_code": map[string]any{"data": "upi://pay?pa=stripe@upi&am=500.00", "expires_at": exp, "image_url_png": "https://qr.stripe.com/upi.png", "image_url_svg": "https://qr.stripe.com/upi.svg"}}})
	front.answerWith("pix", map[string]any{"type": "pix_display_qr_code", "pix_display_qr_code": map[string]any{
		"data": "00020101021226880014br.gov.bcb.pix-first", "expires_at": exp, "hosted_instructions_url": "https://payments.stripe.com/pix/instructions/test",
		"image_url_png": "https://qr.stripe.com/pix.png", "image_url_svg": "https://qr.stripe.com/pix.svg"}})
	front.answerWith("promptpay", map[string]any{"type": "promptpay_display_qr_code", "promptpay_display_qr_code": map[string]any{
		"data": "00020101021230promptpay-test", "hosted_instructions_url": "https://payments.stripe.com/promptpay/instructions/test",
		"image_url_png": "https://qr.stripe.com/promptpay.png", "image_url_svg": "https://qr.stripe.com/promptpay.svg"}})
	front.answerWith("cashapp", map[string]any{"type": "cashapp_handle_redirect_or_display_qr_code", "cashapp_handle_redirect_or_display_qr_code": map[string]any{
		"hosted_instructions_url": "https://payments.stripe.com/cashapp/instructions/test", "mobile_auth_url": "https://cash.app/pay/test",
		"qr_code": map[string]any{"expires_at": exp, "image_url_png": "https://qr.stripe.com/cashapp.png", "image_url_svg": "https://qr.stripe.com/cashapp.svg"}}})

	const whsec = "whsec_methods_test_secret"
	stack := startProductionStack(t, front.URL, whsec)
	ctx := context.Background()
	base, key := stack.Info.APIBase, stack.Info.Merchant.APIKey
	payer := func(kv ...string) map[string]any {
		p := map[string]any{"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
			"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE"}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return p
	}
	create := func(amount, unit string) int64 {
		t.Helper()
		r := testenv.Do(t, "POST", base+"/payment-requests", key, `{"amount":`+amount+`,"unit":"`+unit+`","notifyUrl":"https://shop.example/notify"}`)
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		return int64(r.JSON(t)["id"].(float64))
	}
	lastIntent := func() map[string]string {
		got := front.created()
		if len(got) == 0 {
			t.Fatal("no PaymentIntent reached Stripe")
		}
		out := map[string]string{}
		for k, v := range got[len(got)-1] {
			out[k] = v[0]
		}
		return out
	}
	n := 0
	event := func(typ string, tx *payment.Transaction, amount int64, cur, status string) map[string]any {
		t.Helper()
		n++
		pi := map[string]any{"id": tx.ProviderRef, "object": "payment_intent", "status": status, "amount": amount, "currency": cur,
			"metadata": map[string]string{stripeprov.MetaTransactionID: strconv.FormatInt(tx.ID, 10),
				stripeprov.MetaPaymentRequestID: strconv.FormatInt(tx.PaymentRequestID, 10), stripeprov.MetaReference: tx.Reference}}
		if status == "requires_payment_method" {
			pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "payment_intent_payment_attempt_expired"}
		}
		body, _ := json.Marshal(map[string]any{"id": "evt_methods_" + strconv.Itoa(n), "object": "event", "type": typ,
			"api_version": "2025-01-27.acacia", "created": time.Now().Unix(), "livemode": false, "data": map[string]any{"object": pi}})
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: whsec, Timestamp: time.Now()})
		r := testenv.Do(t, "POST", base+"/callbacks/svcwh", "", body, "Stripe-Signature", signed.Header)
		if r.Status != 200 {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		return r.JSON(t)
	}
	tx := func(res map[string]any) *payment.Transaction {
		t.Helper()
		got, err := stack.Store.Transaction(ctx, int64(res["transactionId"].(float64)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	notified := func(prID int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			d, err := stack.Store.Deliveries(ctx, prID, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(d) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no notification attempt recorded for payment request %d", prID)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	status := func(prID int64) map[string]any {
		t.Helper()
		return testenv.Do(t, "GET", base+"/payment-requests/status/"+strconv.FormatInt(prID, 10), key, nil).JSON(t)
	}
	pending := func(name string, r testenv.Response, wantType string) map[string]any {
		t.Helper()
		v := r.JSON(t)
		na, _ := v["nextAction"].(map[string]any)
		if r.Status != 200 || v["transactionStatusId"] != 3.0 || na == nil || na["type"] != wantType || na["qrPayload"] == "" {
			t.Fatalf("%s: %d %s, want pending with a %s next action", name, r.Status, r.Body, wantType)
		}
		return v
	}
	settle := func(name string, res map[string]any, amount int64, cur string) {
		t.Helper()
		prID := int64(res["paymentRequestId"].(float64))
		if ack := event("payment_intent.succeeded", tx(res), amount, cur, "succeeded"); ack["changed"] != true {
			t.Fatalf("%s: webhook %v", name, ack)
		}
		st := status(prID)
		ll, _ := st["lastLog"].(map[string]any)
		if st["paymentRequestStatusId"] != 1.0 || st["transactionStatusId"] != 1.0 || ll["transactionStatusId"] != 1.0 || ll["code"] != "" {
			t.Fatalf("%s: status after the webhook %v", name, st)
		}
		notified(prID)
	}

	// UPI, selector 30: the request is created by the call (amount + unit).
	body := payer("upiId", "ann@okbank")
	body["amount"], body["unit"] = 500, "INR"
	res := pending("UPI", testenv.Do(t, "POST", base+"/payments/h2h/30", key, body), "upi_collect")
	if pi := lastIntent(); pi["payment_method_types[0]"] != "upi" || pi["payment_method_data[type]"] != "upi" || pi["amount"] != "50000" || pi["currency"] != "inr" {
		t.Fatalf("UPI intent: %v", pi)
	}
	settle("UPI", res, 50000, "inr")

	// QR: Pix for a BRL request.
	brl := create("100", "BRL")
	res = pending("QR", testenv.Do(t, "POST", base+"/payments/qr/"+strconv.FormatInt(brl, 10), key, payer()), "qr")
	if pi := lastIntent(); pi["payment_method_types[0]"] != "pix" || pi["amount"] != "10000" || pi["currency"] != "brl" || pi["payment_method_data[billing_details][email]"] == "" {
		t.Fatalf("QR intent: %v", pi)
	}
	if na := res["nextAction"].(map[string]any); na["qrPayload"] != "00020101021226880014br.gov.bcb.pix-first" {
		t.Fatalf("QR next action: %v", na)
	}
	settle("QR", res, 10000, "brl")

	// A QR that expires: Stripe fails the intent, the request stays unpaid
	// and a new attempt gets a new code.
	brl2 := create("42.50", "BRL")
	res = pending("QR to expire", testenv.Do(t, "POST", base+"/payments/qr/"+strconv.FormatInt(brl2, 10), key, payer()), "qr")
	if ack := event("payment_intent.payment_failed", tx(res), 4250, "brl", "requires_payment_method"); ack["changed"] != true {
		t.Fatalf("expired QR webhook: %v", ack)
	}
	if st := status(brl2); st["paymentRequestStatusId"] != 2.0 || st["transactionStatusId"] != 2.0 {
		t.Fatalf("after the expiry: %v, want unpaid with a declined attempt", st)
	}
	front.answerWith("pix", map[string]any{"type": "pix_display_qr_code", "pix_display_qr_code": map[string]any{
		"data": "00020101021226880014br.gov.bcb.pix-second", "expires_at": exp, "hosted_instructions_url": "https://payments.stripe.com/pix/instructions/test2",
		"image_url_png": "https://qr.stripe.com/pix2.png", "image_url_svg": "https://qr.stripe.com/pix2.svg"}})
	again := pending("QR again", testenv.Do(t, "POST", base+"/payments/qr/"+strconv.FormatInt(brl2, 10), key, payer()), "qr")
	if na := again["nextAction"].(map[string]any); na["qrPayload"] != "00020101021226880014br.gov.bcb.pix-second" || again["transactionId"] == res["transactionId"] {
		t.Fatalf("new attempt after expiry: %v", again)
	}

	// Alternative method 27: Cash App Pay in USD.
	body = payer()
	body["amount"], body["unit"] = 12.5, "USD"
	res = pending("alternative 27", testenv.Do(t, "POST", base+"/payments/h2h/27", key, body), "qr")
	if pi := lastIntent(); pi["payment_method_types[0]"] != "cashapp" || pi["amount"] != "1250" || pi["currency"] != "usd" {
		t.Fatalf("Cash App intent: %v", pi)
	}
	settle("alternative 27", res, 1250, "usd")

	// PromptPay (QR in THB) is paid, but Stripe cannot refund it through
	// its API: the refund endpoint says so, and writes nothing.
	thb := create("300", "THB")
	res = pending("PromptPay", testenv.Do(t, "POST", base+"/payments/qr/"+strconv.FormatInt(thb, 10), key, payer()), "qr")
	if pi := lastIntent(); pi["payment_method_types[0]"] != "promptpay" || pi["amount"] != "30000" || pi["currency"] != "thb" {
		t.Fatalf("PromptPay intent: %v", pi)
	}
	settle("PromptPay", res, 30000, "thb")
	rf := testenv.Do(t, "GET", base+"/payments/h2h/refund/"+strconv.FormatInt(int64(res["transactionId"].(float64)), 10), key, nil)
	if v := rf.JSON(t); rf.Status != 409 || !strings.Contains(v["detail"].(string), "PromptPay") {
		t.Fatalf("PromptPay refund: %d %s, want 409 saying why", rf.Status, rf.Body)
	}
	if got := tx(res); got.Refund != nil {
		t.Fatalf("refused refund recorded: %+v", got.Refund)
	}

	// A wallet token (Google Pay tokenized for Stripe) is charged as a card
	// payment method made from the token.
	eur := create("30", "EUR")
	wr := testenv.Do(t, "POST", base+"/payments/walletA/"+strconv.FormatInt(eur, 10), key, payer("token", "tok_visa"))
	if v := wr.JSON(t); wr.Status != 200 || v["transactionStatusId"] != 1.0 || v["paymentRequestStatusId"] != 1.0 {
		t.Fatalf("wallet payment: %d %s", wr.Status, wr.Body)
	}
	if pi := lastIntent(); pi["payment_method_types[0]"] != "card" || pi["amount"] != "3000" || pi["payment_method"] == "" {
		t.Fatalf("wallet intent: %v", pi)
	}

	// Apple Pay on the hosted page reaches the API as the card PaymentMethod
	// Stripe.js made (pm_…): the intent charges it as is (wallet B, 48).
	body = payer("token", "pm_card_visa")
	body["amount"], body["unit"] = 31, "EUR"
	wr = testenv.Do(t, "POST", base+"/payments/h2h/48", key, body)
	if v := wr.JSON(t); wr.Status != 200 || v["transactionStatusId"] != 1.0 {
		t.Fatalf("Apple Pay PaymentMethod: %d %s", wr.Status, wr.Body)
	}
	if pi := lastIntent(); pi["payment_method"] != "pm_card_visa" || pi["amount"] != "3100" || pi["payment_method_types[0]"] != "card" {
		t.Fatalf("Apple Pay intent: %v", pi)
	}
	// One Stripe does not know is the spec's invalid token (048), and the
	// request stays payable.
	wr = testenv.Do(t, "POST", base+"/payments/walletA/"+strconv.FormatInt(create("32", "EUR"), 10), key, payer("token", unknownPaymentMethod))
	if v := wr.JSON(t); wr.Status != 200 || v["transactionStatusId"] != 2.0 || v["paymentRequestStatusId"] != 2.0 || fmt.Sprint(v["lastLog"]) != "map[code:048 message:Invalid token transactionStatusId:2]" {
		t.Fatalf("unknown PaymentMethod: %d %s, want declined 048 and the request unpaid", wr.Status, wr.Body)
	}

	// Routing by currency, before any Stripe call: QR in EUR, UPI in EUR,
	// Cash App in EUR are 400 020.
	sent := len(front.created())
	if r := testenv.Do(t, "POST", base+"/payments/qr/"+strconv.FormatInt(create("10", "EUR"), 10), key, payer()); r.Status != 400 || r.JSON(t)["code"] != "020" {
		t.Fatalf("QR in EUR: %d %s", r.Status, r.Body)
	}
	for _, sel := range []string{"30", "27"} {
		body = payer("upiId", "ann@okbank")
		body["amount"], body["unit"] = 10, "EUR"
		if r := testenv.Do(t, "POST", base+"/payments/h2h/"+sel, key, body); r.Status != 400 || r.JSON(t)["code"] != "020" {
			t.Fatalf("selector %s in EUR: %d %s", sel, r.Status, r.Body)
		}
	}
	if got := len(front.created()); got != sent {
		t.Fatalf("%d PaymentIntents created for refused routes", got-sent)
	}

	// The hosted page offers what the routing serves in the request's
	// currency, and no typed wallet token outside the sandbox.
	s := testenv.Do(t, "POST", base+"/payment-requests/"+strconv.FormatInt(create("20", "BRL"), 10)+"/checkout-session", key, nil)
	tok := s.JSON(t)["token"].(string)
	if ms := testenv.Do(t, "GET", base+"/checkout/api/session", "", nil, "X-Checkout-Token", tok).JSON(t)["methods"]; fmtList(ms) != "card,qr" {
		t.Fatalf("hosted page methods for BRL: %v", ms)
	}
	// The hosted page's QR tab shows Stripe's Pix code: its payload and the
	// image the page draws from it.
	hp := testenv.Do(t, "POST", base+"/checkout/api/pay/qr", "", nil, "X-Checkout-Token", tok)
	na, _ := hp.JSON(t)["nextAction"].(map[string]any)
	if hp.Status != 200 || na == nil || na["qrPayload"] != "00020101021226880014br.gov.bcb.pix-second" || !strings.HasPrefix(fmt.Sprint(na["qrImage"]), "data:image/png;base64,") {
		t.Fatalf("hosted page QR: %d %s", hp.Status, hp.Body)
	}
}

func fmtList(v any) string {
	l, _ := v.([]any)
	out := ""
	for i, x := range l {
		if i > 0 {
			out += ","
		}
		out += x.(string)
	}
	return out
}
