package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/provider/sandbox/asyncjob"
	"github.com/payreq/payreq/internal/sig"
)

var key = []byte("0123456789abcdef0123456789abcdef")

type sent struct {
	mu    sync.Mutex
	jobs  []asyncjob.Job
	delay []time.Duration
}

func (s *sent) Send(_ context.Context, _ string, body any, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, body.(asyncjob.Job))
	s.delay = append(s.delay, d)
	return nil
}

func record(id string, j asyncjob.Job) events.SQSMessage {
	b, _ := json.Marshal(j)
	return events.SQSMessage{MessageId: id, Body: string(b)}
}

func TestWorkerDeliversSignedCallbacks(t *testing.T) {
	type got struct {
		path string
		body Callback
	}
	var mu sync.Mutex
	var calls []got
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := sig.Verify(key, r.Header.Get(sig.Header), b, time.Now()); err != nil {
			t.Errorf("unsigned callback: %v", err)
		}
		var cb Callback
		_ = json.Unmarshal(b, &cb)
		mu.Lock()
		calls = append(calls, got{r.URL.Path, cb})
		f := fail
		mu.Unlock()
		if f {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	q := &sent{}
	h := New(Deps{BaseURL: srv.URL + "/", Key: key, Queue: q, QueueURL: "q", MaxWait: time.Second})
	now := time.Now()
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("a", asyncjob.Job{Kind: asyncjob.KindResult, EventID: "e1", TransactionID: 1, PaymentRequestID: 9, Status: 1, DueAt: now.Add(150 * time.Millisecond)}),
		record("b", asyncjob.Job{Kind: asyncjob.KindResult, EventID: "e2", TransactionID: 2, Status: 2, Code: "005", DueAt: now}),
		record("c", asyncjob.Job{Kind: asyncjob.KindThreeDSTimeout, EventID: "e3", TransactionID: 3, DueAt: now}),
		record("d", asyncjob.Job{Kind: asyncjob.KindResult, EventID: "e4", TransactionID: 4, Status: 1, DueAt: now.Add(time.Hour)}),
		{MessageId: "e", Body: "not json"},
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	if time.Since(now) < 150*time.Millisecond {
		t.Error("a job was delivered before it was due")
	}
	byTx := map[int64]got{}
	for _, c := range calls {
		byTx[c.body.TransactionID] = c
	}
	if c := byTx[1]; c.path != ResultPath || c.body.Status != "approved" || c.body.PaymentRequestID != 9 || c.body.EventID != "e1" {
		t.Errorf("approved: %+v", c)
	}
	if c := byTx[2]; c.body.Status != "declined" || c.body.Code != "005" {
		t.Errorf("declined: %+v", c)
	}
	if c := byTx[3]; c.path != ThreeDSPath || c.body.Result != "timeout" {
		t.Errorf("3-D Secure timeout: %+v", c)
	}
	if _, ok := byTx[4]; ok || len(q.jobs) != 1 || q.jobs[0].TransactionID != 4 || q.delay[0] < 59*time.Minute {
		t.Errorf("a job due in an hour must be re-queued: %+v %v", q.jobs, q.delay)
	}
	// A failing endpoint reports the message for a retry (then the DLQ).
	mu.Lock()
	fail = true
	mu.Unlock()
	resp, _ = h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("f", asyncjob.Job{Kind: asyncjob.KindResult, EventID: "e5", TransactionID: 5, Status: 1})}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "f" {
		t.Fatalf("%+v", resp)
	}
}

func TestEventIDIsStable(t *testing.T) {
	if EventIDFor(asyncjob.KindResult, 42) != "sbx_provider_result_42" || EventIDFor(asyncjob.KindResult, 42) == EventIDFor(asyncjob.KindThreeDSTimeout, 42) {
		t.Fatal(EventIDFor(asyncjob.KindResult, 42))
	}
}
