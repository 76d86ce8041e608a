package crashtest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/provider/sandbox/asyncjob"
	"github.com/payreq/payreq/internal/provider/sandbox/worker"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/testing/needs"
)

func payerBody(kv ...any) string {
	p := map[string]any{
		"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St",
		"city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func createRequest(t *testing.T, p *proc) int64 {
	t.Helper()
	r := p.call("POST", "/payment-requests", "", `{"amount": 25.00, "unit": "EUR"}`)
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("create: %v %d %s", r.err, r.status, r.body)
	}
	return int64(r.json(t)["id"].(float64))
}

// crashThenRetry pays a request with an Idempotency-Key; the stack dies at
// point under the call; after a restart the merchant retries with the same
// key and body, as the docs say. The retry must answer with the one
// approved payment, and the invariants must hold.
func crashThenRetry(t *testing.T, point string, pay func(p *proc, key string) response) int64 {
	t.Helper()
	id, p := crashThenRetryOn(t, point, nil, pay)
	checkPaidOnce(t, p, id)
	return id
}

// crashThenRetryOn is crashThenRetry on a stack started with the paydev
// arguments extra, leaving the checks of the books to the caller.
func crashThenRetryOn(t *testing.T, point string, extra []string, pay func(p *proc, key string) response) (int64, *proc) {
	t.Helper()
	dir := t.TempDir()
	p := startStack(t, dir, point, extra...)
	key := "order-" + point
	first := pay(p, key)
	if first.err == nil {
		t.Fatalf("the call survived the crash point: %d %s", first.status, first.body)
	}
	p.died()

	p = startStack(t, dir, "", extra...)
	retry := pay(p, key)
	for i := 0; i < 20 && retry.err == nil && retry.status == http.StatusConflict; i++ {
		// As the docs say: 409 while the first request's key is still held,
		// retry after Retry-After with the same key.
		time.Sleep(500 * time.Millisecond)
		retry = pay(p, key)
	}
	if retry.err != nil || retry.status != http.StatusOK {
		t.Fatalf("retry after the crash: %v %d %s", retry.err, retry.status, retry.body)
	}
	res := retry.json(t)
	if res["transactionStatusId"] != 1.0 || res["paymentRequestStatusId"] != 1.0 {
		t.Fatalf("retry after the crash did not answer with the approved payment: %s", retry.body)
	}
	id := int64(res["paymentRequestId"].(float64))
	// A second retry changes nothing either.
	if again := pay(p, key); again.err != nil || again.status != http.StatusOK || again.json(t)["transactionId"] != res["transactionId"] {
		t.Fatalf("second retry: %v %d %s", again.err, again.status, again.body)
	}
	return id, p
}

// The payment of an existing request (wallet, host-to-host), killed at each
// point of its path.
func TestCrashDuringWalletPayment(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	points := []string{
		crashpoint.AfterIdemBind, crashpoint.AfterLease, crashpoint.AfterTxWrite, crashpoint.AfterCharge,
		crashpoint.AfterRequestCommit, crashpoint.AfterTxSettle, crashpoint.AfterOutboxWrite, crashpoint.AfterQueueSend,
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel() // a stack of its own; mostly waits (start-up, the dead request's key lease)
			var id int64
			crashThenRetry(t, point, func(p *proc, key string) response {
				if id == 0 {
					id = createRequest(t, p)
				}
				return p.call("POST", "/payments/walletA/"+strconv.FormatInt(id, 10), key, payerBody("token", "tok_success"))
			})
		})
	}
}

// The create-and-pay form of /payments/h2h/{n}: the retry must find the
// request the first try created, not create and charge a second one.
func TestCrashDuringCreateAndPay(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	for _, point := range []string{crashpoint.AfterLease, crashpoint.AfterCharge, crashpoint.AfterRequestCommit} {
		t.Run(point, func(t *testing.T) {
			t.Parallel() // a stack of its own; mostly waits (start-up, the dead request's key lease)
			crashThenRetry(t, point, func(p *proc, key string) response {
				return p.call("POST", "/payments/h2h/27", key, payerBody("amount", "12.50", "unit", "EUR"))
			})
		})
	}
}

// A provider callback whose processing dies midway: the provider's retry
// completes it (no dedupe record hides it).
func TestCrashInsideCallback(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	dir := t.TempDir()
	p := startStack(t, dir, crashpoint.InCallback)
	r := p.call("POST", "/payments/h2h/30", "upi-1", payerBody("amount", "99", "unit", "INR", "upiId", "success@upi"))
	if r.err != nil || r.status != http.StatusOK || r.json(t)["transactionStatusId"] != 3.0 {
		t.Fatalf("UPI payment: %v %d %s", r.err, r.status, r.body)
	}
	res := r.json(t)
	txID, reqID := int64(res["transactionId"].(float64)), int64(res["paymentRequestId"].(float64))
	p.died() // the sandbox's callback arrives after 1 s and kills the stack

	p = startStack(t, dir, "")
	sealKey, err := os.ReadFile(filepath.Join(dir, "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := sig.DeriveKey(strings.TrimSpace(string(sealKey)), sig.InfoProviderCallback)
	if err != nil {
		t.Fatal(err)
	}
	cb := worker.Callback{EventID: worker.EventIDFor(asyncjob.KindResult, txID), TransactionID: txID,
		PaymentRequestID: reqID, Status: "approved", Timestamp: time.Now().UTC().Format(time.RFC3339)}
	// The provider retries its callback.
	if err := worker.Post(context.Background(), &http.Client{Timeout: 10 * time.Second}, p.info.APIBase,
		worker.ResultPath, key, cb, time.Now()); err != nil {
		t.Fatalf("the provider's retry was refused: %v", err)
	}
	checkPaidOnce(t, p, reqID)
}
