package paycore_test

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

// A new attempt by the payer supersedes a 3-D Secure challenge left open
// longer than the grace (a tenth of the challenge window: 1 s here). The
// provider closes the challenge (declined 013) before the new attempt runs;
// inside the grace the new attempt is a 409 whose Retry-After is the grace
// left, not the challenge window.
func TestNewAttemptSupersedesAbandonedChallenge(t *testing.T) {
	m := newMerchant(t)
	id := createRequest(t, m, "30", "EUR")
	path := "/payments/walletA/" + strconv.FormatInt(id, 10)
	first := pay(t, m, path, payerData("token", "tok_3ds_required"))
	if first.TransactionStatusID != 3 || first.NextAction == nil {
		t.Fatalf("challenge: %+v", first)
	}
	links := challengeLinks(t, first.NextAction.URL)
	resp := testenv.Do(t, "POST", base(t)+path, m.APIKey, payerData("token", "tok_success"))
	if resp.Status != 409 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("inside the grace: %d Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), resp.Body)
	}
	time.Sleep(1100 * time.Millisecond)
	second := pay(t, m, path, payerData("token", "tok_success"))
	if second.TransactionStatusID != 1 || second.PaymentRequestStatusID != 1 || second.TransactionID == first.TransactionID {
		t.Fatalf("new attempt after the grace: %+v", second)
	}
	old, err := store(t).Transaction(t.Context(), first.TransactionID)
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != 2 || old.Code != "013" {
		t.Fatalf("superseded challenge: status %d code %q, want declined 013", old.Status, old.Code)
	}
	// The abandoned challenge's Approve link cannot revive it.
	answerChallenge(t, links["approve"])
	if old, err = store(t).Transaction(t.Context(), first.TransactionID); err != nil || old.Status != 2 {
		t.Fatalf("after a late approve: %+v %v", old, err)
	}
	if s := getStatus(t, m, id); *s.TransactionID != second.TransactionID || *s.TransactionStatusID != 1 {
		t.Fatalf("status: %+v", s)
	}
}
