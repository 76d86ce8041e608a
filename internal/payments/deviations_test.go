package payments_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/testenv"
)

// The test callbacks answer GET and POST each: the spec lets a merchant's
// callback be called with either method.
func TestTestCallbacksAnswerGETAndPOST(t *testing.T) {
	resp := testenv.Do(t, "GET", base(t)+"/callbacks/test/json?a=1", "", nil)
	if e := decode[map[string]any](t, resp); resp.Status != 200 || e["method"] != "GET" || e["query"] == nil {
		t.Fatalf("GET json: %d %s", resp.Status, resp.Body)
	}
	resp = testenv.Do(t, "GET", base(t)+"/callbacks/test/form?a=1&b=two", "", nil)
	if e := decode[map[string]any](t, resp); resp.Status != 200 || e["method"] != "GET" || e["form"] == nil {
		t.Fatalf("GET form: %d %s", resp.Status, resp.Body)
	}
	resp = testenv.Do(t, "POST", base(t)+"/callbacks/test/text?b=2", "", "a=1", "Content-Type", "application/x-www-form-urlencoded")
	if resp.Status != 200 || string(resp.Body) != "received POST /callbacks/test/text\na=1\nb=2\n" {
		t.Fatalf("POST text: %d %q", resp.Status, resp.Body)
	}
}

// An empty POST body sent with Content-Type: application/json reads as {}.
func TestEmptyJSONBodyIsEmptyObject(t *testing.T) {
	m := newMerchant(t)
	id := strconv.FormatInt(createRequest(t, m, "10", "EUR"), 10)
	for _, path := range []string{"/payment-requests/" + id + "/checkout-session", "/payment-requests/" + id + "/cancel"} {
		resp := testenv.Do(t, "POST", base(t)+path, m.APIKey, nil, "Content-Type", "application/json")
		if resp.Status != 200 && resp.Status != 201 {
			t.Fatalf("POST %s with an empty JSON body: %d %s", path, resp.Status, resp.Body)
		}
	}
}

// Cancelling twice answers 200 with the cancelled request both times.
func TestCancelIsIdempotent(t *testing.T) {
	m := newMerchant(t)
	id := strconv.FormatInt(createRequest(t, m, "10", "EUR"), 10)
	for i := range 2 {
		resp := testenv.Do(t, "POST", base(t)+"/payment-requests/"+id+"/cancel", m.APIKey, nil)
		if resp.Status != 200 || resp.JSON(t)["paymentRequestStatusId"] != float64(3) {
			t.Fatalf("cancel #%d: %d %s", i+1, resp.Status, resp.Body)
		}
	}
}

// A wrong method on a known path is a 405 problem naming the allowed ones.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	// Gateway answers, not operations: sent without the API description check.
	resp := send(t, mustReq(t, "DELETE", base(t)+"/payment-requests"))
	if resp.Status != 405 || resp.Header.Get("Allow") != "POST" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || decode[map[string]any](t, resp)["status"] != float64(405) {
		t.Fatalf("DELETE /payment-requests: %d Allow %q %s", resp.Status, resp.Header.Get("Allow"), resp.Body)
	}
	resp = send(t, mustReq(t, "PUT", base(t)+"/callbacks/3ds"))
	if resp.Status != 405 || resp.Header.Get("Allow") != "GET, POST" {
		t.Fatalf("PUT /callbacks/3ds: %d Allow %q %s", resp.Status, resp.Header.Get("Allow"), resp.Body)
	}
	if resp := send(t, mustReq(t, "GET", base(t)+"/no/such/path")); resp.Status != 404 {
		t.Fatalf("unknown path: %d %s", resp.Status, resp.Body)
	}
}

// One country rule for every channel: a lower-case ISO 3166-1 alpha-2 code
// is accepted and stored upper-case; an unassigned one is still 037.
func TestCountryCaseInsensitive(t *testing.T) {
	m := newMerchant(t)
	res := pay(t, m, "/payments/h2h/27", payerData("amount", 10, "unit", "EUR", "country", "us"))
	if res.TransactionStatusID != 1 {
		t.Fatalf("country us: %+v", res)
	}
	resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", m.APIKey, payerData("amount", 10, "unit", "EUR", "country", "xx"))
	if resp.Status != 400 || resp.JSON(t)["code"] != "037" {
		t.Fatalf("country xx: %d %s", resp.Status, resp.Body)
	}
}

// Amounts in exponent form are read exactly within the currency's decimals.
func TestExponentAmounts(t *testing.T) {
	m := newMerchant(t)
	resp := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, `{"amount":1e-7,"unit":"BTC"}`)
	if resp.Status != http.StatusCreated || resp.JSON(t)["amount"] != 1e-7 {
		t.Fatalf("1e-7 BTC: %d %s", resp.Status, resp.Body)
	}
	resp = testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, `{"amount":1e-3,"unit":"EUR"}`)
	if resp.Status != 400 || resp.JSON(t)["code"] != "026" {
		t.Fatalf("1e-3 EUR: %d %s", resp.Status, resp.Body)
	}
}

// pending@upi stays pending long after every other sandbox input settles.
func TestSandboxInputStaysPending(t *testing.T) {
	m := newMerchant(t)
	id := createRequest(t, m, "10", "INR")
	res := pay(t, m, "/payments/h2h/30", payerData("paymentRequestId", id, "upiId", "pending@upi"))
	if res.TransactionStatusID != 3 {
		t.Fatalf("pending@upi: %+v", res)
	}
	// success@upi settles after SANDBOX_UPI_DELAY (150ms here), the collect
	// window after 300ms: pending@upi must still be pending well after both.
	time.Sleep(2 * time.Second)
	if s := getStatus(t, m, id); s.TransactionStatusID == nil || *s.TransactionStatusID != 3 {
		t.Fatalf("pending@upi settled: %+v", s)
	}
}
