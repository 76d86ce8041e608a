package webhook

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	testAPIKey = "pk_test_2b7e151628aed2a6abf7158809cf4f3c"
	testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

func testOptions(now time.Time) Options {
	return Options{
		URL: "https://merchant.example/notify?token=abc", Decimals: 2,
		APIKey: testAPIKey, WebhookSecret: testSecret, Now: now,
	}
}

func TestBuildForm(t *testing.T) {
	now := time.Unix(1772366400, 0)
	r, err := Build(approved(), testOptions(now))
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != http.MethodPost || r.URL != "https://merchant.example/notify?token=abc" {
		t.Fatalf("method/url %s %s", r.Method, r.URL)
	}
	if string(r.Body) != string(approved().FormBody(2)) {
		t.Fatalf("body %s", r.Body)
	}
	want := map[string]string{
		"Content-Type":      "application/x-www-form-urlencoded",
		"X-Signature":       SignXSignature(r.Body, testAPIKey),
		"Webhook-Id":        "msg_987654321", // the transaction id by default
		"Webhook-Timestamp": "1772366400",
		"User-Agent":        UserAgent,
	}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if !VerifyXSignature(r.Body, r.Header.Get("X-Signature"), testAPIKey) {
		t.Error("X-Signature does not verify")
	}
	if err := VerifyStandardWebhook(r.Header, r.Body, testSecret, now.Add(time.Minute), 0); err != nil {
		t.Errorf("Standard Webhooks: %v", err)
	}
}

func TestBuildJSON(t *testing.T) {
	now := time.Unix(1772366400, 0)
	opts := testOptions(now)
	opts.Format = FormatJSON
	r, err := Build(declined(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	j, err := VerifyJSONBody(r.Body, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if j.Timestamp != "2026-03-01T12:00:00Z" || j.Status != StatusFailed {
		t.Fatalf("%+v", j)
	}
	// The spec: every notification carries X-Signature, the JSON one too.
	if !VerifyXSignature(r.Body, r.Header.Get(HeaderXSignature), testAPIKey) {
		t.Error("X-Signature does not verify")
	}
	if err := VerifyStandardWebhook(r.Header, r.Body, testSecret, now, 0); err != nil {
		t.Errorf("Standard Webhooks: %v", err)
	}
}

func TestBuildRetriesKeepTheID(t *testing.T) {
	opts := testOptions(time.Unix(1772366400, 0))
	opts.EventID = "evt_01J"
	first, err := Build(approved(), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Now = opts.Now.Add(5 * time.Minute)
	retry, err := Build(approved(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := first.Header.Get(HeaderWebhookID), retry.Header.Get(HeaderWebhookID); a != "msg_evt_01J" || a != b {
		t.Fatalf("webhook-id %q then %q", a, b)
	}
	if first.Header.Get(HeaderWebhookTimestamp) == retry.Header.Get(HeaderWebhookTimestamp) {
		t.Fatal("a retry is signed with its own timestamp")
	}
}

func TestBuildRejects(t *testing.T) {
	now := time.Unix(1772366400, 0)
	cases := map[string]func(*Notification, *Options){
		"pending transaction": func(n *Notification, o *Options) { n.TransactionStatusID = 3 },
		"cancelled request":   func(n *Notification, o *Options) { n.PaymentRequestStatusID = 3 },
		"relative URL":        func(n *Notification, o *Options) { o.URL = "/notify" },
		"ftp URL":             func(n *Notification, o *Options) { o.URL = "ftp://merchant.example/x?token=abc" },
		"no API key":          func(n *Notification, o *Options) { o.APIKey = "" },
		"no webhook secret":   func(n *Notification, o *Options) { o.WebhookSecret = "" },
		"short secret":        func(n *Notification, o *Options) { o.WebhookSecret = "whsec_c2hvcnQ=" },
		"format":              func(n *Notification, o *Options) { o.Format = "xml" },
		"decimals":            func(n *Notification, o *Options) { o.Decimals = -1 },
		"event id with dot":   func(n *Notification, o *Options) { o.EventID = "a.b" },
		"event id with CRLF":  func(n *Notification, o *Options) { o.EventID = "a\r\nX-Evil: 1" },
	}
	for name, mutate := range cases {
		n, o := approved(), testOptions(now)
		mutate(&n, &o)
		_, err := Build(n, o)
		if err == nil {
			t.Errorf("%s: built", name)
			continue
		}
		if strings.Contains(err.Error(), "token=abc") || strings.Contains(err.Error(), testAPIKey) {
			t.Errorf("%s: error leaks a secret: %v", name, err)
		}
	}
}

func TestRequestHTTPRequest(t *testing.T) {
	r, err := Build(approved(), testOptions(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	req, err := r.HTTPRequest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(req.Body)
	if string(b) != string(r.Body) || req.ContentLength != int64(len(r.Body)) || req.GetBody == nil {
		t.Fatal("body not carried with length and GetBody")
	}
	req.Header.Set("X-Signature", "changed")
	if r.Header.Get("X-Signature") == "changed" {
		t.Fatal("the built request shares its header map")
	}
}

// During a secret rotation's overlap, webhook-signature carries one entry
// per secret (current first), so a receiver verifies with either; X-Signature
// and the JSON body's signature use the current keys alone.
func TestBuildSignsWithThePreviousSecretToo(t *testing.T) {
	now := time.Unix(1772366400, 0)
	old, err := NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(now)
	opts.PreviousWebhookSecrets = []string{old}
	r, err := Build(approved(), opts)
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Fields(r.Header.Get(HeaderWebhookSignature))
	cur, _ := SignStandardWebhook(r.Header.Get(HeaderWebhookID), now, r.Body, testSecret)
	if len(entries) != 2 || entries[0] != cur {
		t.Fatalf("webhook-signature %q: want the current secret's entry, then the previous one's", r.Header.Get(HeaderWebhookSignature))
	}
	for _, secret := range []string{testSecret, old} {
		if err := VerifyStandardWebhook(r.Header, r.Body, secret, now, 0); err != nil {
			t.Errorf("verify with %s…: %v", secret[:10], err)
		}
	}
	if r.Header.Get(HeaderXSignature) != SignXSignature(r.Body, testAPIKey) {
		t.Error("X-Signature changed with a previous webhook secret")
	}
	opts.Format = FormatJSON
	j, err := Build(approved(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyJSONBody(j.Body, testSecret); err != nil {
		t.Errorf("the JSON body's signature is not the current secret's: %v", err)
	}
	opts.PreviousWebhookSecrets = []string{"not a secret"}
	if _, err := Build(approved(), opts); err == nil {
		t.Error("a malformed previous secret was accepted")
	}
}
