package merchantapi_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

func TestRateLimitThroughTheStack(t *testing.T) {
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.RateLimitPerMinute = 5 })
	url := base(t) + "/payment-requests/status/1"
	for i := 1; i <= 5; i++ {
		r := testenv.Do(t, "GET", url, m.APIKey, nil)
		if r.Status != 404 || r.Header.Get("RateLimit-Policy") != `"default";q=5;w=60` || !strings.Contains(r.Header.Get("RateLimit"), `r=`+string(rune('0'+5-i))) {
			t.Fatalf("request %d: %d %v", i, r.Status, r.Header)
		}
	}
	r := testenv.Do(t, "GET", url, m.APIKey, nil)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("6th request: %d %v %s", r.Status, r.Header, r.Body)
	}
	// Wrong keys do not consume the merchant's budget, and other merchants are unaffected.
	other := testenv.NewMerchant(t)
	if r := testenv.Do(t, "GET", url, other.APIKey, nil); r.Status != 404 {
		t.Fatalf("other merchant: %d", r.Status)
	}
}

// API Gateway joins repeated headers with a comma, so "a,b" may be two
// Idempotency-Key headers: it is refused, like a repeated header.
func TestIdempotencyKeyWithCommaIsRefused(t *testing.T) {
	m := testenv.NewMerchant(t)
	body := `{"amount":12,"unit":"EUR","referenceId":"order-77"}`
	for _, key := range []string{"order-77, attempt,2", "a,b"} {
		if r := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, body, "Idempotency-Key", key); r.Status != http.StatusBadRequest {
			t.Fatalf("key %q: %d %s", key, r.Status, r.Body)
		}
	}
	key := "order-77 attempt 2"
	first := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, body, "Idempotency-Key", key)
	again := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, body, "Idempotency-Key", key)
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
		t.Fatalf("replay: %d %d %v", first.Status, again.Status, again.Header)
	}
}

func TestConcurrentIdempotentCreatesMakeOneRequest(t *testing.T) {
	m := testenv.NewMerchant(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[any]int{}
	statuses := map[int]int{}
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, `{"amount":5,"unit":"USD"}`, "Idempotency-Key", "burst-1")
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status == 201 {
				ids[r.JSON(t)["id"]]++
			}
		}()
	}
	wg.Wait()
	if len(ids) != 1 || statuses[201]+statuses[409] != 10 {
		t.Fatalf("ids %v statuses %v: want exactly one request created, others 409 or replays", ids, statuses)
	}
}
