package apispec_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/webhook"
)

// The refund and dispute notification webhooks describe what
// internal/webhook sends: the payment's form fields then the event's, and
// the examples are bodies webhook.Build produces, signatures included.
func TestEventWebhooksAreWhatTheNotifierSends(t *testing.T) {
	doc := load(t)
	form := doc.Webhooks["refundOrDisputeNotification"].Post
	jsn := doc.Webhooks["refundOrDisputeNotificationJson"].Post
	if form == nil || jsn == nil {
		t.Fatal("webhooks refundOrDisputeNotification and refundOrDisputeNotificationJson are required")
	}
	formMedia := form.RequestBody.Value.Content.Get(webhook.ContentTypeForm)
	jsonMedia := jsn.RequestBody.Value.Content.Get(webhook.ContentTypeJSON)
	if got, want := formMedia.Schema.Value.Required, append(slices.Clone(webhook.FormFields), "type", "eventId"); !slices.Equal(got, want) {
		t.Errorf("required form fields %v, the notifier always sends %v", got, want)
	}
	props := formMedia.Schema.Value.Properties
	for _, k := range append(slices.Clone(webhook.RefundFormFields), webhook.DisputeFormFields...) {
		if props[k] == nil {
			t.Errorf("form field %s is not described", k)
		}
	}
	build := func(op *openapi3.Operation, n webhook.Notification, format webhook.Format) webhook.Request {
		ts, _ := strconv.ParseInt(param(t, op, "webhook-timestamp"), 10, 64)
		r, err := webhook.Build(n, webhook.Options{URL: "https://merchant.example/payments/notify", Format: format, Decimals: 2,
			APIKey: exampleAPIKey, WebhookSecret: exampleSecret, Now: time.Unix(ts, 0), EventID: n.Event.EventID})
		if err != nil {
			t.Fatal(err)
		}
		if got := "msg_" + n.Event.EventID; got != param(t, op, "webhook-id") {
			t.Errorf("%s: webhook-id example %s, the event's is %s", op.OperationID, param(t, op, "webhook-id"), got)
		}
		for _, h := range []string{webhook.HeaderXSignature, webhook.HeaderWebhookSignature} {
			if got, want := param(t, op, h), r.Header.Get(h); got != want {
				t.Errorf("%s: example %s %q, the notifier signs %q", op.OperationID, h, got, want)
			}
		}
		return r
	}
	base := webhook.Notification{ID: 183910485123072, TransactionID: 183910485127168, TransactionStatusID: 1, PaymentRequestStatusID: 1,
		MerchantID: "mer_3kTMd9cPqLx2", Unit: "EUR", GrossAmount: decimal.RequireFromString("25.00"), Fee: decimal.RequireFromString("0.75"),
		NetAmount: decimal.RequireFromString("24.25"), ReferenceID: "order-1042", Notes: "2 tickets", ClientID: "cus_981", ClientName: "Jane Doe",
		ClientEmail: "jane@example.com", ClientPhone: "+14155550123", ClientMemberID: "gold-7"}

	fe := formMedia.Examples["refund"].Value.Value.(map[string]any)
	n := base
	amount, _ := decimal.NewFromString(fe["refundAmount"].(string))
	n.Event = &webhook.Event{Type: fe["type"].(string), EventID: fe["eventId"].(string), ObjectID: fe["refundId"].(string),
		Status: fe["refundStatus"].(string), Amount: amount, Reason: fe["refundFailureReason"].(string)}
	back, _ := url.ParseQuery(string(build(form, n, webhook.FormatForm).Body))
	for k, x := range fe {
		if back.Get(k) != str(x) {
			t.Errorf("form example %s=%q, the notifier sends %q", k, str(x), back.Get(k))
		}
	}

	je := jsonMedia.Examples["dispute"].Value.Value.(map[string]any)
	d := je["dispute"].(map[string]any)
	due, _ := time.Parse(time.RFC3339, d["evidenceDueBy"].(string))
	n = base
	amount, _ = decimal.NewFromString(d["amount"].(string))
	n.Event = &webhook.Event{Type: je["type"].(string), EventID: je["eventId"].(string), ObjectID: d["id"].(string), Status: d["status"].(string),
		Reason: d["reason"].(string), Amount: amount, EvidenceDueBy: due, DashboardURL: d["dashboardUrl"].(string)}
	var got map[string]any
	if err := json.Unmarshal(build(jsn, n, webhook.FormatJSON).Body, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, je) {
		t.Errorf("JSON example %v\nthe notifier sends %v", je, got)
	}
	if !strings.HasPrefix(je["eventId"].(string), "evt_") {
		t.Error("event ids start with evt_")
	}
}
