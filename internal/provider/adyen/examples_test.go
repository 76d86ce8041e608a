package adyen_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/adyen"
)

// testdata/webhook-examples.json holds, verbatim, the request examples of
// Adyen's own webhook description (Adyen/adyen-openapi,
// json/Webhooks-v1.json at aa014f0, MIT) for every event the connector
// handles. TestAdyensWebhookExamples reads each through the connector, so
// the fields it reads are the ones Adyen sends (strings for success and
// live, "null" as a reason, flattened "metadata.<key>" in additionalData).
// The examples carry no valid signature (their key is not published), so
// each is signed here with a test key first; the merchant reference is set
// to one of the service's where a payment result needs it.
func TestAdyensWebhookExamples(t *testing.T) {
	raw, err := os.ReadFile("testdata/webhook-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	const key = "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
	read := func(code string, edit func(*adyen.NotificationItem)) adyenEvent {
		t.Helper()
		var examples map[string]adyen.Notification // afresh: an edit must not reach the next read
		if err := json.Unmarshal(raw, &examples); err != nil {
			t.Fatal(err)
		}
		n, ok := examples[code]
		if !ok || len(n.NotificationItems) != 1 {
			t.Fatalf("no example of %s", code)
		}
		it := n.NotificationItems[0].Item
		if edit != nil {
			edit(&it)
		}
		if it.AdditionalData == nil {
			it.AdditionalData = map[string]string{}
		}
		if adyen.Verify(it, []string{key}) {
			t.Fatalf("%s: the example verified before it was signed", code)
		}
		sig, _ := adyen.Sign(it, key)
		it.AdditionalData["hmacSignature"] = sig
		n.NotificationItems[0].Item = it
		body, _ := json.Marshal(n)
		evs, err := adyen.Webhook{HMACKeys: []string{key}}.Read(body)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: Read = %+v, %v", code, evs, err)
		}
		return adyenEvent{evs[0].Type, evs[0].Ignored, evs[0].Payment != nil, evs[0].Refund, evs[0].Dispute, evs[0].Payment}
	}
	ten := decimal.NewFromInt(10)

	a := read("AUTHORISATION", func(it *adyen.NotificationItem) {
		it.MerchantReference = payment.ChargeReference(42)
		it.AdditionalData["metadata."+adyen.MetaPaymentRequestID] = "41"
	})
	if a.payment == nil || a.payment.Status != provider.Approved || a.payment.TransactionID != 42 ||
		a.payment.ProviderRef != "QFQTPCQ8HXSKGK82" || a.payment.Facts.PaymentRequestID != 41 ||
		!a.payment.Facts.Amount.Equal(ten) || a.payment.Facts.Unit != "EUR" {
		t.Fatalf("AUTHORISATION = %+v", a.payment)
	}
	if a := read("AUTHORISATION", nil); !a.ignored {
		t.Fatalf("AUTHORISATION of a reference not the service's = %+v; want ignored", a)
	}
	if r := read("REFUND", nil).refund; r == nil || r.Status != "failed" || r.ChargeRef != "9913140798220028" ||
		r.FailureReason == "" || !r.Amount.Equal(ten) {
		t.Fatalf("REFUND success=false = %+v", r)
	}
	if r := read("REFUND", func(it *adyen.NotificationItem) { it.Success = "true" }).refund; r == nil || r.Status != "succeeded" {
		t.Fatalf("REFUND success=true = %+v", r)
	}
	if r := read("REFUND_FAILED", nil).refund; r == nil || r.Status != "failed" {
		t.Fatalf("REFUND_FAILED (success true in Adyen's example) = %+v; want failed", r)
	}
	if c := read("CANCELLATION", nil); c.ignored || c.isPayment {
		t.Fatalf("CANCELLATION = %+v; want acknowledged, nothing to settle", c)
	}
	// CANCEL_OR_REFUND (a reversal's result): Adyen's example names no
	// reference of the service's and is ignored; with the reference the
	// void's reversal was sent with, it is that void's result, whichever
	// way Adyen returned the money.
	if c := read("CANCEL_OR_REFUND", nil); !c.ignored {
		t.Fatalf("CANCEL_OR_REFUND of a reversal not the service's = %+v; want ignored", c)
	}
	for _, success := range []string{"true", "false"} {
		r := read("CANCEL_OR_REFUND", func(it *adyen.NotificationItem) {
			it.MerchantReference, it.Success = adyen.RefundReference(paycore.VoidPrefix+payment.ChargeReference(42), 42), success
		}).refund
		want := map[string]string{"true": "succeeded", "false": "failed"}[success]
		if r == nil || r.Status != want || r.RefundID != "void_ptx_42" || r.TransactionID != 42 || r.ChargeRef != "9913140798220028" ||
			r.RefundRef != "QFQTPCQ8HXSKGK82" || r.Action != "cancel" || !r.Amount.Equal(ten) || r.Unit != "EUR" {
			t.Fatalf("CANCEL_OR_REFUND success=%s = %+v; want the void of transaction 42, %s", success, r, want)
		}
	}
	if r := read("CANCEL_OR_REFUND", func(it *adyen.NotificationItem) { it.MerchantReference = payment.ChargeReference(43) }).refund; r == nil || r.RefundID != "void_ptx_43" || r.TransactionID != 43 {
		t.Fatalf("CANCEL_OR_REFUND naming the payment's own reference = %+v; want the void of transaction 43", r)
	}
	for _, success := range []string{"true", "false"} {
		c := read("TECHNICAL_CANCEL", func(it *adyen.NotificationItem) { it.Success = success })
		if c.ignored || c.isPayment || c.refund != nil || c.dispute != nil {
			t.Fatalf("TECHNICAL_CANCEL success=%s = %+v; want acknowledged, nothing to settle", success, c)
		}
	}
	for code, want := range map[string]string{"CHARGEBACK": payment.EventDisputeFundsWithdrawn, "NOTIFICATION_OF_CHARGEBACK": payment.EventDisputeCreated} {
		d := read(code, nil).dispute
		if d == nil || d.EventType != want || d.ChargeRef != "9913140798220028" || d.Reason == "" || !d.Amount.Equal(ten) {
			t.Fatalf("%s = %+v", code, d)
		}
	}
	// Adyen's examples of the later dispute events name no original
	// payment: nothing to bind them to, so they are acknowledged and not
	// applied; with one, they are.
	for code, want := range map[string]string{"SECOND_CHARGEBACK": payment.DisputeNeedsResponse, "CHARGEBACK_REVERSED": payment.DisputeWon,
		"PREARBITRATION_WON": payment.DisputeWon, "PREARBITRATION_LOST": payment.DisputeLost} {
		if e := read(code, nil); !e.ignored {
			t.Fatalf("%s without originalReference = %+v; want ignored", code, e)
		}
		d := read(code, func(it *adyen.NotificationItem) { it.OriginalReference = "9913140798220028" }).dispute
		if d == nil || d.Status != want {
			t.Fatalf("%s = %+v; want status %s", code, d, want)
		}
	}
}

type adyenEvent struct {
	typ       string
	ignored   bool
	isPayment bool
	refund    *paycoreRefund
	dispute   *paycoreDispute
	payment   *paycorePayment
}

type (
	paycoreRefund  = paycore.RefundResult
	paycoreDispute = paycore.DisputeResult
	paycorePayment = paycore.ProviderResult
)
