package merchantapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/apispec"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/merchantapiwire"
)

func TestMain(m *testing.M) {
	spec, err := apispec.Load()
	if err != nil {
		panic(err)
	}
	// Every response these tests receive must match docs/openapi.yaml.
	testenv.Check = spec.Check
	testenv.Main(m)
}

func base(t *testing.T) string { return testenv.Stack(t).Info.APIBase }

func TestCreateAndStatusRoundTrip(t *testing.T) {
	m := testenv.NewMerchant(t)
	body := `{"amount": 25, "unit": "EUR", "recipientName": "Coffee Corner", "referenceId": "order-42",
		"notes": "2 flat whites", "client": {"id": "c-1", "name": "Ann Lee", "email": "ann@example.com", "phone": "4915112345678", "memberId": "m-9"},
		"notifyUrl": "https://shop.example/notify", "successUrl": "https://shop.example/ok", "failureUrl": "https://shop.example/ko"}`
	resp := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, body)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	created := resp.JSON(t)
	id := int64(created["id"].(float64))
	if loc := resp.Header.Get("Location"); loc != "/payment-requests/status/"+strconv.FormatInt(id, 10) {
		t.Fatalf("Location = %q", loc)
	}
	if !bytes.Contains(resp.Body, []byte(`"amount":25.00`)) {
		t.Fatalf("amount not rendered with currency precision: %s", resp.Body)
	}
	status := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+strconv.FormatInt(id, 10), m.APIKey, nil)
	if status.Status != http.StatusOK {
		t.Fatalf("status: %d %s", status.Status, status.Body)
	}
	got := status.JSON(t)
	want := map[string]any{
		"recipientName": "Coffee Corner", "paymentRequestStatusId": 2.0, "unit": "EUR", "amount": 25.0,
		"referenceId": "order-42", "notes": "2 flat whites", "notifyUrl": "https://shop.example/notify",
		"successUrl": "https://shop.example/ok", "failureUrl": "https://shop.example/ko",
		"transactionId": nil, "transactionNumber": nil, "transactionStatusId": nil,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if got["id"] != created["id"] {
		t.Errorf("id changed: %v vs %v", got["id"], created["id"])
	}
	client := got["client"].(map[string]any)
	if client["email"] != "ann@example.com" || client["memberId"] != "m-9" {
		t.Errorf("client = %v", client)
	}
	if _, ok := got["lastLog"]; ok {
		t.Error("lastLog present before any attempt")
	}
	// The link carries a signed slug, never the id (see internal/paylink).
	if link, _ := got["link"].(string); !strings.HasPrefix(link, base(t)+"/pay/") || len(strings.TrimPrefix(link, base(t)+"/pay/")) != 32 ||
		strings.Contains(link, strconv.FormatInt(id, 10)) {
		t.Errorf("link = %q", link)
	}
}

func TestCreateValidationCodes(t *testing.T) {
	m := testenv.NewMerchant(t)
	long := strings.Repeat("a", 101)
	cases := []struct{ body, field, code string }{
		{`{"unit":"EUR"}`, "amount", "026"},
		{`{"amount":-1,"unit":"EUR"}`, "amount", "026"},
		{`{"amount":0,"unit":"EUR"}`, "amount", "026"},
		{`{"amount":1.005,"unit":"EUR"}`, "amount", "026"},
		{`{"amount":"ten","unit":"EUR"}`, "amount", "026"},
		{`{"amount":10}`, "unit", "027"},
		{`{"amount":10,"unit":"XYZ"}`, "unit", "027"},
		{`{"amount":10,"unit":"EUR","recipientName":"` + long + `"}`, "recipientName", "025"},
		{`{"amount":10,"unit":"EUR","referenceId":"` + long + `"}`, "referenceId", "028"},
		{`{"amount":10,"unit":"EUR","notifyUrl":"not a url"}`, "notifyUrl", "029"},
		{`{"amount":10,"unit":"EUR","successUrl":"javascript:alert(1)"}`, "successUrl", "030"},
		{`{"amount":10,"unit":"EUR","failureUrl":"//x.example"}`, "failureUrl", "031"},
		{`{"amount":10,"unit":"EUR","client":{"email":"a@"}}`, "client.email", "009"},
		{`{"amount":10,"unit":"EUR","client":{"phone":"+49 151"}}`, "client.phone", "033"},
		{`{"amount":10,"unit":"EUR","client":{"name":"` + long + `"}}`, "client.name", "025"},
		{`{"amount":10,"unit":"EUR","client":{"memberId":"` + long + `"}}`, "client.id", "044"},
	}
	for _, c := range cases {
		resp := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, c.body)
		if resp.Status != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: status %d type %q", c.body, resp.Status, resp.Header.Get("Content-Type"))
			continue
		}
		p := resp.JSON(t)
		errs, _ := p["errors"].([]any)
		if p["code"] != c.code || len(errs) == 0 {
			t.Errorf("%s: problem %s, want code %s", c.body, resp.Body, c.code)
			continue
		}
		first := errs[0].(map[string]any)
		if first["field"] != c.field || first["code"] != c.code {
			t.Errorf("%s: first error %v, want %s/%s", c.body, first, c.field, c.code)
		}
		for _, k := range []string{"type", "title", "status", "detail", "instance"} {
			if _, ok := p[k]; !ok {
				t.Errorf("problem lacks %q: %s", k, resp.Body)
			}
		}
	}
}

