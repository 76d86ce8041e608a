package paycore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// stackEnv is a function's environment on the test stack.
func stackEnv(t testing.TB, fn string) func(string) string {
	t.Helper()
	env, err := testenv.Stack(t).Resources.Env(fn)
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"] = "1"
	return func(k string) string { return env[k] }
}

// service is the payments core wired as the functions wire it.
func service(t testing.TB) *paycore.Service {
	t.Helper()
	testenv.Stack(t)
	svc, err := paywire.PaymentService(context.Background(), stackEnv(t, "PaymentsFunction"), wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func store(t testing.TB) *dynamo.Store {
	t.Helper()
	return service(t).Store.(*dynamo.Store)
}

func TestSpecCases(t *testing.T) {
	m := newMerchant(t)
	good := func(kv ...any) map[string]any {
		return payerData(append([]any{"amount", 10, "unit", "EUR"}, kv...)...)
	}
	cases := []struct {
		name, path, key string
		body            any
		status          int
		code            string
	}{
		{"selector 1 approves", "/payments/h2h/1", m.APIKey, good(), 200, ""},
		{"selector 1 missing name", "/payments/h2h/1", m.APIKey, good("name", nil), 400, "025"},
		{"selector 1 negative amount", "/payments/h2h/1", m.APIKey, good("amount", -5), 400, "026"},
		{"selector 1 zero amount", "/payments/h2h/1", m.APIKey, good("amount", 0), 400, "026"},
		{"selector 1 invalid key", "/payments/h2h/1", "prk_test_" + strings.Repeat("x", 40), good(), 401, "011"},
		{"selector 1 missing key", "/payments/h2h/1", "", good(), 401, "011"},
		{"bad email", "/payments/h2h/27", m.APIKey, good("email", "nope"), 400, "009"},
		{"bad phone", "/payments/h2h/27", m.APIKey, good("phoneNumber", "12-34"), 400, "033"},
		{"bad country", "/payments/h2h/27", m.APIKey, good("country", "Germany"), 400, "037"},
		{"bad postal code", "/payments/h2h/27", m.APIKey, good("postalCode", "12345678901"), 400, "010"},
		{"long city", "/payments/h2h/27", m.APIKey, good("city", strings.Repeat("c", 51)), 400, "035"},
		{"long address", "/payments/h2h/27", m.APIKey, good("address", strings.Repeat("a", 101)), 400, "034"},
		{"empty state", "/payments/h2h/27", m.APIKey, good("state", ""), 400, "036"},
		{"wallet without token", "/payments/h2h/44", m.APIKey, good(), 400, "048"},
		{"UPI without upiId", "/payments/h2h/30", m.APIKey, good(), 400, "038"},
		{"malformed UPI", "/payments/h2h/31", m.APIKey, good("upiId", "not a vpa"), 400, "038"},
		{"unknown selector", "/payments/h2h/99", m.APIKey, good(), 400, "045"},
		{"bad currency", "/payments/h2h/27", m.APIKey, good("unit", "XYZ"), 400, "027"},
		{"unknown field", "/payments/h2h/27", m.APIKey, good("colour", "red"), 400, ""},
		{"card on non-card selector", "/payments/h2h/27", m.APIKey, good("card", map[string]any{"number": "4111111111111111", "expiry": "12/30", "cvc": "123"}), 400, "045"},
		{"bad card number", "/payments/h2h/1", m.APIKey, good("card", map[string]any{"number": "4111111111111112", "expiry": "12/30", "cvc": "123"}), 400, "040"},
		{"expired card", "/payments/h2h/1", m.APIKey, good("card", map[string]any{"number": "4111111111111111", "expiry": "01/20", "cvc": "123"}), 400, "041"},
		{"bad cvc", "/payments/h2h/1", m.APIKey, good("card", map[string]any{"number": "4111111111111111", "expiry": "12/30", "cvc": "12"}), 400, "042"},
		{"QR with token", "/payments/qr/1", m.APIKey, payerData("token", "tok_success"), 400, "048"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := testenv.Do(t, "POST", base(t)+c.path, c.key, c.body)
			if resp.Status != c.status {
				t.Fatalf("%d %s, want %d", resp.Status, resp.Body, c.status)
			}
			if c.status != 200 {
				if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("Content-Type %q", ct)
				}
				if got, _ := resp.JSON(t)["code"].(string); got != c.code {
					t.Errorf("code %q, want %q: %s", got, c.code, resp.Body)
				}
			}
		})
	}

	t.Run("json-patch+json accepted", func(t *testing.T) {
		id := createRequest(t, m, "5", "EUR")
		resp := testenv.Do(t, "POST", base(t)+"/payments/walletA/"+strconv.FormatInt(id, 10), m.APIKey, payerData("token", "tok_success"),
			"Content-Type", "application/json-patch+json")
		if resp.Status != 200 || resp.JSON(t)["transactionStatusId"] != 1.0 {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
	})
	t.Run("selector not enabled", func(t *testing.T) {
		limited := newMerchant(t, func(mm *merchant.Merchant) { mm.Methods = []int{27} })
		resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/30", limited.APIKey, good("upiId", "success@upi"))
		if resp.Status != 400 || resp.JSON(t)["code"] != "045" {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		if resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", limited.APIKey, good()); resp.Status != 200 {
			t.Fatalf("enabled selector: %d %s", resp.Status, resp.Body)
		}
	})
	t.Run("paid request is 409", func(t *testing.T) {
		id := createRequest(t, m, "5", "EUR")
		path := "/payments/walletA/" + strconv.FormatInt(id, 10)
		if r := pay(t, m, path, payerData("token", "tok_success")); r.PaymentRequestStatusID != 1 {
			t.Fatalf("first payment: %+v", r)
		}
		resp := testenv.Do(t, "POST", base(t)+path, m.APIKey, payerData("token", "tok_success"))
		if resp.Status != 409 {
			t.Fatalf("second payment: %d %s", resp.Status, resp.Body)
		}
		body := good()
		body["paymentRequestId"] = id
		delete(body, "amount")
		delete(body, "unit")
		if resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", m.APIKey, body); resp.Status != 409 {
			t.Fatalf("h2h on paid request: %d %s", resp.Status, resp.Body)
		}
	})
	t.Run("cancelled request is 409", func(t *testing.T) {
		id := createRequest(t, m, "5", "EUR")
		if _, err := testenv.Stack(t).Store.CancelPaymentRequest(context.Background(), id, m.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp := testenv.Do(t, "POST", base(t)+"/payments/qr/"+strconv.FormatInt(id, 10), m.APIKey, payerData())
		if resp.Status != 409 || resp.JSON(t)["code"] != "012" {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
	})
	t.Run("declined request can be paid again", func(t *testing.T) {
		id := createRequest(t, m, "5", "EUR")
		path := "/payments/walletA/" + strconv.FormatInt(id, 10)
		if r := pay(t, m, path, payerData("token", "tok_declined")); r.TransactionStatusID != 2 || r.PaymentRequestStatusID != 2 || r.LastLog.Code != "999" {
			t.Fatalf("declined: %+v", r)
		}
		if r := pay(t, m, path, payerData("token", "tok_success")); r.TransactionStatusID != 1 || r.PaymentRequestStatusID != 1 {
			t.Fatalf("retry: %+v", r)
		}
	})
	t.Run("h2h on an existing request: amount must match", func(t *testing.T) {
		id := createRequest(t, m, "7.50", "EUR")
		body := good()
		body["paymentRequestId"], body["amount"], body["unit"] = strconv.FormatInt(id, 10), "7.5", "EUR"
		if r := pay(t, m, "/payments/h2h/27", body); r.PaymentRequestID != id || r.TransactionStatusID != 1 {
			t.Fatalf("matching amount: %+v", r)
		}
		id2 := createRequest(t, m, "7.50", "EUR")
		body["paymentRequestId"], body["amount"] = id2, 8
		if resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", m.APIKey, body); resp.Status != 400 || resp.JSON(t)["code"] != "026" {
			t.Fatalf("other amount: %d %s", resp.Status, resp.Body)
		}
		body["amount"], body["unit"] = "7.50", "USD"
		if resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", m.APIKey, body); resp.Status != 400 || resp.JSON(t)["code"] != "027" {
			t.Fatalf("other unit: %d %s", resp.Status, resp.Body)
		}
		body["amount"] = -1
		if resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", m.APIKey, body); resp.Status != 400 || resp.JSON(t)["code"] != "026" {
			t.Fatalf("negative amount: %d %s", resp.Status, resp.Body)
		}
	})
}

