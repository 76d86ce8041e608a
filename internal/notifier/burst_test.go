package notifier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// A burst of notifications put on the interactive queue in one go, as the
// bench does, all reach the merchant through the local stack's own poller
// and notifier, the slowest well within the queue's visibility timeout
// (300 s): a message received and then neither deleted nor made visible
// again would only come back after it.
func TestNotificationBurstAllArrive(t *testing.T) {
	n := 400
	if v, err := strconv.Atoi(os.Getenv("PAYREQ_BURST_N")); err == nil && v > 0 {
		n = v
	}
	const bound = 90 * time.Second
	s := testenv.Stack(t)
	var (
		mu  sync.Mutex
		got = map[int64]time.Time{}
	)
	more := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, _ := strconv.ParseInt(r.PostForm.Get("transactionId"), 10, 64)
		mu.Lock()
		if _, ok := got[id]; !ok {
			got[id] = time.Now()
		}
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.NotifyURL = srv.URL })
	evs := make([]payment.NotifyEvent, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range evs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			evs[i] = settleOn(t, m, "", true, payment.ChannelInteractive)
		}()
	}
	wg.Wait()
	client := sqsClient(t)
	q := s.Info.Queues["NotificationsQueue"]
	burst := time.Now()
	for i := 0; i < n; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for k := i; k < min(i+10, n); k++ {
			body, _ := json.Marshal(evs[k])
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), MessageBody: aws.String(string(body))})
		}
		out, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &q, Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("burst send: %v %+v", err, out)
		}
	}
	deadline := burst.Add(bound)
	for {
		mu.Lock()
		var lat []time.Duration
		for _, ev := range evs {
			if at, ok := got[ev.TransactionID]; ok {
				lat = append(lat, at.Sub(burst))
			}
		}
		mu.Unlock()
		if len(lat) == n {
			slices.Sort(lat)
			t.Logf("%d notifications: p50 %s, p95 %s, slowest %s", n, lat[n/2], lat[n*95/100], lat[n-1])
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notifications arrived within %s", len(lat), n, bound)
		}
		select {
		case <-more:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