func TestAuthentication(t *testing.T) {
	m := testenv.NewMerchant(t)
	url := base(t) + "/payment-requests"
	body := `{"amount":10,"unit":"EUR"}`
	for name, key := range map[string]string{
		"missing":   "",
		"malformed": "hello",
		"unknown":   "prk_test_" + strings.Repeat("Z", 40),
		"truncated": m.APIKey[:48],
	} {
		resp := testenv.Do(t, "POST", url, key, body)
		if resp.Status != http.StatusUnauthorized || resp.JSON(t)["code"] != "011" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s key: %d %s", name, resp.Status, resp.Body)
		}
		if st := testenv.Do(t, "GET", base(t)+"/payment-requests/status/1", key, nil); st.Status != http.StatusUnauthorized {
			t.Errorf("%s key on status: %d", name, st.Status)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	resp := testenv.Do(t, "POST", base(t)+"/payment-requests", b.APIKey, `{"amount":10,"unit":"USD"}`)
	id := strconv.FormatInt(int64(resp.JSON(t)["id"].(float64)), 10)
	other := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+id, a.APIKey, nil)
	missing := testenv.Do(t, "GET", base(t)+"/payment-requests/status/999999999", a.APIKey, nil)
	for _, r := range []testenv.Response{other, missing} {
		if r.Status != http.StatusNotFound || r.JSON(t)["code"] != "043" {
			t.Errorf("got %d %s, want 404 043", r.Status, r.Body)
		}
	}
	// Another merchant's request must be indistinguishable from a missing one.
	if strings.Replace(string(other.Body), id, "X", -1) != strings.Replace(string(missing.Body), "999999999", "X", -1) {
		t.Errorf("bodies differ:\n%s\n%s", other.Body, missing.Body)
	}
}

func TestStatusIDMustBeInt64(t *testing.T) {
	m := testenv.NewMerchant(t)
	for _, id := range []string{"abc", "-1", "0", "01", "1.5", "9223372036854775808", "%20"} {
		r := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+id, m.APIKey, nil)
		if r.Status != http.StatusBadRequest {
			t.Errorf("id %q: %d %s", id, r.Status, r.Body)
		}
	}
	if r := testenv.Do(t, "GET", base(t)+"/payment-requests/status/9223372036854775807", m.APIKey, nil); r.Status != http.StatusNotFound {
		t.Errorf("max int64: %d", r.Status)
	}
}

func TestBodyErrors(t *testing.T) {
	m := testenv.NewMerchant(t)
	url := base(t) + "/payment-requests"
	cases := []struct {
		name, body, ctype string
		status            int
	}{
		{"malformed", `{"amount":10,`, "application/json", 400},
		{"array", `[1]`, "application/json", 400},
		{"two objects", `{"amount":10,"unit":"EUR"}{}`, "application/json", 400},
		{"empty", ``, "application/json", 400},
		{"unknown field", `{"amount":10,"unit":"EUR","colour":"red"}`, "application/json", 400},
		{"wrong type", `{"amount":10,"unit":5}`, "application/json", 400},
		{"text/plain", `{"amount":10,"unit":"EUR"}`, "text/plain", 415},
		{"form", `amount=10`, "application/x-www-form-urlencoded", 415},
		{"json-patch accepted", `{"amount":10,"unit":"EUR"}`, "application/json-patch+json", 201},
		{"charset accepted", `{"amount":10,"unit":"EUR"}`, "application/json; charset=utf-8", 201},
		{"oversized", `{"amount":10,"unit":"EUR","notes":"` + strings.Repeat("x", 70<<10) + `"}`, "application/json", 413},
	}
	for _, c := range cases {
		r := testenv.Do(t, "POST", url, m.APIKey, c.body, "Content-Type", c.ctype)
		if r.Status != c.status {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Body)
			continue
		}
		if c.status >= 400 && r.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: content type %q", c.name, r.Header.Get("Content-Type"))
		}
	}
	noType := testenv.Do(t, "POST", url, m.APIKey, nil)
	if noType.Status != 415 {
		t.Errorf("no content type: %d", noType.Status)
	}
}

