package apispec_test

import (
	"encoding/json"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/shopspring/decimal"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/apispec"
	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/webhook"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	s, err := apispec.Load()
	if err != nil {
		t.Fatal(err)
	}
	return s.Doc
}

// operations returns every operation of the description, webhooks included,
// keyed "METHOD path" (webhooks: "POST webhook:name").
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	ops := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops[method+" "+path] = op
		}
	}
	for name, item := range doc.Webhooks {
		for method, op := range item.Operations() {
			ops[method+" webhook:"+name] = op
		}
	}
	return ops
}

// The description and template.yaml (the API Gateway routes, which
// TestTemplateRoutesMatchHandlers ties to the handlers) list the same
// routes: none missing, none extra. The dashboard's routes are HTML pages
// and forms for people (cookie session, CSRF token), not an API: they are
// listed in docs/dashboard.md instead, each one, or the test fails.
func TestSpecCoversEveryRoute(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	fns, err := tmpl.Functions()
	if err != nil {
		t.Fatal(err)
	}
	var inTemplate, inSpec []string
	dashboardGuide, err := os.ReadFile("../../docs/dashboard.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	for _, f := range fns {
		for _, r := range f.Routes {
			if f.LogicalID == "DashboardFunction" {
				pages++
				if !strings.Contains(string(dashboardGuide), "`"+r.Method+" "+r.Path+"`") {
					t.Errorf("dashboard route %s %s is not listed in docs/dashboard.md", r.Method, r.Path)
				}
				continue
			}
			inTemplate = append(inTemplate, r.Method+" "+r.Path)
		}
	}
	if pages == 0 {
		t.Error("no DashboardFunction routes in the template: the exception above names a function that no longer exists")
	}
	for key := range operations(load(t)) {
		if !strings.Contains(key, "webhook:") {
			inSpec = append(inSpec, key)
		}
	}
	for _, r := range inTemplate {
		if !slices.Contains(inSpec, r) {
			t.Errorf("template route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, r := range inSpec {
		if !slices.Contains(inTemplate, r) {
			t.Errorf("docs/openapi.yaml describes %s, which template.yaml does not route", r)
		}
	}
	if len(inTemplate) < 30 {
		t.Fatalf("only %d template routes found: parsing went wrong", len(inTemplate))
	}
}

// SpecCode lists every code of internal/codes, each with the meaning the
// service sends with it, and nothing else, and so does the introduction's
// table of error codes: a new code cannot be forgotten.
func TestSpecListsEverySpecCode(t *testing.T) {
	doc := load(t)
	ref := doc.Components.Schemas["SpecCode"]
	if ref == nil {
		t.Fatal("no SpecCode schema")
	}
	s := ref.Value
	var enum []string
	for _, v := range s.Enum {
		enum = append(enum, v.(string))
	}
	var want []string
	for _, c := range codes.All() {
		want = append(want, string(c))
	}
	sort.Strings(enum)
	sort.Strings(want)
	if !slices.Equal(enum, want) {
		t.Errorf("SpecCode enum %v, internal/codes has %v", enum, want)
	}
	desc, _ := s.Extensions["x-enumDescriptions"].(map[string]any)
	for _, c := range codes.All() {
		if got := desc[string(c)]; got != c.Message() {
			t.Errorf("code %s: x-enumDescriptions %q, internal/codes says %q", c, got, c.Message())
		}
		if row := "| `" + string(c) + "` | " + c.Message() + " |"; !strings.Contains(doc.Info.Description, row) {
			t.Errorf("code %s: the error code table of the introduction has no row %q", c, row)
		}
	}
	if len(desc) != len(want) {
		t.Errorf("x-enumDescriptions has %d codes, internal/codes %d", len(desc), len(want))
	}
}

// Every operation has an example of each request body it accepts and of at
// least one response (webhooks: the request only), and every example is
// valid against its schema.
func TestEveryOperationHasValidExamples(t *testing.T) {
	examples := func(m *openapi3.MediaType) []any {
		var out []any
		if m.Example != nil {
			out = append(out, m.Example)
		}
		for _, e := range m.Examples {
			out = append(out, e.Value.Value)
		}
		return out
	}
	check := func(where string, m *openapi3.MediaType, vs []any) {
		for _, v := range vs {
			if m.Schema == nil {
				continue
			}
			if err := m.Schema.Value.VisitJSON(v); err != nil {
				t.Errorf("%s: example does not match its schema: %v", where, err)
			}
		}
	}
	ops := operations(load(t))
	for key, op := range ops {
		if op.RequestBody != nil {
			for mt, m := range op.RequestBody.Value.Content {
				vs := examples(m)
				if len(vs) == 0 {
					t.Errorf("%s: no example of the %s request body", key, mt)
				}
				check(key+" request "+mt, m, vs)
			}
		}
		n := 0
		for status, r := range op.Responses.Map() {
			for mt, m := range r.Value.Content {
				vs := examples(m)
				n += len(vs)
				check(key+" → "+status+" "+mt, m, vs)
			}
		}
		// A webhook's answer body is ignored: only its status is described.
		if n == 0 && !strings.Contains(key, "webhook:") {
			t.Errorf("%s: no response example", key)
		}
	}
	if len(ops) < 30 {
		t.Fatalf("only %d operations", len(ops))
	}
}

// param returns the example of a webhook's header parameter.
func param(t *testing.T, op *openapi3.Operation, name string) string {
	t.Helper()
	p := op.Parameters.GetByInAndName("header", name)
	if p == nil || p.Example == nil {
		t.Fatalf("%s: no header parameter %s with an example", op.OperationID, name)
	}
	return p.Example.(string)
}

func str(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return v.(string)
}

// Example keys of docs/notifications.md (not real).
const (
	exampleAPIKey = "prk_test_NqVwYS81VP7Hb1DX8pPd5khxE3pyIgKpaUnArl63"
	exampleSecret = "whsec_ZXhhbXBsZS13ZWJob29rLXNlY3JldC1mb3ItZG9jcyE="
)

// The webhooks describe what internal/webhook sends: the form fields in
// FormBody's order, the JSON members in JSONBody's order, and the examples
// are notifications webhook.Build produces, signatures included.
func TestWebhooksAreWhatTheNotifierSends(t *testing.T) {
	doc := load(t)
	form := doc.Webhooks["paymentNotification"].Post
	jsn := doc.Webhooks["paymentNotificationJson"].Post
	if form == nil || jsn == nil {
		t.Fatal("webhooks paymentNotification and paymentNotificationJson are required")
	}
	formMedia := form.RequestBody.Value.Content.Get(webhook.ContentTypeForm)
	jsonMedia := jsn.RequestBody.Value.Content.Get(webhook.ContentTypeJSON)
	if formMedia == nil || jsonMedia == nil {
		t.Fatal("webhook media types are not the notifier's content types")
	}
	if got := formMedia.Schema.Value.Required; !slices.Equal(got, webhook.FormFields) {
		t.Errorf("form fields %v, the notifier sends %v", got, webhook.FormFields)
	}
	var members []string
	rt := reflect.TypeOf(webhook.JSONNotification{})
	for i := range rt.NumField() {
		members = append(members, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	if got := jsonMedia.Schema.Value.Required; !slices.Equal(got, members) {
		t.Errorf("JSON members %v, the notifier sends %v", got, members)
	}

	build := func(op *openapi3.Operation, n webhook.Notification, format webhook.Format) webhook.Request {
		ts, err := strconv.ParseInt(param(t, op, "webhook-timestamp"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		r, err := webhook.Build(n, webhook.Options{URL: "https://merchant.example/payments/notify", Format: format, Decimals: 2,
			APIKey: exampleAPIKey, WebhookSecret: exampleSecret, Now: time.Unix(ts, 0),
			EventID: strings.TrimPrefix(param(t, op, "webhook-id"), "msg_")})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{webhook.HeaderXSignature, webhook.HeaderWebhookSignature, "User-Agent"} {
			if got, want := param(t, op, h), r.Header.Get(h); got != want {
				t.Errorf("%s: example %s %q, the notifier signs %q", op.OperationID, h, got, want)
			}
		}
		return r
	}

	// Form: the example's fields, as the notifier would render them.
	fe := formMedia.Examples["approved"].Value.Value.(map[string]any)
	v := url.Values{}
	for k, x := range fe {
		v.Set(k, str(x))
	}
	n, err := webhook.ParseForm([]byte(v.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	r := build(form, n, webhook.FormatForm)
	back, _ := url.ParseQuery(string(r.Body))
	for k, x := range fe {
		if back.Get(k) != str(x) {
			t.Errorf("form example %s=%q, the notifier sends %q", k, str(x), back.Get(k))
		}
	}

	// JSON: the notifier's body for the example's values is the example.
	je := jsonMedia.Examples["declined"].Value.Value.(map[string]any)
	id, _ := strconv.ParseInt(str(je["paymentRequestId"]), 10, 64)
	tx, _ := strconv.ParseInt(str(je["transactionId"]), 10, 64)
	amount, _ := decimal.NewFromString(je["amount"].(string))
	n = webhook.Notification{ID: id, TransactionID: tx, TransactionStatusID: webhook.TxDeclined, PaymentRequestStatusID: webhook.RequestUnpaid,
		MerchantID: "mer_3kTMd9cPqLx2", Unit: je["currency"].(string), GrossAmount: amount, NetAmount: amount,
		Code: codes.Code(je["errorCode"].(string)), Message: je["errorMessage"].(string)}
	r = build(jsn, n, webhook.FormatJSON)
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, je) {
		t.Errorf("JSON example %v\nthe notifier sends %v", je, got)
	}
}