// 20 concurrent attempts on one request: exactly one transaction approved,
// the request paid once, the others refused with 409 by the attempt lease.
func TestConcurrentAttemptsPayOnce(t *testing.T) {
	m := newMerchant(t)
	id := createRequest(t, m, "42", "EUR")
	path := base(t) + "/payments/walletA/" + strconv.FormatInt(id, 10)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		approved []int64
	)
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp := testenv.Do(t, "POST", path, m.APIKey, payerData("token", "tok_success"))
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.Status]++
			if resp.Status == 200 {
				if r := decode[result](t, resp); r.TransactionStatusID == 1 {
					approved = append(approved, r.TransactionID)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(approved) != 1 || statuses[200] != 1 || statuses[409] != 19 {
		t.Fatalf("statuses %v, approved %v; want one 200 approved and 19 × 409", statuses, approved)
	}
	txs, err := store(t).TransactionsOfRequest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tx := range txs {
		if tx.Status == 1 {
			n++
		}
	}
	if n != 1 || len(txs) != 1 {
		t.Fatalf("%d transactions, %d approved; want exactly one", len(txs), n)
	}
	s := getStatus(t, m, id)
	if s.PaymentRequestStatusID != 1 || *s.TransactionID != approved[0] {
		t.Fatalf("request %+v", s)
	}
}

func TestLimits(t *testing.T) {
	d := func(s string) *decimal.Decimal { v := decimal.RequireFromString(s); return &v }
	alt := func(t *testing.T, m testenv.Merchant, amount, unit string, kv ...any) result {
		b := payerData(kv...)
		b["amount"], b["unit"] = amount, unit
		return pay(t, m, "/payments/h2h/27", b)
	}
	t.Run("static limits are declined attempts", func(t *testing.T) {
		m := newMerchant(t, func(mm *merchant.Merchant) {
			mm.Limits = merchant.Limits{MinAmount: d("5"), MaxAmount: d("100"), Currencies: []string{"EUR", "USD"}, Countries: []string{"DE", "FR"}}
		})
		for _, c := range []struct {
			amount, unit, country, code string
		}{{"4.99", "EUR", "DE", "019"}, {"100.01", "EUR", "DE", "018"}, {"10", "GBP", "DE", "020"}, {"10", "EUR", "US", "047"}, {"100", "USD", "FR", ""}} {
			r := alt(t, m, c.amount, c.unit, "country", c.country)
			want := 2
			if c.code == "" {
				want = 1
			}
			if r.TransactionStatusID != want || r.LastLog.Code != c.code || r.TransactionID == 0 {
				t.Errorf("%+v: got %+v", c, r)
			}
			if c.code != "" {
				if s := getStatus(t, m, r.PaymentRequestID); s.LastLog == nil || s.LastLog.Code != c.code || s.PaymentRequestStatusID != 2 {
					t.Errorf("status after %s: %+v", c.code, s)
				}
			}
		}
	})
	concurrent := func(t *testing.T, m testenv.Merchant, n int, amount string) (approved int, codes map[string]int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes = map[string]int{}
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := alt(t, m, amount, "EUR")
				mu.Lock()
				defer mu.Unlock()
				if r.TransactionStatusID == 1 {
					approved++
				} else {
					codes[r.LastLog.Code]++
				}
			}()
		}
		close(start)
		wg.Wait()
		return approved, codes
	}
	t.Run("daily count under 20 concurrent attempts", func(t *testing.T) {
		m := newMerchant(t, func(mm *merchant.Merchant) { mm.Limits = merchant.Limits{DailyCount: 5, MonthlyCount: 50} })
		ok, codes := concurrent(t, m, 20, "10")
		if ok != 5 || codes["021"] != 15 {
			t.Fatalf("approved %d, declined %v; want 5 and 15 × 021", ok, codes)
		}
	})
	t.Run("daily total under 20 concurrent attempts", func(t *testing.T) {
		m := newMerchant(t, func(mm *merchant.Merchant) {
			mm.Limits = merchant.Limits{DailyAmount: d("35"), MonthlyAmount: d("1000")}
		})
		ok, codes := concurrent(t, m, 20, "10")
		if ok != 3 || codes["023"] != 17 {
			t.Fatalf("approved %d, declined %v; want 3 and 17 × 023", ok, codes)
		}
		if r := alt(t, m, "5", "EUR"); r.TransactionStatusID != 1 {
			t.Fatalf("5 EUR still fits under 35: %+v", r)
		}
		if r := alt(t, m, "36", "USD"); r.LastLog.Code != "023" {
			t.Fatalf("an amount above the total on its own: %+v", r)
		}
	})
	t.Run("monthly limits", func(t *testing.T) {
		m := newMerchant(t, func(mm *merchant.Merchant) { mm.Limits = merchant.Limits{MonthlyCount: 1} })
		if r := alt(t, m, "10", "EUR"); r.TransactionStatusID != 1 {
			t.Fatalf("first: %+v", r)
		}
		if r := alt(t, m, "10", "EUR"); r.LastLog.Code != "022" {
			t.Fatalf("second: %+v", r)
		}
		m2 := newMerchant(t, func(mm *merchant.Merchant) { mm.Limits = merchant.Limits{MonthlyAmount: d("15")} })
		if r := alt(t, m2, "10", "EUR"); r.TransactionStatusID != 1 {
			t.Fatalf("first: %+v", r)
		}
		if r := alt(t, m2, "10", "EUR"); r.LastLog.Code != "024" {
			t.Fatalf("second: %+v", r)
		}
	})
	t.Run("declined attempts release their reservation", func(t *testing.T) {
		m := newMerchant(t, func(mm *merchant.Merchant) { mm.Limits = merchant.Limits{DailyCount: 2} })
		for i := 0; i < 3; i++ {
			if r := alt(t, m, "10", "EUR", "email", "decline@example.com"); r.LastLog.Code != "999" {
				t.Fatalf("decline %d: %+v", i, r)
			}
		}
		for i := 0; i < 2; i++ {
			if r := alt(t, m, "10", "EUR"); r.TransactionStatusID != 1 {
				t.Fatalf("approve %d after declines: %+v", i, r)
			}
		}
		if r := alt(t, m, "10", "EUR"); r.LastLog.Code != "021" {
			t.Fatalf("third approval must hit the limit: %+v", r)
		}
	})
	t.Run("pending attempts hold their reservation until declined", func(t *testing.T) {
		m := newMerchant(t, func(mm *merchant.Merchant) { mm.Limits = merchant.Limits{DailyCount: 1} })
		b := payerData("upiId", "failure@upi")
		b["amount"], b["unit"] = "10", "INR"
		r := pay(t, m, "/payments/h2h/30", b)
		if r.TransactionStatusID != 3 {
			t.Fatalf("%+v", r)
		}
		if r2 := alt(t, m, "10", "EUR"); r2.LastLog.Code != "021" {
			t.Fatalf("while pending: %+v", r2)
		}
		waitFinal(t, m, r.PaymentRequestID, 5*time.Second)
		if r3 := alt(t, m, "10", "EUR"); r3.TransactionStatusID != 1 {
			t.Fatalf("after the UPI decline released it: %+v", r3)
		}
	})
}

