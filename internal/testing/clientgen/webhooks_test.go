package clientgen_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	// The Go receiver of docs/notifications.md imports this library;
	// requiring it here keeps it in go.mod and go.sum, so the scratch
	// module builds offline.
	_ "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

// docSnippet returns the one fenced block of docs/notifications.md whose
// first line is "// snippet: name".
func docSnippet(t *testing.T, name string) string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(root(t), "docs", "notifications.md"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	parts := strings.Split(string(md), "```")
	for i := 1; i < len(parts); i += 2 { // odd parts are inside fences
		_, code, _ := strings.Cut(parts[i], "\n")
		if strings.HasPrefix(code, "// snippet: "+name+"\n") {
			found = append(found, code)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one block marked %q in docs/notifications.md, found %d", name, len(found))
	}
	return found[0]
}

// delivery is one notification the stack sent, as relayed to the receiver.
type delivery struct {
	header http.Header
	body   []byte
	status int // the receiver's answer
}

// relay is the merchants' notify URL: it records each notification and
// passes it, unchanged, to the receiver under test, and the receiver's
// answer back to the notifier.
type relay struct {
	srv    *httptest.Server
	mu     sync.Mutex
	target string
	got    []delivery
}

func newRelay(t *testing.T) *relay {
	r := &relay{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		target := r.target
		r.mu.Unlock()
		status := forward(target, req.Header, body)
		r.mu.Lock()
		r.got = append(r.got, delivery{req.Header.Clone(), body, status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *relay) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// forward posts body with header to url and returns the answer's status
// (502 when there is none).
func forward(url string, header http.Header, body []byte) int {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return http.StatusBadGateway
	}
	req.Header = header.Clone()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return http.StatusBadGateway
	}
	resp.Body.Close()
	return resp.StatusCode
}

// received is a line of a receiver harness: its ports once listening, then
// one line per notification it verified and handled.
type received struct {
	Ports     map[string]int `json:"ports"`
	Receiver  string         `json:"receiver"`
	WebhookID string         `json:"webhookId"`
	Fields    map[string]any `json:"fields"`
}

// checkReceiver runs a documented receiver (started by cmd, with the
// merchants' secrets in SECRET_FORM and SECRET_JSON) against the
// notifications the local stack sends for an approval and a decline in each
// format: each must verify and reach the handler with its fields; a copy
// with its body or signature altered must be refused with 401.
func checkReceiver(t *testing.T, cmd func(env []string) *exec.Cmd) {
	s := testenv.Stack(t)
	relays := map[string]*relay{"form": newRelay(t), "json": newRelay(t)}
	merchants := map[string]testenv.Merchant{}
	for format, r := range relays {
		merchants[format] = testenv.NewMerchant(t, func(m *merchant.Merchant) {
			m.NotificationFormat, m.NotifyURL = format, r.srv.URL+"/notify"
		})
	}

	c := cmd(append(os.Environ(), "SECRET_FORM="+merchants["form"].WebhookSecret, "SECRET_JSON="+merchants["json"].WebhookSecret))
	var stderr bytes.Buffer
	c.Stderr = &stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	lines := make(chan received, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r received
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber() // identifiers are exact integers
			if err := dec.Decode(&r); err != nil {
				r.Receiver = "unparsable: " + sc.Text()
			}
			lines <- r
		}
	}()
	var ports map[string]int
	select {
	case r, ok := <-lines:
		if !ok || r.Ports == nil {
			t.Fatalf("receiver did not start: %+v\n%s", r, stderr.String())
		}
		ports = r.Ports
	case <-time.After(60 * time.Second):
		t.Fatalf("receiver did not start within 60 s\n%s", stderr.String())
	}
	for format, r := range relays {
		r.mu.Lock()
		r.target = fmt.Sprintf("http://127.0.0.1:%d/notify", ports[format])
		r.mu.Unlock()
	}

	// An approval and a decline for each merchant.
	type payment struct{ request, status string }
	want := map[string][]payment{}
	for format, m := range merchants {
		for _, card := range []struct{ number, status string }{{"4111111111111111", "1"}, {"4000000000000002", "2"}} {
			created := testenv.Do(t, "POST", s.Info.APIBase+"/payment-requests", m.APIKey, `{"amount":"25.00","unit":"EUR","referenceId":"wh-`+format+`"}`)
			if created.Status != 201 {
				t.Fatalf("create: %d %s", created.Status, created.Body)
			}
			id := strconv.FormatInt(int64(created.JSON(t)["id"].(float64)), 10)
			paid := testenv.Do(t, "POST", s.Info.APIBase+"/payments/h2h/1", m.APIKey, `{"name":"Ann Lee","email":"ann@example.com",
				"phoneNumber":"4915112345678","address":"1 Market Street","city":"Berlin","state":"BE","postalCode":"10115","country":"DE",
				"paymentRequestId":`+id+`,"card":{"number":"`+card.number+`","expiry":"12/39","cvc":"123"}}`)
			if paid.Status != 200 || fmt.Sprint(paid.JSON(t)["transactionStatusId"]) != card.status {
				t.Fatalf("pay with %s: %d %s", card.number, paid.Status, paid.Body)
			}
			want[format] = append(want[format], payment{id, card.status})
		}
	}

	// Each notification verified and handled, fields intact.
	handled := map[string]map[string]received{"form": {}, "json": {}} // format → request id → line
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for len(handled["form"]) < 2 || len(handled["json"]) < 2 {
		select {
		case <-tick.C:
			// A refused genuine notification fails now, not at the deadline.
			for format, r := range relays {
				for _, d := range r.deliveries() {
					if d.status != http.StatusNoContent {
						t.Fatalf("%s: receiver answered %d to a genuine notification: %s\n%s", format, d.status, d.body, stderr.String())
					}
				}
			}
		case r, ok := <-lines:
			if !ok {
				t.Fatalf("receiver exited\n%s", stderr.String())
			}
			var id string
			switch r.Receiver {
			case "form":
				id, _ = r.Fields["id"].(string)
			case "json":
				id = fmt.Sprint(r.Fields["paymentRequestId"])
			default:
				t.Fatalf("unexpected receiver line %+v", r)
			}
			handled[r.Receiver][id] = r
		case <-deadline:
			t.Fatalf("handled within 3 minutes: %v; relayed: form %d, json %d\n%s", handled, len(relays["form"].deliveries()),
				len(relays["json"].deliveries()), stderr.String())
		}
	}
	for format, payments := range want {
		for _, p := range payments {
			r, ok := handled[format][p.request]
			if !ok {
				t.Errorf("%s: no verified notification for request %s (got %v)", format, p.request, handled[format])
				continue
			}
			if !strings.HasPrefix(r.WebhookID, "msg_") {
				t.Errorf("%s: webhook-id %q", format, r.WebhookID)
			}
			switch format {
			case "form":
				if r.Fields["transactionStatusId"] != p.status || r.Fields["grossAmount"] != "25.00" || r.Fields["unit"] != "EUR" {
					t.Errorf("form notification of %s decoded as %v", p.request, r.Fields)
				}
			case "json":
				status := map[string]string{"1": "completed", "2": "failed"}[p.status]
				if r.Fields["status"] != status || r.Fields["amount"] != "25.00" || r.Fields["currency"] != "EUR" {
					t.Errorf("json notification of %s decoded as %v", p.request, r.Fields)
				}
			}
		}
	}

	// Every delivery was answered 204; altered copies are refused.
	for format, r := range relays {
		// The handler runs before the receiver answers, so the relay may
		// still be waiting for the answer of the last one.
		ds := r.deliveries()
		for end := time.Now().Add(30 * time.Second); len(ds) < 2 && time.Now().Before(end); ds = r.deliveries() {
			time.Sleep(50 * time.Millisecond)
		}
		if len(ds) < 2 {
			t.Fatalf("%s: %d deliveries relayed, want 2", format, len(ds))
		}
		for _, d := range ds {
			if d.status != http.StatusNoContent {
				t.Errorf("%s: receiver answered %d to a genuine notification: %s", format, d.status, d.body)
			}
		}
		d, url := ds[0], r.target
		if got := forward(url, d.header, d.body); got != http.StatusNoContent {
			t.Errorf("%s: the same notification again: %d, want 204 (duplicates are the handler's to skip)", format, got)
		}
		tampered := bytes.Replace(d.body, []byte("25.00"), []byte("95.00"), 1)
		if bytes.Equal(tampered, d.body) {
			t.Fatalf("%s: no amount to alter in %s", format, d.body)
		}
		if got := forward(url, d.header, tampered); got != http.StatusUnauthorized {
			t.Errorf("%s: altered body answered %d, want 401", format, got)
		}
		forged := d.header.Clone()
		forged.Set("webhook-signature", "v1,"+strings.Repeat("A", 43)+"=")
		if got := forward(url, forged, d.body); got != http.StatusUnauthorized {
			t.Errorf("%s: forged signature answered %d, want 401", format, got)
		}
	}
}

// TestStandardWebhooksNodeReceiverVerifiesNotifications runs the Node.js
// receiver of docs/notifications.md, built on the standardwebhooks npm
// package (pinned in infra/local), against real notifications of both
// formats.
func TestStandardWebhooksNodeReceiverVerifiesNotifications(t *testing.T) {
	needs.External(t, "node and infra/local npm tools")
	t.Parallel()
	r, dir := root(t), t.TempDir()
	if err := os.Symlink(filepath.Join(r, "infra", "local", "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "receiver.js"), docSnippet(t, "receiver-standardwebhooks.js"))
	write(t, filepath.Join(dir, "harness.js"), `
const { receiver } = require('./receiver.js');
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const ports = {};
let waiting = 2;
for (const [name, secret] of [['form', process.env.SECRET_FORM], ['json', process.env.SECRET_JSON]]) {
  const srv = receiver(secret, async (fields, webhookId) => out({ receiver: name, webhookId, fields }));
  srv.listen(0, '127.0.0.1', () => {
    ports[name] = srv.address().port;
    if (--waiting === 0) out({ ports });
  });
}
`)
	checkReceiver(t, func(env []string) *exec.Cmd {
		c := exec.Command("node", filepath.Join(dir, "harness.js"))
		c.Env = env
		return c
	})
}

// TestStandardWebhooksGoReceiverVerifiesNotifications runs the Go receiver
// of docs/notifications.md, built on the Standard Webhooks Go library (the
// version go.mod pins), against real notifications of both formats.
func TestStandardWebhooksGoReceiverVerifiesNotifications(t *testing.T) {
	needs.External(t, "a go build of a receiver program")
	t.Parallel()
	r, dir := root(t), t.TempDir()
	version := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/standard-webhooks/standard-webhooks/libraries")
	version.Dir = r
	v := strings.TrimSpace(string(run(t, version)))
	write(t, filepath.Join(dir, "go.mod"), "module receiver\n\ngo 1.24\n\nrequire github.com/standard-webhooks/standard-webhooks/libraries "+v+"\n")
	copyFile(t, filepath.Join(r, "go.sum"), filepath.Join(dir, "go.sum"))
	if err := os.MkdirAll(filepath.Join(dir, "webhooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "webhooks", "receiver.go"), docSnippet(t, "receiver_standardwebhooks.go"))
	write(t, filepath.Join(dir, "main.go"), `package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"sync"

	"receiver/webhooks"
)

func main() {
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	emit := func(v any) {
		mu.Lock()
		defer mu.Unlock()
		_ = out.Encode(v)
	}
	ports := map[string]int{}
	for _, f := range []struct{ name, secret string }{{"form", os.Getenv("SECRET_FORM")}, {"json", os.Getenv("SECRET_JSON")}} {
		h, err := webhooks.Handler(f.secret, func(id string, fields map[string]any) error {
			emit(map[string]any{"receiver": f.name, "webhookId": id, "fields": fields})
			return nil
		})
		if err != nil {
			panic(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		ports[f.name] = l.Addr().(*net.TCPAddr).Port
		go http.Serve(l, h)
	}
	emit(map[string]any{"ports": ports})
	select {}
}
`)
	build := exec.Command("go", "build", "-o", "receiver", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
	run(t, build)
	checkReceiver(t, func(env []string) *exec.Cmd {
		c := exec.Command(filepath.Join(dir, "receiver"))
		c.Env = env
		return c
	})
}
