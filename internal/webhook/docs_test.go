package webhook

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The guide's examples are signed with these (documented, example-only) keys.
const (
	docAPIKey = "prk_test_NqVwYS81VP7Hb1DX8pPd5khxE3pyIgKpaUnArl63"
	docSecret = "whsec_ZXhhbXBsZS13ZWJob29rLXNlY3JldC1mb3ItZG9jcyE="
	docPath   = "../../docs/notifications.md"
)

var docTime = time.Unix(1772366400, 0) // 2026-03-01T12:00:00Z

func docNotification() Notification {
	return Notification{
		ID: 183910485123072, TransactionID: 183910485127168,
		TransactionStatusID: TxApproved, PaymentRequestStatusID: RequestPaid,
		MerchantID: "mer_3kTMd9cPqLx2", Unit: "EUR",
		GrossAmount: decimal.RequireFromString("25"), Fee: decimal.RequireFromString("0.75"),
		NetAmount: decimal.RequireFromString("24.25"), ReferenceID: "order-1042", Notes: "2 tickets",
		ClientID: "cus_981", ClientName: "Jane Doe", ClientEmail: "jane@example.com",
		ClientPhone: "+14155550123", ClientMemberID: "gold-7",
	}
}

func docDeclined() Notification {
	n := docNotification()
	n.TransactionStatusID, n.PaymentRequestStatusID = TxDeclined, RequestUnpaid
	n.Code, n.Message = "005", "Insufficient funds"
	return n
}

type codeBlock struct{ lang, text string }