func TestCallbacks(t *testing.T) {
	m := newMerchant(t)
	pendingUPI := func(t *testing.T, upi string) result {
		b := payerData("upiId", upi)
		b["amount"], b["unit"] = "10", "INR"
		r := pay(t, m, "/payments/h2h/30", b)
		if r.TransactionStatusID != 3 {
			t.Fatalf("%+v", r)
		}
		return r
	}
	t.Run("signature required", func(t *testing.T) {
		r := pendingUPI(t, "timeout@upi")
		body := resultCallback(uniq("evt"), r.TransactionID, r.PaymentRequestID, "approved", "")
		key := callbackKey(t)
		for name, h := range map[string]string{
			"missing":    "",
			"wrong key":  sig.Sign([]byte("another key entirely, 32 bytes!!"), time.Now(), []byte(body)),
			"stale":      sig.Sign(key, time.Now().Add(-6*time.Minute), []byte(body)),
			"future":     sig.Sign(key, time.Now().Add(6*time.Minute), []byte(body)),
			"garbage":    "t=abc,v1=zz",
			"other body": sig.Sign(key, time.Now(), []byte(body+" ")),
		} {
			var resp testenv.Response
			if h == "" {
				resp = signedPost(t, "/callbacks/svc", "application/json", body, "")
			} else {
				resp = signedPost(t, "/callbacks/svc", "application/json", body, h)
			}
			if resp.Status != 401 {
				t.Errorf("%s: %d %s", name, resp.Status, resp.Body)
			}
		}
		if s := getStatus(t, m, r.PaymentRequestID); *s.TransactionStatusID != 3 {
			t.Fatalf("an unsigned callback changed the state: %+v", s)
		}
	})
	t.Run("malformed and unknown", func(t *testing.T) {
		for _, c := range []struct {
			body   string
			status int
		}{
			{`{"eventId":"e1","transactionId":1,"status":"maybe"}`, 400},
			{`{"eventId":"e1","status":"approved"}`, 400},
			{`{"transactionId":5,"status":"approved"}`, 400},
			{`{"eventId":"e1","transactionId":5,"status":"declined","code":"777"}`, 400},
			{`[1,2]`, 400},
			{`not json`, 400},
			{`{"eventId":"` + uniq("e") + `","transactionId":123456789,"status":"approved"}`, 404},
			{`{"eventId":"` + uniq("e") + `","transactionId":123456789,"paymentRequestId":987,"status":"approved"}`, 404},
		} {
			if resp := signedPost(t, "/callbacks/svc", "application/json", c.body); resp.Status != c.status {
				t.Errorf("%s: %d %s, want %d", c.body, resp.Status, resp.Body, c.status)
			}
		}
	})
	t.Run("duplicate and reordered results change the state once", func(t *testing.T) {
		// timeout@upi: the sandbox itself declines it with 013 after the
		// collect window, i.e. after our approval: a reordered result.
		r := pendingUPI(t, "timeout@upi")
		ev := uniq("evt-approve")
		body := resultCallback(ev, r.TransactionID, r.PaymentRequestID, "approved", "")
		var wg sync.WaitGroup
		var mu sync.Mutex
		changed, dup := 0, 0
		for i := 0; i < 5; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := signedPost(t, "/callbacks/svc", "application/json", body)
				if resp.Status != 200 {
					t.Errorf("delivery: %d %s", resp.Status, resp.Body)
					return
				}
				a := resp.JSON(t)
				mu.Lock()
				defer mu.Unlock()
				if a["changed"] == true {
					changed++
				}
				if a["duplicate"] == true {
					dup++
				}
			}()
		}
		wg.Wait()
		if changed != 1 || dup != 4 {
			t.Fatalf("changed %d, duplicates %d; want 1 and 4", changed, dup)
		}
		// A later, different event declining it (out of order) changes nothing.
		resp := signedPost(t, "/callbacks/svc-gateway", "application/x-www-form-urlencoded",
			url.Values{"eventId": {uniq("evt-late")}, "transactionId": {strconv.FormatInt(r.TransactionID, 10)}, "status": {"declined"}, "code": {"005"}}.Encode())
		if resp.Status != 200 || resp.JSON(t)["changed"] != false || resp.JSON(t)["transactionStatusId"] != 1.0 {
			t.Fatalf("late decline: %d %s", resp.Status, resp.Body)
		}
		time.Sleep(700 * time.Millisecond) // the sandbox's own 013 arrives too
		s := getStatus(t, m, r.PaymentRequestID)
		if *s.TransactionStatusID != 1 || s.PaymentRequestStatusID != 1 || s.LastLog.Code != "" {
			t.Fatalf("state regressed: %+v %+v", s, s.LastLog)
		}
	})
	t.Run("GET with a signed query", func(t *testing.T) {
		r := pendingUPI(t, "timeout@upi")
		q := url.Values{"eventId": {uniq("evt-get")}, "transactionId": {strconv.FormatInt(r.TransactionID, 10)}, "status": {"declined"}, "code": {"005"}}
		signed := sig.SignQuery(callbackKey(t), q, time.Now())
		tampered := strings.Replace(signed, "code=005", "code=001", 1)
		if resp := send(t, mustReq(t, "GET", base(t)+"/callbacks/svcwh?"+tampered)); resp.Status != 401 {
			t.Fatalf("tampered query: %d %s", resp.Status, resp.Body)
		}
		if resp := send(t, mustReq(t, "GET", base(t)+"/callbacks/svcwh?"+signed)); resp.Status != 200 {
			t.Fatalf("signed GET: %d %s", resp.Status, resp.Body)
		}
		if s := getStatus(t, m, r.PaymentRequestID); *s.TransactionStatusID != 2 || s.LastLog.Code != "005" || s.PaymentRequestStatusID != 2 {
			t.Fatalf("%+v %+v", s, s.LastLog)
		}
	})
	t.Run("cancelled while pending: a late approval cannot pay it", func(t *testing.T) {
		// pending@upi stays pending for minutes: timeout@upi's 300 ms
		// collect window ended before the cancel on a loaded machine (two
		// suites side by side), and the attempt then rightly showed 013.
		r := pendingUPI(t, "pending@upi")
		if _, err := testenv.Stack(t).Store.CancelPaymentRequest(context.Background(), r.PaymentRequestID, m.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp := signedPost(t, "/callbacks/svc", "application/json", resultCallback(uniq("evt"), r.TransactionID, r.PaymentRequestID, "approved", ""))
		if resp.Status != 200 {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		s := getStatus(t, m, r.PaymentRequestID)
		if s.PaymentRequestStatusID != 3 {
			t.Fatalf("request %+v", s)
		}
		// The status endpoint shows how the attempt ended, not "pending".
		if s.TransactionStatusID == nil || *s.TransactionStatusID != 2 || s.LastLog == nil || s.LastLog.Code != "012" {
			t.Fatalf("a cancelled request still shows its attempt as %+v / %+v", s.TransactionStatusID, s.LastLog)
		}
		tx, err := store(t).Transaction(context.Background(), r.TransactionID)
		if err != nil || tx.Status != 2 || tx.Code != "012" {
			t.Fatalf("transaction %+v %v, want declined 012", tx, err)
		}
	})
	t.Run("test echo endpoints", func(t *testing.T) {
		resp := testenv.Do(t, "POST", base(t)+"/callbacks/test/json?x=1", "", `{"a":[1,2],"b":"c"}`)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"body":{"a":[1,2],"b":"c"}`) {
			t.Fatalf("json: %d %s", resp.Status, resp.Body)
		}
		resp = send(t, withBody(t, "POST", base(t)+"/callbacks/test/form", "application/x-www-form-urlencoded", "a=1&b=two+words"))
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"form":{"a":["1"],"b":["two words"]}`) {
			t.Fatalf("form: %d %s", resp.Status, resp.Body)
		}
		resp = send(t, mustReq(t, "GET", base(t)+"/callbacks/test/text?b=2&a=1"))
		if resp.Status != 200 || string(resp.Body) != "received GET /callbacks/test/text\na=1\nb=2\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("text: %d %q", resp.Status, resp.Body)
		}
	})
}

