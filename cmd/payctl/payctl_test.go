package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/webhook"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func payctl(t *testing.T, args ...string) (map[string]any, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{"--local", "--state-dir", testenv.StateDir(t)}, args...)
	code := run(context.Background(), full, &stdout, &stderr)
	var out map[string]any
	if code == 0 {
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("payctl %v: stdout is not JSON: %v\n%s", args, err, stdout.String())
		}
	}
	return out, stderr.String(), code
}

func TestMerchantLifecycle(t *testing.T) {
	api := testenv.Stack(t).Info.APIBase
	created, stderr, code := payctl(t, "merchant", "create", "--name", "Acme Books", "--notify-url", "https://acme.example/hooks",
		"--allowed-origins", "https://acme.example,http://127.0.0.1:8080", "--methods", "1,30,44", "--max-amount", "500.00",
		"--currencies", "EUR,USD", "--daily-count", "100", "--rate-limit", "50")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	id, key := created["id"].(string), created["apiKey"].(string)
	if !strings.HasPrefix(id, "mer_") || !strings.HasPrefix(key, "prk_test_") || created["webhookSecret"] == nil {
		t.Fatalf("create output %v", created)
	}
	if created["rateLimitPerMinute"] != 50.0 || created["limits"].(map[string]any)["maxAmount"] != "500" {
		t.Fatalf("settings not applied: %v", created)
	}
	if r := testenv.Do(t, "POST", api+"/payment-requests", key, `{"amount":10,"unit":"EUR"}`); r.Status != 201 {
		t.Fatalf("new merchant's key: %d %s", r.Status, r.Body)
	}

	shown, _, code := payctl(t, "merchant", "show", "--id", id)
	if code != 0 || shown["apiKey"] != nil || shown["webhookSecret"] != nil || shown["apiKeyPrefix"] != key[:13] {
		t.Fatalf("show must not reveal secrets: %v", shown)
	}
	raw, _ := json.Marshal(shown)
	if strings.Contains(string(raw), key[13:]) {
		t.Fatal("show output contains the key")
	}

	updated, _, code := payctl(t, "merchant", "update", "--id", id, "--notify-url", "https://acme.example/v2", "--methods", "1,31")
	if code != 0 || updated["notifyUrl"] != "https://acme.example/v2" || len(updated["methods"].([]any)) != 2 || updated["name"] != "Acme Books" {
		t.Fatalf("update: %v", updated)
	}
	if _, stderr, code := payctl(t, "merchant", "update", "--id", id, "--methods", "2"); code != 1 || !strings.Contains(stderr, "selector 2") {
		t.Fatalf("invalid update: exit %d %s", code, stderr)
	}
	if again, _, _ := payctl(t, "merchant", "show", "--id", id); again["version"] != updated["version"] {
		t.Fatalf("failed update changed the merchant: %v", again)
	}
	if _, _, code := payctl(t, "merchant", "show", "--id", "mer_nope"); code != 1 {
		t.Fatalf("unknown merchant: exit %d", code)
	}
}