// localHandler wires MerchantApiFunction exactly as the stack does, but with
// the given AWS config, behind the local gateway.
func localHandler(t *testing.T, opts wire.Options) string {
	t.Helper()
	s := testenv.Stack(t)
	env, err := s.Resources.Env("MerchantApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"] = "1"
	h, err := merchantapiwire.MerchantAPILambda(context.Background(), func(k string) string { return env[k] }, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(devstack.NewGateway(s.Resources.Functions, map[string]devstack.HTTPTarget{
		"MerchantApiFunction": {Handler: lambda.NewHandler(h), Timeout: s.Resources.Timeout("MerchantApiFunction")}}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAWSCallsPerRequest(t *testing.T) {
	cfg, counter := testenv.CountingAWSConfig(t)
	url := localHandler(t, wire.Options{AWSConfig: &cfg})
	m := testenv.NewMerchant(t)

	// First call resolves the key (one Query), later calls use the cache.
	first := testenv.Do(t, "POST", url+"/payment-requests", m.APIKey, `{"amount":10,"unit":"EUR"}`)
	if first.Status != 201 {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	want := func(what string, got []string, calls ...string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(calls, " ") {
			t.Fatalf("%s: AWS calls %v, want %v", what, got, calls)
		}
	}
	// Rate limit (one conditional UpdateItem) + the work itself.
	want("cold create", counter.Calls(), "DynamoDB.Query", "DynamoDB.UpdateItem", "DynamoDB.PutItem")
	counter.Reset()
	resp := testenv.Do(t, "POST", url+"/payment-requests", m.APIKey, `{"amount":10,"unit":"EUR"}`)
	want("warm create", counter.Calls(), "DynamoDB.UpdateItem", "DynamoDB.PutItem")
	id := strconv.FormatInt(int64(resp.JSON(t)["id"].(float64)), 10)
	counter.Reset()
	if st := testenv.Do(t, "GET", url+"/payment-requests/status/"+id, m.APIKey, nil); st.Status != 200 {
		t.Fatalf("status: %d", st.Status)
	}
	want("status", counter.Calls(), "DynamoDB.UpdateItem", "DynamoDB.GetItem")
	counter.Reset()
	if cs := testenv.Do(t, "POST", url+"/payment-requests/"+id+"/checkout-session", m.APIKey, nil); cs.Status != 201 {
		t.Fatalf("checkout-session: %d", cs.Status)
	}
	want("checkout-session", counter.Calls(), "DynamoDB.UpdateItem", "DynamoDB.GetItem")
	counter.Reset()
	if r := testenv.Do(t, "POST", url+"/payment-requests", m.APIKey, `{"amount":10,"unit":"EUR"}`, "Idempotency-Key", "k-1"); r.Status != 201 {
		t.Fatalf("create with key: %d", r.Status)
	}
	want("create with Idempotency-Key", counter.Calls(), "DynamoDB.UpdateItem", "DynamoDB.PutItem", "DynamoDB.PutItem", "DynamoDB.UpdateItem")
	t.Logf("AWS calls: create=2, status=2, checkout-session=2 (rate limit + 1); +2 with Idempotency-Key; +1 Query per API key per 30 s per instance")
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestLogsCarryRequestIDButNoSecrets(t *testing.T) {
	s := testenv.Stack(t)
	var logs syncBuffer
	h := merchantapi.New(merchantapi.Deps{
		Store: s.Store, Auth: apikey.New(s.Store),
		Log: slog.New(slog.NewJSONHandler(&logs, nil)), AllowHTTPURLs: true,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	m := testenv.NewMerchant(t)
	ok := testenv.Do(t, "POST", srv.URL+"/payment-requests", m.APIKey, `{"amount":10,"unit":"EUR"}`)
	bad := testenv.Do(t, "POST", srv.URL+"/payment-requests", m.APIKey[:40]+"zzzzzzzzz", `{"amount":10,"unit":"EUR"}`)
	out := logs.String()
	if ok.Status != 201 || bad.Status != 401 {
		t.Fatalf("statuses %d %d", ok.Status, bad.Status)
	}
	if strings.Contains(out, m.APIKey[9:]) || strings.Contains(out, m.APIKey[9:30]) {
		t.Fatalf("API key leaked into logs:\n%s", out)
	}
	rid := ok.Header.Get("X-Request-Id")
	if rid == "" || !strings.Contains(out, `"request_id":"`+rid+`"`) || !strings.Contains(out, `"merchant_id":"`+m.ID+`"`) {
		t.Fatalf("access log lacks request id %q or merchant id:\n%s", rid, out)
	}
}