func mustReq(t testing.TB, method, u string) *http.Request {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func withBody(t testing.TB, method, u, ct, body string) *http.Request {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ct)
	return req
}

func TestThreeDS(t *testing.T) {
	m := newMerchant(t)
	threeDS := func(t *testing.T, extra ...string) result {
		id := createRequest(t, m, "30", "EUR", extra...)
		r := pay(t, m, "/payments/walletA/"+strconv.FormatInt(id, 10), payerData("token", "tok_3ds_required"))
		if r.TransactionStatusID != 3 || r.NextAction == nil {
			t.Fatalf("%+v", r)
		}
		return r
	}
	t.Run("status endpoint and relative return", func(t *testing.T) {
		r := threeDS(t)
		st := testenv.Do(t, "GET", base(t)+"/payments/threeds/status/"+r.NextAction.Reference, m.APIKey, nil)
		if st.Status != 200 || st.JSON(t)["status"] != "challenge_required" || st.JSON(t)["challengeUrl"] == "" {
			t.Fatalf("%d %s", st.Status, st.Body)
		}
		links := challengeLinks(t, r.NextAction.URL+"&return="+url.QueryEscape("/checkout/done?x=1"))
		code, loc := answerChallenge(t, links["approve"])
		if code != 303 || !strings.HasPrefix(loc, "/checkout/done?") || !strings.Contains(loc, "transactionStatusId=1") ||
			!strings.Contains(loc, "transactionId="+strconv.FormatInt(r.TransactionID, 10)) {
			t.Fatalf("%d %q", code, loc)
		}
		st = testenv.Do(t, "GET", base(t)+"/payments/threeds/status/"+r.NextAction.Reference, m.APIKey, nil)
		if st.JSON(t)["status"] != "authenticated" || st.JSON(t)["transactionStatusId"] != 1.0 {
			t.Fatalf("%s", st.Body)
		}
		// Pressing again is a duplicate: same answer, no change.
		if code2, loc2 := answerChallenge(t, links["fail"]); code2 != 303 || !strings.Contains(loc2, "transactionStatusId=1") {
			t.Fatalf("second answer: %d %q", code2, loc2)
		}
	})
	t.Run("foreign return URL is not followed", func(t *testing.T) {
		r := threeDS(t, `,"failureUrl":"https://shop.example/ko"`)
		links := challengeLinks(t, r.NextAction.URL+"&return="+url.QueryEscape("https://evil.example/"))
		if code, loc := answerChallenge(t, links["fail"]); code != 303 || loc != "https://shop.example/ko" {
			t.Fatalf("%d %q, want 303 to the request's failureUrl", code, loc)
		}
	})
	t.Run("forged or expired links are refused", func(t *testing.T) {
		r := threeDS(t)
		u, _ := url.Parse(r.NextAction.URL)
		q := u.Query()
		q.Set("sig", strings.Repeat("0", 64))
		u.RawQuery = q.Encode()
		if resp := send(t, mustReq(t, "GET", u.String())); resp.Status != 401 {
			t.Fatalf("forged redirect: %d", resp.Status)
		}
		other := strings.Replace(r.NextAction.URL, strconv.FormatInt(r.TransactionID, 10), strconv.FormatInt(r.TransactionID+1, 10), 1)
		if resp := send(t, mustReq(t, "GET", other)); resp.Status != 401 {
			t.Fatalf("redirect of another transaction: %d", resp.Status)
		}
		links := challengeLinks(t, r.NextAction.URL)
		forged := strings.Replace(links["fail"], "result=fail", "result=approve", 1)
		if code, _ := answerChallenge(t, forged); code != 401 {
			t.Fatalf("forged answer: %d", code)
		}
	})
	t.Run("abandoned challenge expires with 013", func(t *testing.T) {
		r := threeDS(t)
		s := waitFinal(t, m, r.PaymentRequestID, 20*time.Second) // THREEDS_CHALLENGE_WINDOW=10s in tests
		if *s.TransactionStatusID != 2 || s.LastLog.Code != "013" || s.PaymentRequestStatusID != 2 {
			t.Fatalf("%+v %+v", s, s.LastLog)
		}
		st := testenv.Do(t, "GET", base(t)+"/payments/threeds/status/"+r.NextAction.Reference, m.APIKey, nil)
		if st.JSON(t)["status"] != "timed_out" {
			t.Fatalf("%s", st.Body)
		}
		// The request can be paid again.
		if r2 := pay(t, m, "/payments/walletA/"+strconv.FormatInt(r.PaymentRequestID, 10), payerData("token", "tok_success")); r2.TransactionStatusID != 1 {
			t.Fatalf("%+v", r2)
		}
	})
	t.Run("a second attempt waits for the pending one", func(t *testing.T) {
		r := threeDS(t)
		resp := testenv.Do(t, "POST", base(t)+"/payments/walletA/"+strconv.FormatInt(r.PaymentRequestID, 10), m.APIKey, payerData("token", "tok_success"))
		if resp.Status != 409 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
	})
}

