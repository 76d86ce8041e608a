// Package testenv gives integration tests a real local stack: local AWS
// emulators on random ports (DynamoDB Local + fauxqs), the template's
// resources and the functions behind the local API gateway, started once
// per test binary. When AWS_ENDPOINT_URL is set (LocalStack), that endpoint
// is used instead.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/mail"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testing/needs"
	"github.com/payreq/payreq/internal/webhook"
)

// Options are used when the shared stack starts; a TestMain may set them
// (e.g. Env to scale retry schedules) before the first Stack call.
var Options devstack.Options

var (
	once     sync.Once
	stack    *devstack.Stack
	startErr error
	stateDir string
)

// afterAll are what Main runs once the tests are done (AfterAll).
var (
	afterMu  sync.Mutex
	afterAll []func()
)

// AfterAll registers f to run once the package's tests are done, before
// Main stops the stack: the end of what a test started for the whole
// package (a mock server shared by several tests).
func AfterAll(f func()) {
	afterMu.Lock()
	defer afterMu.Unlock()
	afterAll = append(afterAll, f)
}

// Main is TestMain for packages using Stack: it stops the stack afterwards.
func Main(m *testing.M) {
	code := m.Run()
	afterMu.Lock()
	for i := len(afterAll) - 1; i >= 0; i-- {
		afterAll[i]()
	}
	afterMu.Unlock()
	if code != 0 && stateDir != "" {
		// The emulators' own words, for a failure CI shows only once.
		for _, name := range []string{"dynamodb-local", "fauxqs"} {
			if b, err := os.ReadFile(stateDir + "/logs/" + name + ".log"); err == nil && len(b) > 0 {
				os.Stderr.Write([]byte("---- " + name + " log (tail) ----\n"))
				os.Stderr.Write(b[max(0, len(b)-4000):])
			}
		}
	}
	if stack != nil {
		stack.Close()
	}
	if stateDir != "" {
		os.RemoveAll(stateDir)
	}
	os.Exit(code)
}

// Stack returns the shared running stack, starting it on first use.
// Under -short it skips tb (needs.External).
func Stack(tb testing.TB) *devstack.Stack {
	tb.Helper()
	needs.External(tb)
	once.Do(func() {
		stateDir, startErr = os.MkdirTemp("", "payreq-test-")
		if startErr != nil {
			return
		}
		// Room for the first start after npm ci, which also builds DynamoDB
		// Local's launcher (devstack), on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		opts := Options
		opts.StateDir, opts.APIPort = stateDir, 0
		stack, startErr = devstack.Start(ctx, opts)
	})
	if startErr != nil {
		tb.Fatalf("start local stack: %v", startErr)
	}
	return stack
}

// PatientStore is a store over s's tables for what a test seeds and checks,
// with more patience than the service's own client (10 attempts, not 3). An
// emulator that stalls for 15 s on a loaded machine may fail the service's
// call, which the service must survive, but must not fail the test's look
// at the outcome. Code under test keeps the production client.
func PatientStore(tb testing.TB, s *devstack.Stack) *dynamo.Store {
	tb.Helper()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return dynamo.New(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 10 }), s.Tables())
}

// Mailbox is the shared stack's local mailbox: the dashboard's e-mails.
func Mailbox(tb testing.TB) mail.Dir { return mail.Dir(Stack(tb).Info.Mail) }

// StateDir is the shared stack's state directory.
func StateDir(tb testing.TB) string { Stack(tb); return stateDir }

// Merchant is a merchant created for one test, with its plaintext key.
type Merchant struct {
	*merchant.Merchant
	APIKey        string
	WebhookSecret string
}

// NewMerchant creates a sandbox merchant, optionally adjusted by mutate.
func NewMerchant(tb testing.TB, mutate ...func(*merchant.Merchant)) Merchant {
	tb.Helper()
	s := Stack(tb)
	key, err := devstack.SealKey(stateDir)
	if err != nil {
		tb.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		tb.Fatal(err)
	}
	apiKey := merchant.NewAPIKey(true)
	now := time.Now().UTC()
	m := &merchant.Merchant{ID: merchant.NewID(), Name: "Test Shop", Sandbox: true, Methods: merchant.AllSelectors(),
		APIKeyHash: merchant.HashAPIKey(apiKey), APIKeyPrefix: merchant.KeyPrefix(apiKey),
		CreatedAt: now, UpdatedAt: now}
	m.SealedAPIKey = sealer.Seal(apiKey, m.ID)
	secret, err := webhook.NewWebhookSecret()
	if err != nil {
		tb.Fatal(err)
	}
	m.SealedSecret = sealer.Seal(secret, m.ID)
	for _, f := range mutate {
		f(m)
	}
	Seeded(tb, "merchant", s.Store.CreateMerchant(context.Background(), m))
	return Merchant{Merchant: m, APIKey: apiKey, WebhookSecret: secret}
}

// Check, when set (e.g. to apispec.Spec.Check in a TestMain), validates
// every exchange made through Do; a mismatch fails the test.
var Check func(req *http.Request, status int, header http.Header, body []byte) error

// Response is a decoded HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r Response) JSON(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		tb.Fatalf("response is not a JSON object (%v): %s", err, r.Body)
	}
	return m
}

// Do sends a request with optional API key and JSON body (a string or any
// value to encode) and returns the response.
func Do(tb testing.TB, method, url, apiKey string, body any, headers ...string) Response {
	tb.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rdr = bytes.NewBufferString(b)
	case []byte:
		rdr = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		rdr = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, url, rdr)
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if apiKey != "" {
		req.Header.Set("X-API-Key", apiKey)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if Check != nil {
		if err := Check(req, resp.StatusCode, resp.Header, b); err != nil {
			tb.Errorf("API description drift: %v", err)
		}
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Seeded fails tb unless a fixture's create succeeded. "Already exists"
// counts as success: fixtures create items under fresh random ids, so it can
// only mean that the SDK retried a write whose answer was lost (an emulator
// slow under load) and that the first attempt had applied.
func Seeded(tb testing.TB, what string, err error) {
	tb.Helper()
	switch {
	case err == nil:
	case errkind.Is(err, errkind.Exists):
		tb.Logf("seed %s: a retried create found its first attempt applied", what)
	default:
		tb.Fatalf("seed %s: %v", what, err)
	}
}

// Faults is the shared stack's fault proxy in front of DynamoDB (lost
// answers, transaction conflicts). The package's TestMain must set
// Options.Faults before the first Stack call. A test that arms a fault
// names its own tables or merchant in the fault (Table, Contains), since
// other tests share the stack.
func Faults(tb testing.TB) *devstack.FaultProxy {
	tb.Helper()
	f := Stack(tb).Faults()
	if f == nil {
		tb.Fatal("testenv.Faults: set testenv.Options.Faults = true in TestMain")
	}
	return f
}
