package devstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A call whose client gave up is still moto's to finish: the proxy holds the
// turn until moto answered it, so the next call never runs beside it (two
// transactions side by side in moto can undo each other's rollback; a
// loaded run counted a payment twice).
func TestMotoProxyKeepsTheTurnWhenTheClientGivesUp(t *testing.T) {
	var now, most atomic.Int32
	moto := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(400 * time.Millisecond) // moto goes on whatever the client does
		w.WriteHeader(http.StatusOK)
	}))
	defer moto.Close()
	url, stop, err := serializeDynamoDB(moto.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// The first client gives up after 100 ms, like the SDK's call timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the first call answered before its client gave up")
	}
	resp, err := http.Post(url, "application/x-amz-json-1.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second call: %d", resp.StatusCode)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d calls in moto at once, want 1", m)
	}
}
