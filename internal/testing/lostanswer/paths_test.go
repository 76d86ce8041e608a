package lostanswer

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

func payer(extra map[string]any) map[string]any {
	p := map[string]any{
		"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
		"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// expect fails the run unless resp has the status the call deserved.
func expect(r *run, what string, resp testenv.Response, status int) map[string]any {
	r.t.Helper()
	if resp.Status != status {
		r.t.Fatalf("%s: %d %s; want %d", what, resp.Status, resp.Body, status)
	}
	var m map[string]any
	if len(resp.Body) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(resp.Body, &m); err != nil {
			r.t.Fatalf("%s: %v", what, err)
		}
	}
	return m
}

func idOf(r *run, v any) int64 {
	r.t.Helper()
	switch x := v.(type) {
	case float64:
		return int64(x)
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			r.t.Fatal(err)
		}
		return n
	}
	r.t.Fatalf("id %v", v)
	return 0
}

func createRequest(r *run, headers ...string) int64 {
	r.t.Helper()
	resp := testenv.Do(r.t, "POST", r.api+"/payment-requests", r.m.APIKey,
		`{"amount":25.00,"unit":"EUR","referenceId":"order-1","successUrl":"https://shop.example/ok"}`, headers...)
	return idOf(r, expect(r, "create", resp, 201)["id"])
}

func approvedPayment(r *run, what string, resp testenv.Response) map[string]any {
	r.t.Helper()
	body := expect(r, what, resp, 200)
	if body["transactionStatusId"] != 1.0 || body["paymentRequestStatusId"] != 1.0 {
		r.t.Fatalf("%s: %s; want approved and paid", what, resp.Body)
	}
	return body
}

func nothing(*run) {}

func TestLostAnswerCreate(t *testing.T) {
	sweep(t, path{name: "create without a key", setup: nothing,
		act:  func(r *run) { createRequest(r) },
		want: want{requests: 1}})
}

func TestLostAnswerCreateWithKey(t *testing.T) {
	sweep(t, path{name: "create with a key", setup: nothing,
		act: func(r *run) {
			id := createRequest(r, "Idempotency-Key", "k-"+r.m.ID)
			// The key replays the first answer.
			resp := testenv.Do(r.t, "POST", r.api+"/payment-requests", r.m.APIKey,
				`{"amount":25.00,"unit":"EUR","referenceId":"order-1","successUrl":"https://shop.example/ok"}`, "Idempotency-Key", "k-"+r.m.ID)
			if again := idOf(r, expect(r, "replay", resp, 201)["id"]); again != id || resp.Header.Get("Idempotent-Replayed") != "true" {
				r.t.Fatalf("replay: id %d (first %d), replayed %q", again, id, resp.Header.Get("Idempotent-Replayed"))
			}
		},
		want: want{requests: 1}})
}

func TestLostAnswerCreateAndPay(t *testing.T) {
	sweep(t, path{name: "create and pay (host-to-host card, with a key)", setup: nothing,
		act: func(r *run) {
			body := payer(map[string]any{"amount": 12.5, "unit": "EUR", "referenceId": "cp-1",
				"card": map[string]any{"holderName": "Ann Lee", "number": "4111111111111111", "expiry": "12/30", "cvc": "123"}})
			approvedPayment(r, "create and pay", testenv.Do(r.t, "POST", r.api+"/payments/h2h/1", r.m.APIKey, body, "Idempotency-Key", "cp-"+r.m.ID))
		},
		want: want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true}})
}

func TestLostAnswerPayByCard(t *testing.T) {
	sweep(t, path{name: "pay a request host-to-host by card", setup: func(r *run) { r.requestID = createRequest(r) },
		act: func(r *run) {
			body := payer(map[string]any{"paymentRequestId": r.requestID,
				"card": map[string]any{"holderName": "Ann Lee", "number": "4111111111111111", "expiry": "12/30", "cvc": "123"}})
			approvedPayment(r, "pay", testenv.Do(r.t, "POST", r.api+"/payments/h2h/1", r.m.APIKey, body))
		},
		want: want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true}})
}

