// Package clientgen_test checks that docs/openapi.yaml works in the code
// generators merchants use, as generated: oapi-codegen (pinned as a Go tool
// in go.mod, default configuration) and openapi-typescript with
// openapi-fetch (pinned in infra/local). Each test generates its client into
// a temporary directory, compiles a merchant's program against it and runs
// it on the local stack (docs/openapi.md).
package clientgen_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	// The generated Go client imports these packages; importing them here
	// keeps their modules in go.mod, go.sum and the module cache, so the
	// scratch module builds offline (GOPROXY=off).
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/oapi-codegen/runtime/types"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// root is the repository root (this package is internal/testing/clientgen).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs cmd and returns its stdout; a failure shows stderr.
func run(t *testing.T, cmd *exec.Cmd) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s\n%s", strings.Join(cmd.Args, " "), err, stderr.String(), stdout.String())
	}
	t.Logf("%s (%s)", strings.Join(cmd.Args, " "), time.Since(start).Round(time.Millisecond))
	return stdout.Bytes()
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b))
}

// flowEnv is the environment of a merchant program: the API, a merchant's
// key and the key of a merchant allowed one request a minute (for a 429).
func flowEnv(t *testing.T) []string {
	m := testenv.NewMerchant(t)
	limited := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.RateLimitPerMinute = 1 })
	return append(os.Environ(), "PAYREQ_API="+testenv.Stack(t).Info.APIBase, "PAYREQ_KEY="+m.APIKey,
		"PAYREQ_LIMITED_KEY="+limited.APIKey, "PAYREQ_RUN="+strconv.FormatInt(time.Now().UnixNano(), 36))
}

type problem struct {
	Status     int    `json:"status"`
	Type       string `json:"type"`
	Code       string `json:"code"`
	RetryAfter int    `json:"retryAfter"`
}

// summary is what a merchant program observed (goflow.go, tsflow.mts).
type summary struct {
	RequestID             int64              `json:"requestId"`
	Replayed              bool               `json:"replayed"`
	ReplayedSameID        bool               `json:"replayedSameId"`
	Amount                string             `json:"amount"`
	StatusTransactionNull bool               `json:"statusTransactionNull"`
	SessionToken          bool               `json:"sessionToken"`
	PaymentURL            string             `json:"paymentUrl"`
	PaymentID             string             `json:"paymentId"`
	TransactionID         int64              `json:"transactionId"`
	TransactionNumber     string             `json:"transactionNumber"`
	TransactionStatusID   int                `json:"transactionStatusId"`
	PaidStatusID          int                `json:"paidStatusId"`
	PaidTransactionID     int64              `json:"paidTransactionId"`
	CardStatusID          int                `json:"cardStatusId"`
	TxByID                int64              `json:"txById"`
	TxByIDAmount          string             `json:"txByIdAmount"`
	TxByNumber            int64              `json:"txByNumber"`
	CancelledID           int64              `json:"cancelledId"`
	CancelledStatusID     int                `json:"cancelledStatusId"`
	Amounts               map[string]string  `json:"amounts"`
	Problems              map[string]problem `json:"problems"`
}

// checkFlow checks a program's observations, and the service's own record
// of them, read without the generated client. amount25 is 25.00 EUR as the
// client decodes it; amounts maps "amount unit" to the decoded value.
func checkFlow(t *testing.T, out []byte, env []string, amount25 string, amounts map[string]string) {
	t.Helper()
	var s summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("program output %q: %v", out, err)
	}
	if !s.Replayed || !s.ReplayedSameID {
		t.Errorf("create repeated with its Idempotency-Key: replayed %v, same id %v; want both", s.Replayed, s.ReplayedSameID)
	}
	if s.Amount != amount25 || !s.StatusTransactionNull {
		t.Errorf("created request: amount %q (want %q), transaction fields null before an attempt: %v", s.Amount, amount25, s.StatusTransactionNull)
	}
	apiBase := testenv.Stack(t).Info.APIBase
	if !s.SessionToken || !strings.HasPrefix(s.PaymentURL, apiBase+"/") {
		t.Errorf("checkout session: token %v, paymentUrl %q", s.SessionToken, s.PaymentURL)
	}
	if s.TransactionID == 0 || s.PaymentID != strconv.FormatInt(s.TransactionID, 10) || s.TransactionStatusID != 1 || s.TransactionNumber == "" {
		t.Errorf("h2h payment: paymentId %q transactionId %d transactionNumber %q status %d; want an approval", s.PaymentID, s.TransactionID, s.TransactionNumber, s.TransactionStatusID)
	}
	if s.PaidStatusID != 1 || s.PaidTransactionID != s.TransactionID || s.CardStatusID != 1 {
		t.Errorf("after payment: request status %d transaction %d, card status %d", s.PaidStatusID, s.PaidTransactionID, s.CardStatusID)
	}
	if s.TxByID != s.TransactionID || s.TxByNumber != s.TransactionID || s.TxByIDAmount != amount25 {
		t.Errorf("GET /transactions/{id}: by id %d (amount %q), by number %d; want %d", s.TxByID, s.TxByIDAmount, s.TxByNumber, s.TransactionID)
	}
	if s.CancelledID == 0 || s.CancelledStatusID != 3 {
		t.Errorf("cancel: id %d status %d, want status 3", s.CancelledID, s.CancelledStatusID)
	}
	for k, want := range amounts {
		if got, ok := s.Amounts[k]; !ok || got != want {
			t.Errorf("amount %s decoded as %q, want %q", k, got, want)
		}
	}
	for status, code := range map[string]string{"400": "026", "401": "011", "404": "043", "429": ""} {
		p, ok := s.Problems[status]
		if !ok || strconv.Itoa(p.Status) != status || p.Code != code || !strings.HasPrefix(p.Type, "https://") {
			t.Errorf("%s problem decoded as %+v (present %v), want status %s code %q", status, p, ok, status, code)
		}
	}
	if p := s.Problems["429"]; p.RetryAfter <= 0 {
		t.Errorf("429 Retry-After decoded as %d", p.RetryAfter)
	}

	// The service's own record, through plain HTTP.
	key := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PAYREQ_KEY="); ok {
			key = v
		}
	}
	for id, want := range map[int64]float64{s.RequestID: 1, s.CancelledID: 3} {
		got := testenv.Do(t, "GET", apiBase+"/payment-requests/status/"+strconv.FormatInt(id, 10), key, nil).JSON(t)
		if got["paymentRequestStatusId"] != want {
			t.Errorf("request %d: paymentRequestStatusId %v, want %v", id, got["paymentRequestStatusId"], want)
		}
	}
}