func TestRotateKey(t *testing.T) {
	api := testenv.Stack(t).Info.APIBase
	created, _, _ := payctl(t, "merchant", "create", "--name", "Rotating")
	id, old := created["id"].(string), created["apiKey"].(string)
	rotated, stderr, code := payctl(t, "merchant", "rotate-key", "--id", id)
	if code != 0 {
		t.Fatalf("rotate: %d %s", code, stderr)
	}
	fresh := rotated["apiKey"].(string)
	if fresh == old || rotated["webhookSecret"] != nil {
		t.Fatalf("rotate output %v", rotated)
	}
	if r := testenv.Do(t, "POST", api+"/payment-requests", old, `{"amount":1,"unit":"EUR"}`); r.Status != 401 {
		t.Fatalf("old key after rotation: %d", r.Status)
	}
	if r := testenv.Do(t, "POST", api+"/payment-requests", fresh, `{"amount":1,"unit":"EUR"}`); r.Status != 201 {
		t.Fatalf("new key: %d %s", r.Status, r.Body)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"merchant"}, {"merchant", "show"}, {"merchant", "explode", "--id", "x"}, {"nope", "x"}} {
		if _, _, code := payctl(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// webhooks listen receives a real signed notification and reports that both
// signatures verify.
func TestWebhooksListen(t *testing.T) {
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	apiKey := "prk_test_" + strings.Repeat("a", 40)
	secret, _ := webhook.NewWebhookSecret()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"webhooks", "listen", "--port", strconv.Itoa(port), "--api-key", apiKey, "--webhook-secret", secret}, &out, io.Discard)
	}()
	n := webhook.Notification{ID: 7, TransactionID: 9, TransactionStatusID: 1, PaymentRequestStatusID: 1, MerchantID: "mer_x",
		Unit: "EUR", GrossAmount: decimal.RequireFromString("10"), NetAmount: decimal.RequireFromString("10")}
	req, err := webhook.Build(n, webhook.Options{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/", APIKey: apiKey, WebhookSecret: secret, Decimals: 2})
	if err != nil {
		t.Fatal(err)
	}
	var attempt webhook.Attempt
	for i := 0; i < 50; i++ { // wait for the listener
		attempt = webhook.Sender{Client: &http.Client{Timeout: 2 * time.Second}}.Send(context.Background(), req)
		if attempt.Delivered() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 || !attempt.Delivered() {
		t.Fatalf("exit %d, attempt %+v", code, attempt)
	}
	line := out.String()
	if !strings.Contains(line, `"id":"7"`) && !strings.Contains(line, `"id":7`) {
		t.Fatalf("notification not printed: %s", line)
	}
	if !strings.Contains(line, `"xSignature":{"valid":true}`) || !strings.Contains(line, `"standardWebhook":{"valid":true}`) {
		t.Fatalf("signatures not reported as verified: %s", line)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestDeliveriesAndDLQCommands(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	defer recv.Close()
	count := func() int { mu.Lock(); defer mu.Unlock(); return hits }
	m := testenv.NewMerchant(t, func(mm *merchant.Merchant) { mm.NotifyURL = recv.URL })
	api := testenv.Stack(t).Info.APIBase
	pay := testenv.Do(t, "POST", api+"/payments/h2h/44", m.APIKey, `{"amount":"3.00","unit":"EUR","name":"Ann Lee","email":"ann@example.com",
		"phoneNumber":"4915112345678","address":"Main St 1","city":"Berlin","state":"BE","postalCode":"10115","country":"DE","token":"tok_success"}`)
	id := strconv.FormatInt(int64(pay.JSON(t)["paymentRequestId"].(float64)), 10)
	deadline := time.Now().Add(15 * time.Second)
	var listed map[string]any
	for {
		var code int
		listed, _, code = payctl(t, "deliveries", "list", "--request", id)
		if code == 0 && len(listed["attempts"].([]any)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries list: %v", listed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a := listed["attempts"].([]any)[0].(map[string]any)
	if a["outcome"] != "delivered" || a["statusCode"] != 200.0 || count() != 1 {
		t.Fatalf("attempt %v, receiver hits %d", a, count())
	}
	out, stderr, code := payctl(t, "deliveries", "redeliver", "--request", id)
	if code != 0 || out["queued"] != true {
		t.Fatalf("redeliver: %d %v %s", code, out, stderr)
	}
	for deadline := time.Now().Add(15 * time.Second); count() < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("redelivery did not arrive")
		}
	}
	if out, _, code := payctl(t, "dlq", "redrive"); code != 0 || out["interactive"] == nil || out["batch"] == nil {
		t.Fatalf("dlq redrive: %d %v", code, out)
	}
	if _, _, code := payctl(t, "deliveries", "list", "--request", "abc"); code != 2 {
		t.Fatalf("bad request id: exit %d", code)
	}
}

// Allowed origins: create and update refuse anything but scheme, host and
// port (naming the flag and the spec's 032); check-origins lists the stored
// values that fail (saved before the rules), with their merchant, and exits 3.
func TestAllowedOriginsAreCheckedAndStoredBadOnesListed(t *testing.T) {
	for _, o := range []string{"https://*", "https://a.com;sandbox", "https://a.com/path", "https://user@a.com", "ftp://a.com"} {
		_, stderr, code := payctl(t, "merchant", "create", "--name", "Origins", "--allowed-origins", o)
		if code != 1 || !strings.Contains(stderr, "--allowed-origins") || !strings.Contains(stderr, "032") || !strings.Contains(stderr, o) {
			t.Errorf("create --allowed-origins %q: exit %d %s", o, code, stderr)
		}
	}
	created, stderr, code := payctl(t, "merchant", "create", "--name", "Origins", "--allowed-origins", "https://Bücher.example:443/,http://127.0.0.1:8080")
	if code != 0 {
		t.Fatalf("create: exit %d %s", code, stderr)
	}
	if got := fmt.Sprint(created["allowedOrigins"]); got != "[https://xn--bcher-kva.example http://127.0.0.1:8080]" {
		t.Errorf("stored origins %s", got)
	}
	id := created["id"].(string)
	if _, stderr, code := payctl(t, "merchant", "update", "--id", id, "--allowed-origins", "https://ok.example,https://*"); code != 1 ||
		!strings.Contains(stderr, "--allowed-origins") || !strings.Contains(stderr, `"https://*"`) {
		t.Errorf("update with a wildcard: exit %d %s", code, stderr)
	}

	// Values stored before the rules (written directly, as an old version did).
	st := testenv.Stack(t).Store
	bad := testenv.NewMerchant(t, func(m *merchant.Merchant) {
		m.AllowedOrigins = []string{"https://shop.example", "https://*", "https://a.com;sandbox"}
	})
	out, stderr, code := payctlOut(t, "merchant", "check-origins")
	if code != 3 || !strings.Contains(stderr, "not valid origins") {
		t.Fatalf("check-origins: exit %d %s", code, stderr)
	}
	found := map[string]string{}
	for _, v := range out["invalid"].([]any) {
		e := v.(map[string]any)
		if e["merchantId"] == bad.ID {
			found[e["origin"].(string)] = e["problem"].(string)
		}
	}
	if len(found) != 2 || !strings.Contains(found["https://*"], "032") || found["https://a.com;sandbox"] == "" {
		t.Errorf("check-origins listed %v for %s", found, bad.ID)
	}
	// Fixed with update, the merchant is no longer listed.
	if _, stderr, code := payctl(t, "merchant", "update", "--id", bad.ID, "--allowed-origins", "https://shop.example"); code != 0 {
		t.Fatalf("fix: exit %d %s", code, stderr)
	}
	out, _, _ = payctlOut(t, "merchant", "check-origins")
	for _, v := range out["invalid"].([]any) {
		if v.(map[string]any)["merchantId"] == bad.ID {
			t.Errorf("still listed after the fix: %v", v)
		}
	}
	if m, err := st.Merchant(context.Background(), bad.ID); err != nil || fmt.Sprint(m.AllowedOrigins) != "[https://shop.example]" {
		t.Errorf("stored after the fix: %v %v", m, err)
	}
}

// payctlOut is payctl that also reads stdout's JSON when the exit code is
// not 0 (check-origins prints its list and exits 3).
func payctlOut(t *testing.T, args ...string) (map[string]any, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"--local", "--state-dir", testenv.StateDir(t)}, args...), &stdout, &stderr)
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("payctl %v: stdout is not JSON: %v\n%s", args, err, stdout.String())
	}
	return out, stderr.String(), code
}
