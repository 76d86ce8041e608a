package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/webhook"
)

type captured struct {
	header http.Header
	body   []byte
}

// `webhooks listen --forward-to` with `trigger`, end to end on the local
// stack: listen points the seeded merchant's notify URL at itself; each
// triggered payment's notification is printed as verified and reaches the
// forward target with the original body and signature headers (they verify
// with the key and webhook secret of stack.json); on exit the notify URL is
// restored.
func TestListenForwardsTriggeredNotifications(t *testing.T) {
	s := testenv.Stack(t)
	seed := s.Info.Merchant
	var mu sync.Mutex
	var got []captured
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, captured{r.Header.Clone(), b})
		mu.Unlock()
	}))
	defer target.Close()

	before, _, code := payctl(t, "merchant", "show", "--id", seed.ID)
	if code != 0 {
		t.Fatal("show seeded merchant")
	}
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--local", "--state-dir", testenv.StateDir(t), "webhooks", "listen", "--port", strconv.Itoa(port),
			"--forward-to", target.URL + "/hooks"}, &stdout, &stderr)
	}()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(stderr.String(), "payctl: Ready"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listen not ready: %s", stderr.String())
		}
	}
	listenURL := fmt.Sprintf("http://127.0.0.1:%d/", port)
	if m, _, _ := payctl(t, "merchant", "show", "--id", seed.ID); m["notifyUrl"] != listenURL {
		t.Fatalf("notify URL during the session: %v, want %s", m["notifyUrl"], listenURL)
	}

	for _, c := range []struct {
		event  string
		status string // transactionStatusId of the notification
	}{{"approved", "1"}, {"declined", "2"}, {"3ds", "1"}} {
		res, stderrOut, code := payctl(t, "trigger", c.event)
		if code != 0 {
			t.Fatalf("trigger %s: exit %d %s", c.event, code, stderrOut)
		}
		reqID := strconv.FormatInt(int64(res["paymentRequestId"].(float64)), 10)
		if strconv.Itoa(int(res["transactionStatusId"].(float64))) != c.status {
			t.Fatalf("trigger %s: %v", c.event, res)
		}

		// The listener's line for this request.
		var line map[string]any
		for deadline := time.Now().Add(60 * time.Second); line == nil; time.Sleep(50 * time.Millisecond) {
			for _, l := range strings.Split(stdout.String(), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && m["fields"].(map[string]any)["id"] == reqID {
					line = m
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("trigger %s: no line for request %s:\n%s\n%s", c.event, reqID, stdout.String(), stderr.String())
			}
		}
		want := map[string]string{"approved": "approved", "declined": "declined", "3ds": "approved"}[c.event]
		fwd, _ := line["forward"].(map[string]any)
		if line["event"] != want || line["fields"].(map[string]any)["transactionStatusId"] != c.status ||
			line["xSignature"].(map[string]any)["valid"] != true || line["standardWebhook"].(map[string]any)["valid"] != true ||
			fwd == nil || fwd["status"] != 200.0 || fwd["url"] != target.URL+"/hooks" {
			t.Fatalf("trigger %s: line %v", c.event, line)
		}

		// What the target received: the same body and signature headers.
		var in *captured
		mu.Lock()
		for i := range got {
			if v, err := url.ParseQuery(string(got[i].body)); err == nil && v.Get("id") == reqID {
				in = &got[i]
			}
		}
		mu.Unlock()
		if in == nil {
			t.Fatalf("trigger %s: the forward target did not receive request %s", c.event, reqID)
		}
		if !webhook.VerifyXSignature(in.body, in.header.Get(webhook.HeaderXSignature), seed.APIKey) {
			t.Fatalf("trigger %s: forwarded X-Signature does not verify over the forwarded body", c.event)
		}
		if err := webhook.VerifyStandardWebhook(in.header, in.body, seed.WebhookSecret, time.Now(), webhook.DefaultTolerance); err != nil {
			t.Fatalf("trigger %s: forwarded webhook-signature with stack.json's secret: %v", c.event, err)
		}
		if in.header.Get(webhook.HeaderWebhookID) != line["webhookId"] || in.header.Get("Content-Type") != line["contentType"] {
			t.Fatalf("trigger %s: forwarded headers %v differ from the received ones %v", c.event, in.header, line)
		}
	}
	if !strings.Contains(stderr.String(), "--> approved") || !strings.Contains(stderr.String(), "<-- [200] POST "+target.URL+"/hooks") {
		t.Errorf("human lines missing on stderr:\n%s", stderr.String())
	}

	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("listen exit %d: %s", code, stderr.String())
	}
	if m, _, _ := payctl(t, "merchant", "show", "--id", seed.ID); m["notifyUrl"] != before["notifyUrl"] {
		t.Fatalf("notify URL not restored: %v, was %v", m["notifyUrl"], before["notifyUrl"])
	}
}