// TestOapiCodegenClientRunsMerchantFlow: oapi-codegen generates a client
// from docs/openapi.yaml with its default configuration (types and client),
// it compiles, and a merchant program using it goes through the whole flow.
// Amounts arrive as json.Number (x-go-type), exact up to the largest amount
// the service accepts, 18 decimal places included.
func TestOapiCodegenClientRunsMerchantFlow(t *testing.T) {
	needs.External(t, "oapi-codegen, a go build and the local stack")
	t.Parallel()
	r, dir := root(t), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "payreq"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "oapi-codegen.yaml"), "package: payreq\ngenerate:\n  models: true\n  client: true\noutput: "+
		filepath.Join(dir, "payreq", "payreq.gen.go")+"\n")
	gen := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), filepath.Join(r, "docs", "openapi.yaml"))
	gen.Dir = r
	run(t, gen)

	// A scratch module, the way a merchant would have it: the generated
	// package and its runtime at the version go.mod pins.
	version := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/oapi-codegen/runtime")
	version.Dir = r
	v := strings.TrimSpace(string(run(t, version)))
	write(t, filepath.Join(dir, "go.mod"), "module clientflow\n\ngo 1.24\n\nrequire github.com/oapi-codegen/runtime "+v+"\n")
	copyFile(t, filepath.Join(r, "go.sum"), filepath.Join(dir, "go.sum"))
	copyFile(t, "testdata/goflow.go", filepath.Join(dir, "main.go"))
	build := exec.Command("go", "build", "-o", "flow", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
	run(t, build)

	env := flowEnv(t)
	flow := exec.Command(filepath.Join(dir, "flow"))
	flow.Env = env
	checkFlow(t, run(t, flow), env, "25.00", map[string]string{
		"1234567.89 EUR": "1234567.89", "16777217 JPY": "16777217", "999999999999999.99 EUR": "999999999999999.99",
		"999999999999999 JPY": "999999999999999", "0.123456789012345678 ETH": "0.123456789012345678",
	})
}

// TestOpenAPITypeScriptClientRunsMerchantFlow: openapi-typescript generates
// the types, a merchant program using them with openapi-fetch type-checks
// under tsc --strict, and runs the whole flow under Node.js. Amounts are
// JavaScript numbers: exact up to 15 significant digits (docs/openapi.md).
func TestOpenAPITypeScriptClientRunsMerchantFlow(t *testing.T) {
	needs.External(t, "node, infra/local npm tools and the local stack")
	t.Parallel()
	r, dir := root(t), t.TempDir()
	bin := filepath.Join(r, "infra", "local", "node_modules", ".bin")
	// The program resolves openapi-fetch from infra/local's pinned modules.
	if err := os.Symlink(filepath.Join(r, "infra", "local", "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	run(t, exec.Command(filepath.Join(bin, "openapi-typescript"), filepath.Join(r, "docs", "openapi.yaml"), "-o", filepath.Join(dir, "schema.d.ts")))
	copyFile(t, "testdata/tsflow.mts", filepath.Join(dir, "flow.mts"))
	tsc := exec.Command(filepath.Join(bin, "tsc"), "--strict", "--noEmitOnError", "--target", "es2022", "--module", "nodenext",
		"--moduleResolution", "nodenext", "flow.mts", "schema.d.ts")
	tsc.Dir = dir
	run(t, tsc)

	env := flowEnv(t)
	flow := exec.Command("node", filepath.Join(dir, "flow.mjs"))
	flow.Env = env
	checkFlow(t, run(t, flow), env, "25", map[string]string{
		"1234567.89 EUR": "1234567.89", "16777217 JPY": "16777217", "9999999999999.99 EUR": "9999999999999.99",
		"999999999999999 JPY": "999999999999999",
	})
}