// codeBlocks returns the fenced blocks of a markdown file, fences possibly
// indented (inside list items).
func codeBlocks(t *testing.T) []codeBlock {
	t.Helper()
	md, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []codeBlock
	var cur *codeBlock
	indent := ""
	for line := range strings.SplitSeq(string(md), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &codeBlock{lang: strings.TrimPrefix(trimmed, "```")}
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case cur != nil && trimmed == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return blocks
}

// snippet returns the one block of lang with the marker comment in its first
// lines (PHP's comes after "<?php").
func snippet(t *testing.T, lang, marker string) string {
	t.Helper()
	var found []string
	for _, b := range codeBlocks(t) {
		head := strings.SplitN(b.text, "\n", 3)
		if b.lang == lang && strings.Contains(strings.Join(head[:min(len(head), 2)], "\n"), marker) {
			found = append(found, b.text)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one ```%s block marked %q, found %d", lang, marker, len(found))
	}
	return found[0]
}

// TestDocExamples keeps the guide's example requests identical to what Build
// produces for them, signatures included.
func TestDocExamples(t *testing.T) {
	var examples []string
	for _, b := range codeBlocks(t) {
		if b.lang == "http" {
			examples = append(examples, b.text)
		}
	}
	if len(examples) != 2 {
		t.Fatalf("want 2 http examples, found %d", len(examples))
	}
	for i, c := range []struct {
		n      Notification
		format Format
	}{{docNotification(), FormatForm}, {docDeclined(), FormatJSON}} {
		r, err := Build(c.n, Options{
			URL: "https://merchant.example/payments/notify", Format: c.format, Decimals: 2,
			APIKey: docAPIKey, WebhookSecret: docSecret, Now: docTime,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "POST /payments/notify HTTP/1.1\nHost: merchant.example\n"
		for _, k := range []string{"Content-Type", "User-Agent", HeaderXSignature, HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature} {
			want += k + ": " + r.Header.Get(k) + "\n"
		}
		want += "\n" + string(r.Body) + "\n"
		if examples[i] != want {
			t.Errorf("%s example in %s is out of date; it should read:\n%s", c.format, docPath, want)
		}
	}
}

// snippetCase is one notification handed to a documented verifier.
type snippetCase struct {
	Name    string            `json:"name"`
	Body    []byte            `json:"body"` // base64 in JSON
	Headers map[string]string `json:"headers"`
	APIKey  string            `json:"apiKey"`
	Secret  string            `json:"secret"`
	Want    snippetResult     `json:"-"`
}

type snippetResult struct {
	X    bool `json:"x"`    // X-Signature
	SW   bool `json:"sw"`   // Standard Webhooks
	JSON bool `json:"json"` // embedded JSON signature
}

func snippetCases(t *testing.T) []snippetCase {
	now := time.Now()
	build := func(n Notification, f Format, at time.Time) Request {
		r, err := Build(n, Options{URL: "https://m.example/n", Format: f, Decimals: 2, APIKey: docAPIKey, WebhookSecret: docSecret, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mk := func(name string, r Request, want snippetResult) snippetCase {
		h := map[string]string{}
		for k := range r.Header {
			h[strings.ToLower(k)] = r.Header.Get(k)
		}
		return snippetCase{Name: name, Body: r.Body, Headers: h, APIKey: docAPIKey, Secret: docSecret, Want: want}
	}
	form, js := build(docNotification(), FormatForm, now), build(docDeclined(), FormatJSON, now)
	cases := []snippetCase{
		mk("form", form, snippetResult{X: true, SW: true}),
		mk("json", js, snippetResult{X: true, SW: true, JSON: true}),
		mk("stale form", build(docNotification(), FormatForm, now.Add(-10*time.Minute)), snippetResult{X: true}),
	}

	tampered := mk("tampered form body", form, snippetResult{})
	tampered.Body = bytes.Replace(form.Body, []byte("grossAmount=25.00"), []byte("grossAmount=95.00"), 1)
	cases = append(cases, tampered)

	tamperedJSON := mk("tampered json amount", js, snippetResult{})
	tamperedJSON.Body = bytes.Replace(js.Body, []byte(`"amount":"25.00"`), []byte(`"amount":"95.00"`), 1)
	cases = append(cases, tamperedJSON)

	wrongKeys := mk("other keys", form, snippetResult{})
	wrongKeys.APIKey = "prk_test_someoneelse"
	wrongKeys.Secret, _ = NewWebhookSecret()
	cases = append(cases, wrongKeys)

	forged := mk("forged signatures", form, snippetResult{})
	forged.Headers["x-signature"] = SignXSignature(form.Body, "guess")
	forged.Headers["webhook-signature"] = "v1," + SignXSignature(form.Body, "guess")[:43] + "="
	cases = append(cases, forged)

	rotated := mk("several signatures", form, snippetResult{X: true, SW: true})
	rotated.Headers["webhook-signature"] = "v1,bm90IHRoZSByaWdodCBvbmU= " + form.Header.Get(HeaderWebhookSignature)
	cases = append(cases, rotated)

	var j map[string]any
	_ = json.Unmarshal(js.Body, &j)
	j["signature"] = strings.Repeat("0", 128)
	badMember := mk("json signature member forged", js, snippetResult{})
	badMember.Body, _ = json.Marshal(j)
	cases = append(cases, badMember)
	return cases
}

// runSnippet feeds the cases to a harness on stdin and compares its verdicts.
func runSnippet(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cases := snippetCases(t)
	in, _ := json.Marshal(cases)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	var got []snippetResult
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("harness output %q: %v", out, err)
	}
	for i, c := range cases {
		if got[i] != c.Want {
			t.Errorf("%s: got %+v, want %+v", c.Name, got[i], c.Want)
		}
	}
}

// tool finds an interpreter; CI must have it, a developer may not.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDocSnippetNode(t *testing.T) {
	node := tool(t, "node")
	dir := t.TempDir()
	write(t, dir, "verify.js", snippet(t, "js", "snippet: verify.js"))
	write(t, dir, "harness.js", `
const v = require('./verify.js');
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(cases.map((c) => {
  const body = Buffer.from(c.body, 'base64');
  return {
    x: v.verifyXSignature(body, c.headers['x-signature'], c.apiKey),
    sw: v.verifyStandardWebhook(body, c.headers, c.secret),
    json: v.verifyJsonSignature(body, c.secret),
  };
})));
`)
	runSnippet(t, exec.Command(node, filepath.Join(dir, "harness.js")))
}

func TestDocSnippetPython(t *testing.T) {
	python := tool(t, "python3")
	dir := t.TempDir()
	write(t, dir, "verify.py", snippet(t, "python", "snippet: verify.py"))
	write(t, dir, "harness.py", `
import base64, json, sys
from verify import verify_x_signature, verify_standard_webhook, verify_json_signature
out = []
for c in json.load(sys.stdin):
    body = base64.b64decode(c["body"])
    out.append({
        "x": verify_x_signature(body, c["headers"].get("x-signature", ""), c["apiKey"]),
        "sw": verify_standard_webhook(body, c["headers"], c["secret"]),
        "json": verify_json_signature(body, c["secret"]),
    })
sys.stdout.write(json.dumps(out))
`)
	cmd := exec.Command(python, "-B", filepath.Join(dir, "harness.py"))
	cmd.Dir = dir
	runSnippet(t, cmd)
}

func TestDocSnippetGo(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a program")
	}
	goTool := tool(t, "go")
	dir := t.TempDir()
	write(t, dir, "go.mod", "module snippet\n\ngo 1.22\n")
	write(t, dir, "webhooks/verify.go", snippet(t, "go", "snippet: verify.go"))
	write(t, dir, "main.go", `package main

import (
	"encoding/json"
	"net/http"
	"os"
	"time"

	"snippet/webhooks"
)

func main() {
	var cases []struct {
		Body    []byte
		Headers map[string]string
		APIKey  string
		Secret  string
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	out := []map[string]bool{}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		out = append(out, map[string]bool{
			"x":    webhooks.VerifyXSignature(c.Body, h.Get("X-Signature"), c.APIKey),
			"sw":   webhooks.VerifyStandardWebhook(c.Body, h, c.Secret, time.Now()),
			"json": webhooks.VerifyJSONSignature(c.Body, c.Secret),
		})
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
`)
	cmd := exec.Command(goTool, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
	runSnippet(t, cmd)
}

func TestDocSnippetPHPIsPresent(t *testing.T) {
	// PHP is not installed here, so the snippet is only checked to exist
	// and to define the three functions.
	php := snippet(t, "php", "snippet: verify.php")
	for _, fn := range []string{"function verify_x_signature(", "function verify_standard_webhook(", "function verify_json_signature(", "hash_equals("} {
		if !strings.Contains(php, fn) {
			t.Errorf("PHP snippet lacks %s", fn)
		}
	}
}