func TestLostAnswerHostedPage(t *testing.T) {
	sweep(t, path{name: "pay on the hosted page", setup: func(r *run) {
		r.requestID = createRequest(r)
		s := expect(r, "session", testenv.Do(r.t, "POST", r.api+"/payment-requests/"+strconv.FormatInt(r.requestID, 10)+"/checkout-session", r.m.APIKey, nil), 201)
		r.vars["token"] = s["token"].(string)
	},
		act: func(r *run) {
			resp := testenv.Do(r.t, "POST", r.api+"/checkout/api/pay/card", "",
				`{"holderName":"Ann Lee","number":"4111 1111 1111 1111","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", r.vars["token"])
			approvedPayment(r, "pay on the hosted page", resp)
		},
		want: want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true}})
}

// waitFinal polls the status endpoint until the request's transaction is
// approved or declined, and returns its transactionStatusId.
func waitFinal(r *run, id int64) float64 {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := expect(r, "status", testenv.Do(r.t, "GET", r.api+"/payment-requests/status/"+strconv.FormatInt(id, 10), r.m.APIKey, nil), 200)
		if ts, _ := st["transactionStatusId"].(float64); ts == 1 || ts == 2 {
			return ts
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("request %d not final: %v", id, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pending(r *run, what string, resp testenv.Response) map[string]any {
	r.t.Helper()
	body := expect(r, what, resp, 200)
	if body["transactionStatusId"] != 3.0 {
		r.t.Fatalf("%s: %s; want pending", what, resp.Body)
	}
	return body
}

var paidOnce = want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true}

func withRequest(r *run) { r.requestID = createRequest(r) }

func TestLostAnswerWallet(t *testing.T) {
	sweep(t, path{name: "pay by wallet", setup: withRequest,
		act: func(r *run) {
			approvedPayment(r, "wallet", testenv.Do(r.t, "POST", r.api+"/payments/walletA/"+strconv.FormatInt(r.requestID, 10), r.m.APIKey,
				payer(map[string]any{"token": "tok_success"})))
		},
		want: paidOnce})
}

func TestLostAnswerQR(t *testing.T) {
	sweep(t, path{name: "pay by QR", setup: withRequest,
		act: func(r *run) {
			body := pending(r, "QR", testenv.Do(r.t, "POST", r.api+"/payments/qr/"+strconv.FormatInt(r.requestID, 10), r.m.APIKey, payer(nil)))
			if next, _ := body["nextAction"].(map[string]any); next["type"] != "qr" {
				r.t.Fatalf("QR next action: %v", body)
			}
			if waitFinal(r, r.requestID) != 1 {
				r.t.Fatal("QR payment not approved")
			}
		},
		want: paidOnce})
}

func TestLostAnswerUPI(t *testing.T) {
	sweep(t, path{name: "pay by UPI (the provider's callback settles it)", setup: withRequest,
		act: func(r *run) {
			pending(r, "UPI", testenv.Do(r.t, "POST", r.api+"/payments/h2h/30", r.m.APIKey,
				payer(map[string]any{"paymentRequestId": r.requestID, "upiId": "success@upi"})))
			if waitFinal(r, r.requestID) != 1 {
				r.t.Fatal("UPI payment not approved")
			}
		},
		want: paidOnce})
}

func TestLostAnswerThreeDS(t *testing.T) {
	sweep(t, path{name: "3-D Secure completion", setup: func(r *run) {
		r.requestID = createRequest(r)
		s := expect(r, "session", testenv.Do(r.t, "POST", r.api+"/payment-requests/"+strconv.FormatInt(r.requestID, 10)+"/checkout-session", r.m.APIKey, nil), 201)
		tok := s["token"].(string)
		r.vars["token"] = tok
		res := pending(r, "3-D Secure card", testenv.Do(r.t, "POST", r.api+"/checkout/api/pay/card", "",
			`{"holderName":"Ann Lee","number":"4000000000003220","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", tok))
		r.vars["tx"] = res["paymentId"].(string)
	},
		act: func(r *run) {
			resp := testenv.Do(r.t, "POST", r.api+"/checkout/api/3ds/complete", "",
				`{"transactionId":"`+r.vars["tx"]+`","result":"approve"}`, "X-Checkout-Token", r.vars["token"])
			expect(r, "complete the challenge", resp, 204)
			if waitFinal(r, r.requestID) != 1 {
				r.t.Fatal("3-D Secure payment not approved")
			}
		},
		want: paidOnce})
}

func TestLostAnswerRefund(t *testing.T) {
	sweep(t, path{name: "refund", setup: func(r *run) {
		r.requestID = createRequest(r)
		body := payer(map[string]any{"paymentRequestId": r.requestID,
			"card": map[string]any{"holderName": "Ann Lee", "number": "4111111111111111", "expiry": "12/30", "cvc": "123"}})
		res := approvedPayment(r, "pay", testenv.Do(r.t, "POST", r.api+"/payments/h2h/1", r.m.APIKey, body))
		r.vars["tx"] = strconv.FormatInt(idOf(r, res["transactionId"]), 10)
		checkNotified(r, &payment.Request{ID: r.requestID}, nil, 1) // the payment's own notification, before the sweep counts
	},
		act: func(r *run) {
			deadline := time.Now().Add(20 * time.Second)
			for {
				res := expect(r, "refund", testenv.Do(r.t, "GET", r.api+"/payments/h2h/refund/"+r.vars["tx"], r.m.APIKey, nil), 200)
				if res["status"] == "refunded" {
					return
				}
				if res["status"] != "processing" || time.Now().After(deadline) {
					r.t.Fatalf("refund: %v", res)
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
		// The refund is notified as refund.succeeded, once.
		want: want{requests: 1, transactions: 1, approved: 1, notified: 1, paid: true, events: []string{"refund.succeeded"}}})
}

func TestLostAnswerCancel(t *testing.T) {
	sweep(t, path{name: "cancel", setup: withRequest,
		act: func(r *run) {
			res := expect(r, "cancel", testenv.Do(r.t, "POST", r.api+"/payment-requests/"+strconv.FormatInt(r.requestID, 10)+"/cancel", r.m.APIKey, nil), 200)
			if res["paymentRequestStatusId"] != 3.0 {
				r.t.Fatalf("cancel: %v", res)
			}
		},
		want: want{requests: 1}})
}

func TestLostAnswerCheckoutSession(t *testing.T) {
	sweep(t, path{name: "checkout session", setup: withRequest,
		act: func(r *run) {
			s := expect(r, "session", testenv.Do(r.t, "POST", r.api+"/payment-requests/"+strconv.FormatInt(r.requestID, 10)+"/checkout-session", r.m.APIKey, nil), 201)
			page := testenv.Do(r.t, "GET", r.api+"/checkout/api/session", "", nil, "X-Checkout-Token", s["token"].(string))
			expect(r, "the session's page", page, 200)
		},
		want: want{requests: 1}})
}
