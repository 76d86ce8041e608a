package paycore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/callbackswire"
	"github.com/payreq/payreq/internal/wire/paymentswire"
)

func serve(t testing.TB, h http.Handler, method, path, key, ct, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewBufferString(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// AWS calls per operation, counted on the real SDK against the emulators.
// The sandbox acquirer books each charge in its ledger (a DynamoDB write):
// in production that call is the acquirer's (an HTTPS call to Stripe), so it
// is counted apart from the service's own calls, and asserted to be one.
//
// An approved payment of an existing request makes at most 5 calls of its
// own: rate limit, attempt lease, write-ahead transaction, request commit
// and transaction settle (with its outbox entry) in one TransactWriteItems,
// notification send. Creating and paying in one call makes 4: the new
// request (leased) and the write-ahead transaction are one
// TransactWriteItems too. A callback makes 4, a duplicate callback 1.
func TestAWSCallBudget(t *testing.T) {
	cfg, calls := testenv.CountingAWSConfig(t)
	ph, err := paymentswire.Payments(context.Background(), stackEnv(t, "PaymentsFunction"), wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := callbackswire.Callbacks(context.Background(), stackEnv(t, "CallbacksFunction"), wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t)
	body := func(kv ...any) string { b, _ := json.Marshal(payerData(kv...)); return string(b) }
	// Warm the API-key cache, as a warm Lambda has it.
	if rec := serve(t, ph, "POST", "/payments/walletA/"+strconv.FormatInt(createRequest(t, m, "1", "EUR"), 10), m.APIKey, "application/json", body("token", "tok_success")); rec.Code != 200 {
		t.Fatalf("warm-up: %d %s", rec.Code, rec.Body)
	}
	count := func(name string, max, acquirer int, run func()) []string {
		calls.Reset()
		run()
		got, acq := calls.Split()
		t.Logf("%s: %d AWS calls of its own %v, %d of the sandbox acquirer %v", name, len(got), got, len(acq), acq)
		if len(got) > max {
			t.Errorf("%s made %d AWS calls %v, budget %d", name, len(got), got, max)
		}
		if len(acq) != acquirer {
			t.Errorf("%s: %d calls to the sandbox acquirer's ledger %v, want %d", name, len(acq), acq, acquirer)
		}
		return got
	}
	id := createRequest(t, m, "10", "EUR")
	got := count("approved walletA payment (incl. rate limit and notification send)", 5, 1, func() {
		rec := serve(t, ph, "POST", "/payments/walletA/"+strconv.FormatInt(id, 10), m.APIKey, "application/json", body("token", "tok_success"))
		if rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), []byte(`"transactionStatusId":1`)) {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	if !slices.Equal(got, []string{"DynamoDB.UpdateItem", "DynamoDB.UpdateItem", "DynamoDB.PutItem", "DynamoDB.TransactWriteItems", "SQS.SendMessage"}) {
		t.Errorf("calls %v: want rate limit, lease, transaction write-ahead, request commit + transaction settle, notification send", got)
	}
	got = count("approved h2h payment creating its request (incl. rate limit and notification send)", 4, 1, func() {
		b := payerData("amount", "10", "unit", "EUR")
		raw, _ := json.Marshal(b)
		if rec := serve(t, ph, "POST", "/payments/h2h/27", m.APIKey, "application/json", string(raw)); rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	if !slices.Equal(got, []string{"DynamoDB.UpdateItem", "DynamoDB.TransactWriteItems", "DynamoDB.TransactWriteItems", "SQS.SendMessage"}) {
		t.Errorf("calls %v: want rate limit, request + transaction write-ahead, request commit + transaction settle, notification send", got)
	}
	// A provider callback settling a pending transaction.
	up := payerData("upiId", "timeout@upi", "amount", "10", "unit", "INR")
	r := pay(t, m, "/payments/h2h/30", up)
	cb := resultCallback(uniq("evt-budget"), r.TransactionID, r.PaymentRequestID, "approved", "")
	got = count("approved provider callback (incl. notification send)", 4, 0, func() {
		rec := serve(t, ch, "POST", "/callbacks/svc", "", "application/json", cb, sig.Header, sig.Sign(callbackKey(t), time.Now(), []byte(cb)))
		if rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), []byte(`"changed":true`)) {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
	if !slices.Equal(got, []string{"DynamoDB.GetItem", "DynamoDB.UpdateItem", "DynamoDB.UpdateItem", "SQS.SendMessage"}) {
		t.Errorf("calls %v: want transaction read, request commit, transaction settle, notification send", got)
	}
	count("duplicate callback", 1, 0, func() {
		rec := serve(t, ch, "POST", "/callbacks/svc", "", "application/json", cb, sig.Header, sig.Sign(callbackKey(t), time.Now(), []byte(cb)))
		if rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), []byte(`"duplicate":true`)) {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	})
}

// TestLoadApprovedPayments measures approved host-to-host payments through
// the local API gateway. Opt-in:
//
//	PAYREQ_LOAD=1 go test -count=1 -run TestLoadApprovedPayments -v ./internal/paycore/
//
// PAYREQ_LOAD_N (default 500) payments, PAYREQ_LOAD_CONCURRENCY (default 4)
// clients; each is POST /payments/h2h/27 creating and paying its request.
func TestLoadApprovedPayments(t *testing.T) {
	if os.Getenv("PAYREQ_LOAD") != "1" {
		t.Skip("set PAYREQ_LOAD=1 to run the load test")
	}
	n, conc := envInt("PAYREQ_LOAD_N", 500), envInt("PAYREQ_LOAD_CONCURRENCY", 4)
	m := newMerchant(t)
	b := payerData("amount", "10.00", "unit", "EUR")
	raw, _ := json.Marshal(b)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	do := func() (time.Duration, error) {
		req, _ := http.NewRequest("POST", base(t)+"/payments/h2h/27", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", m.APIKey)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var res result
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		d := time.Since(start)
		if err == nil && (resp.StatusCode != 200 || res.TransactionStatusID != 1) {
			t.Errorf("not approved: %d %+v", resp.StatusCode, res)
		}
		return d, err
	}
	for i := 0; i < 20; i++ { // warm-up: connections, key cache
		if _, err := do(); err != nil {
			t.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				d, err := do()
				if err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	total := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)] }
	t.Logf("%d approved h2h payments, %d concurrent clients: p50 %s, p95 %s, p99 %s, max %s; %.0f payments/s",
		len(lat), conc, q(0.50).Round(10*time.Microsecond), q(0.95).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond),
		lat[len(lat)-1].Round(10*time.Microsecond), float64(len(lat))/total.Seconds())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
