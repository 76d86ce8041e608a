package notifier_test

import (
	"context"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/testenv"
)

// PAYREQ_LOAD=1 go test -count=1 -run TestNotificationLatencyAndThroughput -v ./internal/notifier/
func TestNotificationLatencyAndThroughput(t *testing.T) {
	if os.Getenv("PAYREQ_LOAD") == "" {
		t.Skip("load test: set PAYREQ_LOAD=1")
	}
	rc := newReceiver(t, 200)
	var mu sync.Mutex
	received := map[string]time.Time{}
	rc.handler = nil
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL = rc.srv.URL; m.RateLimitPerMinute = 100000 })
	payer := `{"amount":"10.00","unit":"EUR","name":"Ann Lee","email":"ann@example.com","phoneNumber":"4915112345678",
		"address":"Main St 1","city":"Berlin","state":"BE","postalCode":"10115","country":"DE"}`

	// 1. Approval → receipt latency over 200 approved host-to-host payments.
	const n = 200
	approvedAt := map[string]time.Time{}
	for i := 0; i < n; i++ {
		r := testenv.Do(t, "POST", testenv.Stack(t).Info.APIBase+"/payments/h2h/27", m.APIKey, payer)
		if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
			t.Fatalf("payment %d: %d %s", i, r.Status, r.Body)
		}
		approvedAt[strconv.FormatInt(int64(r.JSON(t)["paymentRequestId"].(float64)), 10)] = time.Now()
	}
	waitFor(t, "all notifications", 2*time.Minute, func() bool { return len(rc.got()) >= n })
	for _, h := range rc.got() {
		f, _ := url.ParseQuery(string(h.body))
		mu.Lock()
		if _, seen := received[f.Get("id")]; !seen {
			received[f.Get("id")] = h.at
		}
		mu.Unlock()
	}
	var lat []time.Duration
	for id, at := range approvedAt {
		got, ok := received[id]
		if !ok {
			t.Fatalf("no notification for request %s", id)
		}
		lat = append(lat, got.Sub(at))
	}
	slices.Sort(lat)
	p50, p95 := lat[len(lat)/2], lat[len(lat)*95/100]
	t.Logf("approval → receipt over %d payments: p50 %.3fs, p95 %.3fs, max %.3fs", n, p50.Seconds(), p95.Seconds(), lat[len(lat)-1].Seconds())
	if p95 > 2*time.Second {
		t.Errorf("p95 %v exceeds the 2 s target", p95)
	}

	// 2. Throughput of one notifier instance (the stack runs one poller)
	// against a fast local receiver: 1000 events enqueued at once.
	const burst = 1000
	before := len(rc.got())
	q := queue.New(sqsClient(t))
	evs := make([]any, 0, burst)
	for i := 0; i < burst; i++ {
		evs = append(evs, settle(t, m, rc.srv.URL, true))
	}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, ev := range evs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := q.Send(context.Background(), testenv.Stack(t).Info.Queues["NotificationsQueue"], ev, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "burst delivered", 5*time.Minute, func() bool { return len(rc.got())-before >= burst })
	took := time.Since(start)
	t.Logf("one notifier instance delivered %d notifications in %.1fs: %.0f/s", burst, took.Seconds(), burst/took.Seconds())
}