// `trigger pending` leaves the attempt pending: nothing is notified yet.
func TestTriggerPending(t *testing.T) {
	res, stderr, code := payctl(t, "trigger", "pending")
	if code != 0 || res["transactionStatusId"] != 3.0 || res["testInput"] != "pending@upi" {
		t.Fatalf("trigger pending: exit %d %v %s", code, res, stderr)
	}
	st := testenv.Do(t, "GET", testenv.Stack(t).Info.APIBase+"/payment-requests/status/"+strconv.FormatInt(int64(res["paymentRequestId"].(float64)), 10),
		testenv.Stack(t).Info.Merchant.APIKey, nil)
	if st.Status != 200 || st.JSON(t)["transactionStatusId"] != 3.0 {
		t.Fatalf("status after trigger pending: %d %s", st.Status, st.Body)
	}
}

// The service sees the forward target's answer: a target that fails makes
// the notification fail (and be retried) as it would in production; an
// unreachable one is a 502 with the error on the line.
func TestListenRelaysTheForwardStatus(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	apiKey := "prk_test_" + strings.Repeat("b", 40)
	secret, _ := webhook.NewWebhookSecret()
	for _, c := range []struct {
		target string
		status int
	}{{failing.URL, http.StatusServiceUnavailable}, {closedURL, http.StatusBadGateway}} {
		port, err := devstack.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var out, errOut syncBuf
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"webhooks", "listen", "--port", strconv.Itoa(port), "--api-key", apiKey, "--webhook-secret", secret,
				"--forward-to", c.target}, &out, &errOut)
		}()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(errOut.String(), "payctl: Ready"); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("listen not ready: %s", errOut.String())
			}
		}
		n := webhook.Notification{ID: 8, TransactionID: 9, TransactionStatusID: 2, PaymentRequestStatusID: 2, MerchantID: "mer_x",
			Unit: "EUR", GrossAmount: decimal.RequireFromString("10"), NetAmount: decimal.RequireFromString("10"), Code: "999", Message: "Declined"}
		req, err := webhook.Build(n, webhook.Options{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), APIKey: apiKey, WebhookSecret: secret, Decimals: 2})
		if err != nil {
			t.Fatal(err)
		}
		attempt := webhook.Sender{Client: &http.Client{Timeout: 40 * time.Second}}.Send(context.Background(), req)
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("exit %d", code)
		}
		if attempt.StatusCode != c.status {
			t.Fatalf("forward to %s: the service got %d, want %d", c.target, attempt.StatusCode, c.status)
		}
		var line listenLine
		if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &line); err != nil || line.Forward == nil || line.Event != "declined" {
			t.Fatalf("line %q: %v", out.String(), err)
		}
		if c.status == http.StatusBadGateway && (line.Forward.Error == "" || line.Forward.Status != 0) {
			t.Fatalf("unreachable target: forward %+v", line.Forward)
		}
		if c.status != http.StatusBadGateway && line.Forward.Status != c.status {
			t.Fatalf("forward %+v", line.Forward)
		}
	}
	if code := run(context.Background(), []string{"webhooks", "listen", "--merchant", "mer_x", "--api-key", apiKey}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("--merchant without --local: exit %d, want 2", code)
	}
}
