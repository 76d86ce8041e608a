package paycore_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apispec"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/testenv"
)

// Sandbox delays scaled down for the suite (read by the wiring on the local
// stack from the process environment).
var testDelays = map[string]string{
	"SANDBOX_QR_DELAY":           "200ms",
	"SANDBOX_UPI_DELAY":          "150ms",
	"SANDBOX_UPI_COLLECT_WINDOW": "300ms",
	"THREEDS_CHALLENGE_WINDOW":   "10s", // its supersede grace (a tenth) is 1 s: room for two calls on a loaded machine
	"PAYMENT_PENDING_GRACE":      "500ms",
}

func TestMain(m *testing.M) {
	for k, v := range testDelays {
		os.Setenv(k, v)
	}
	spec, err := apispec.Load()
	if err != nil {
		panic(err)
	}
	// Every response these tests receive must match docs/openapi.yaml.
	testenv.Check = spec.Check
	testenv.Main(m)
}

func base(t testing.TB) string { return testenv.Stack(t).Info.APIBase }

// newMerchant is a sandbox merchant with every selector and a rate limit
// high enough for concurrency tests.
func newMerchant(t testing.TB, mutate ...func(*merchant.Merchant)) testenv.Merchant {
	t.Helper()
	return testenv.NewMerchant(t, append([]func(*merchant.Merchant){func(m *merchant.Merchant) { m.RateLimitPerMinute = 1_000_000 }}, mutate...)...)
}

// payerData is valid payer data, adjusted by kv pairs (nil deletes).
func payerData(kv ...any) map[string]any {
	p := map[string]any{
		"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
		"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(p, kv[i].(string))
		} else {
			p[kv[i].(string)] = kv[i+1]
		}
	}
	return p
}

func createRequest(t testing.TB, m testenv.Merchant, amount, unit string, extra ...string) int64 {
	t.Helper()
	body := `{"amount":` + amount + `,"unit":"` + unit + `"` + strings.Join(extra, "") + `}`
	resp := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, body)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create payment request: %d %s", resp.Status, resp.Body)
	}
	return int64(resp.JSON(t)["id"].(float64))
}

// result is the response of a payment operation.
type result struct {
	PaymentRequestID       int64  `json:"paymentRequestId"`
	TransactionID          int64  `json:"transactionId"`
	PaymentID              string `json:"paymentId"`
	TransactionNumber      string `json:"transactionNumber"`
	TransactionStatusID    int    `json:"transactionStatusId"`
	PaymentRequestStatusID int    `json:"paymentRequestStatusId"`
	LastLog                struct {
		TransactionStatusID int    `json:"transactionStatusId"`
		Message             string `json:"message"`
		Code                string `json:"code"`
	} `json:"lastLog"`
	NextAction *struct {
		Type      string `json:"type"`
		URL       string `json:"url"`
		QRPayload string `json:"qrPayload"`
		Reference string `json:"reference"`
	} `json:"nextAction"`
}

func decode[T any](t testing.TB, resp testenv.Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		t.Fatalf("decode %s: %v", resp.Body, err)
	}
	return v
}

func pay(t testing.TB, m testenv.Merchant, path string, body any) result {
	t.Helper()
	resp := testenv.Do(t, "POST", base(t)+path, m.APIKey, body)
	if resp.Status != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.Status, resp.Body)
	}
	return decode[result](t, resp)
}

// status is the payment request status endpoint's answer.
type status struct {
	ID                     int64   `json:"id"`
	PaymentRequestStatusID int     `json:"paymentRequestStatusId"`
	TransactionID          *int64  `json:"transactionId"`
	TransactionNumber      *string `json:"transactionNumber"`
	TransactionStatusID    *int    `json:"transactionStatusId"`
	LastLog                *struct {
		TransactionStatusID int    `json:"transactionStatusId"`
		Message             string `json:"message"`
		Code                string `json:"code"`
	} `json:"lastLog"`
}

func getStatus(t testing.TB, m testenv.Merchant, id int64) status {
	t.Helper()
	resp := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+strconv.FormatInt(id, 10), m.APIKey, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %d %s", id, resp.Status, resp.Body)
	}
	return decode[status](t, resp)
}

// waitFinal polls the status endpoint until the request's transaction is
// approved or declined.
func waitFinal(t testing.TB, m testenv.Merchant, id int64, within time.Duration) status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := getStatus(t, m, id)
		if s.TransactionStatusID != nil && (*s.TransactionStatusID == 1 || *s.TransactionStatusID == 2) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("payment request %d not final after %s: %+v", id, within, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func noRedirect() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var hrefRE = regexp.MustCompile(`id="(approve|fail)" href="([^"]+)"`)

// challengeLinks opens a 3-D Secure redirect URL as a browser would and
// returns the Approve and Fail links of the sandbox challenge page.
func challengeLinks(t testing.TB, redirectURL string) map[string]string {
	t.Helper()
	resp, err := noRedirect().Get(redirectURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("challenge page: %d %s", resp.StatusCode, b.String())
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || strings.Contains(b.String(), "<script") {
		t.Fatalf("challenge page must allow no script: CSP %q", csp)
	}
	links := map[string]string{}
	for _, m := range hrefRE.FindAllStringSubmatch(b.String(), -1) {
		links[m[1]] = strings.ReplaceAll(m[2], "&amp;", "&")
	}
	if links["approve"] == "" || links["fail"] == "" {
		t.Fatalf("challenge page has no approve/fail links: %s", b.String())
	}
	return links
}

// answerChallenge follows an Approve/Fail link; it returns the response
// status and Location.
func answerChallenge(t testing.TB, link string) (int, string) {
	t.Helper()
	resp, err := noRedirect().Get(base(t) + link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// callbackKey is the provider callback key of the test stack.
func callbackKey(t testing.TB) []byte {
	t.Helper()
	seal, err := devstack.SealKey(testenv.StateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	k, err := sig.DeriveKey(seal, sig.InfoProviderCallback)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signedPost posts body to a callback path with a valid signature (or the
// given header when sigHeader is not empty).
func signedPost(t testing.TB, path, contentType, body string, sigHeader ...string) testenv.Response {
	t.Helper()
	h := sig.Sign(callbackKey(t), time.Now(), []byte(body))
	if len(sigHeader) > 0 {
		h = sigHeader[0]
	}
	req, err := http.NewRequest("POST", base(t)+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if h != "" {
		req.Header.Set(sig.Header, h)
	}
	return send(t, req)
}

func send(t testing.TB, req *http.Request) testenv.Response {
	t.Helper()
	resp, err := noRedirect().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return testenv.Response{Status: resp.StatusCode, Header: resp.Header, Body: []byte(b.String())}
}

func resultCallback(eventID string, txID, prID int64, status, code string) string {
	b, _ := json.Marshal(map[string]any{"eventId": eventID, "transactionId": txID, "paymentRequestId": prID, "status": status, "code": code})
	return string(b)
}

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()) }