// Batch files have nobody to answer a challenge: the service passes
// CardholderPresent=false and such cards decline with 004 at once.
func TestBatchCardsCannotChallenge(t *testing.T) {
	m := newMerchant(t)
	svc := service(t)
	for _, number := range []string{"4000 0000 0000 3220", "4000 0084 0000 1629"} {
		id := createRequest(t, m, "10", "EUR")
		res, err := svc.Pay(context.Background(), m.Merchant, id, paycore.Attempt{Method: provider.MethodCard,
			Card: &card.Input{Holder: "Ann", Number: number, Expiry: "12/30", CVV: "123"},
			Payer: &payer.Data{Name: "Ann", Email: "a@example.com", PhoneNumber: "4915112345678", Address: "1 Main St",
				City: "Berlin", State: "BE", PostalCode: "10115", Country: "DE"}})
		if err != nil || res.TransactionStatusID != 2 || res.LastLog.Code != "004" {
			t.Fatalf("%s: %+v %v", number, res, err)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	a, b := newMerchant(t), newMerchant(t)
	id := createRequest(t, a, "10", "EUR")
	r := pay(t, a, "/payments/walletA/"+strconv.FormatInt(id, 10), payerData("token", "tok_3ds_required"))
	tx := strconv.FormatInt(r.TransactionID, 10)
	for _, c := range []struct{ method, path string }{
		{"GET", "/payments/creditCard/status/" + tx},
		{"GET", "/payments/threeds/status/3ds_" + tx},
		{"GET", "/payments/h2h/refund/" + tx},
		{"POST", "/payments/walletA/" + strconv.FormatInt(id, 10)},
		{"POST", "/payments/qr/" + strconv.FormatInt(id, 10)},
	} {
		var body any
		if c.method == "POST" {
			body = payerData("token", "tok_success")
			if strings.Contains(c.path, "/qr/") {
				body = payerData()
			}
		}
		resp := testenv.Do(t, c.method, base(t)+c.path, b.APIKey, body)
		if resp.Status != 404 || resp.JSON(t)["code"] != "043" {
			t.Errorf("%s %s as another merchant: %d %s", c.method, c.path, resp.Status, resp.Body)
		}
		if resp := testenv.Do(t, c.method, base(t)+c.path, a.APIKey, body); resp.Status == 404 {
			t.Errorf("%s %s as the owner: 404", c.method, c.path)
		}
	}
	hb := payerData()
	hb["paymentRequestId"] = id
	if resp := testenv.Do(t, "POST", base(t)+"/payments/h2h/27", b.APIKey, hb); resp.Status != 404 {
		t.Errorf("h2h on another merchant's request: %d %s", resp.Status, resp.Body)
	}
	// GET /transactions/{id} (mounted by the merchant API function).
	svc := service(t)
	h := paymentsapi.TransactionLookup(svc, "https://api.example")
	for _, ref := range []string{tx, r.TransactionNumber} {
		for _, who := range []testenv.Merchant{a, b} {
			req := httptest.NewRequest("GET", "/transactions/"+ref, nil)
			req.SetPathValue("id", ref)
			req = req.WithContext(apikey.WithMerchant(req.Context(), who.Merchant))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			want := 200
			if who.ID == b.ID {
				want = 404
			}
			if rec.Code != want {
				t.Errorf("/transactions/%s as %s: %d %s, want %d", ref, who.ID, rec.Code, rec.Body, want)
			}
		}
	}
}

func TestRefund(t *testing.T) {
	m := newMerchant(t)
	id := createRequest(t, m, "25.00", "EUR")
	r := pay(t, m, "/payments/walletA/"+strconv.FormatInt(id, 10), payerData("token", "tok_success"))
	path := base(t) + "/payments/h2h/refund/" + strconv.FormatInt(r.TransactionID, 10)
	var wg sync.WaitGroup
	ids := make([]string, 5)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := testenv.Do(t, "GET", path, m.APIKey, nil)
			if resp.Status != 200 {
				t.Errorf("refund: %d %s", resp.Status, resp.Body)
				return
			}
			v := resp.JSON(t)
			if v["status"] != "refunded" || v["amount"] != 25.0 || v["unit"] != "EUR" {
				t.Errorf("refund %s", resp.Body)
			}
			ids[i], _ = v["refundId"].(string)
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("refund ids %v: want one refund", ids)
		}
	}
	view := testenv.Do(t, "GET", base(t)+"/payments/creditCard/status/"+r.PaymentID, m.APIKey, nil).JSON(t)
	if view["transactionStatusId"] != 1.0 || view["refund"].(map[string]any)["refundId"] != ids[0] {
		t.Fatalf("transaction after refund: %v", view)
	}
	declined := pay(t, m, "/payments/walletA/"+strconv.FormatInt(createRequest(t, m, "5", "EUR"), 10), payerData("token", "tok_declined"))
	if resp := testenv.Do(t, "GET", base(t)+"/payments/h2h/refund/"+strconv.FormatInt(declined.TransactionID, 10), m.APIKey, nil); resp.Status != 409 {
		t.Fatalf("refund of a declined transaction: %d %s", resp.Status, resp.Body)
	}
	pending := pay(t, m, "/payments/walletA/"+strconv.FormatInt(createRequest(t, m, "5", "EUR"), 10), payerData("token", "tok_3ds_required"))
	if resp := testenv.Do(t, "GET", base(t)+"/payments/h2h/refund/"+strconv.FormatInt(pending.TransactionID, 10), m.APIKey, nil); resp.Status != 409 {
		t.Fatalf("refund of a pending transaction: %d %s", resp.Status, resp.Body)
	}
	if resp := testenv.Do(t, "GET", base(t)+"/payments/h2h/refund/12345", m.APIKey, nil); resp.Status != 404 {
		t.Fatalf("refund of an unknown transaction: %d", resp.Status)
	}
}

