package webhook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer lets the test read what the handler goroutine wrote.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []Received {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Received
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var r Received
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		out = append(out, r)
	}
	return out
}

func TestReceiverEndToEnd(t *testing.T) {
	var out lockedBuffer
	srv := httptest.NewServer(NewReceiver(testAPIKey, testSecret, &out))
	defer srv.Close()
	sender := localSender(5 * time.Second)

	for _, format := range []Format{FormatForm, FormatJSON} {
		opts := testOptions(time.Now())
		opts.URL, opts.Format = srv.URL+"/hook", format
		req, err := Build(declined(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if a := sender.Send(context.Background(), req); !a.Delivered() {
			t.Fatalf("%s: %+v", format, a)
		}
	}
	// A forged one: right shape, signed with other keys.
	opts := testOptions(time.Now())
	opts.URL, opts.APIKey = srv.URL, "pk_wrong"
	opts.WebhookSecret, _ = NewWebhookSecret()
	forged, _ := Build(approved(), opts)
	if a := sender.Send(context.Background(), forged); !a.Delivered() {
		t.Fatalf("the receiver answers 200 even to a forgery: %+v", a)
	}

	lines := out.lines(t)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	form, js, bad := lines[0], lines[1], lines[2]

	if form.Format != FormatForm || form.WebhookID != "msg_987654321" || form.ParseError != "" {
		t.Fatalf("form line %+v", form)
	}
	if form.Fields["grossAmount"] != "10.50" || form.Fields["code"] != "005" || form.Fields["clientEmail"] != "ada@example.com" {
		t.Fatalf("form fields %v", form.Fields)
	}
	if !form.XSignature.Valid || !form.StandardWebhook.Valid || form.JSONSignature != nil {
		t.Fatalf("form checks %+v %+v %+v", form.XSignature, form.StandardWebhook, form.JSONSignature)
	}

	if js.Format != FormatJSON || js.Fields["status"] != "failed" || js.Fields["amount"] != "10.50" {
		t.Fatalf("json line %+v", js)
	}
	if !js.XSignature.Valid || !js.StandardWebhook.Valid || js.JSONSignature == nil || !js.JSONSignature.Valid {
		t.Fatalf("json checks %+v %+v %+v", js.XSignature, js.StandardWebhook, js.JSONSignature)
	}

	if bad.XSignature.Valid || bad.StandardWebhook.Valid || bad.XSignature.Error == "" {
		t.Fatalf("forged checks %+v %+v", bad.XSignature, bad.StandardWebhook)
	}

	raw := func() string { out.mu.Lock(); defer out.mu.Unlock(); return out.b.String() }()
	for _, secret := range []string{testAPIKey, testSecret, opts.WebhookSecret} {
		if strings.Contains(raw, secret) {
			t.Fatal("the receiver printed a key")
		}
	}
}

func TestReceiverWithoutKeysAndMethods(t *testing.T) {
	var out lockedBuffer
	h := NewReceiver("", "", &out)

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", w.Code)
	}

	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("hello"))
	r.Header.Set("Content-Type", "text/plain")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("POST: %d", w.Code)
	}
	lines := out.lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	l := lines[0]
	if l.ParseError == "" || l.XSignature.Valid || !strings.Contains(l.XSignature.Error, "no API key") ||
		!strings.Contains(l.StandardWebhook.Error, "no webhook secret") {
		t.Fatalf("%+v", l)
	}
}