// The hosted payment page collects no payer data (Attempt.Hosted).
func TestHostedAttemptsNeedNoPayer(t *testing.T) {
	m := newMerchant(t)
	svc := service(t)
	ctx := context.Background()
	id := createRequest(t, m, "10", "EUR")
	if _, err := svc.Pay(ctx, m.Merchant, id, paycore.Attempt{Method: provider.MethodWallet, WalletToken: "tok_success"}); err == nil {
		t.Fatal("a host-to-host wallet attempt without payer data was accepted")
	}
	res, err := svc.Pay(ctx, m.Merchant, id, paycore.Attempt{Hosted: true, Method: provider.MethodWallet, WalletToken: "tok_success"})
	if err != nil || res.TransactionStatusID != 1 || res.PaymentRequestStatusID != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	id = createRequest(t, m, "10", "EUR")
	res, err = svc.Pay(ctx, m.Merchant, id, paycore.Attempt{Hosted: true, Method: provider.MethodQR, CardholderPresent: true})
	if err != nil || res.TransactionStatusID != 3 || res.NextAction == nil || res.NextAction.Type != "qr" {
		t.Fatalf("%+v %v", res, err)
	}
	if s := waitFinal(t, m, id, 5*time.Second); *s.TransactionStatusID != 1 {
		t.Fatalf("%+v", s)
	}
}
