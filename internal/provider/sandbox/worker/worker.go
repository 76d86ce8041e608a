// Package worker is the asynchronous side of the sandbox provider
// (the `sandbox` function). The payments service queues a Job for each
// sandbox result that arrives "later" — a UPI collect answered or timed out,
// a QR code paid, an abandoned 3-D Secure challenge expiring — and this
// worker delivers it when it is due the way a real provider would: as a
// signed HTTP callback to the service's own /callbacks endpoints. Jobs carry
// ids and outcomes only, never card data.
package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/asyncjob"
	"github.com/payreq/payreq/internal/sig"
)

// Paths the worker calls.
const (
	ResultPath  = "/callbacks/svc"
	ThreeDSPath = "/callbacks/3ds"
)

// EventIDFor is the provider event id of a job (asyncjob.EventIDFor).
func EventIDFor(kind string, txID int64) string { return asyncjob.EventIDFor(kind, txID) }

// Callback is the JSON body of a provider result callback (also accepted as
// a form). It is the contract documented in docs/payments.md.
type Callback struct {
	EventID          string `json:"eventId"`
	TransactionID    int64  `json:"transactionId"`
	PaymentRequestID int64  `json:"paymentRequestId,omitempty"`
	Status           string `json:"status,omitempty"` // approved | declined
	Result           string `json:"result,omitempty"` // 3-D Secure: approve | fail | timeout
	Code             string `json:"code,omitempty"`
	ProviderRef      string `json:"providerRef,omitempty"`
	Timestamp        string `json:"timestamp,omitempty"`
}

// Sender re-queues a job that is not due yet.
type Sender interface {
	Send(ctx context.Context, queueURL string, body any, delay time.Duration) error
}

// Deps configure the worker.
type Deps struct {
	BaseURL  string // the service's public base URL (callbacks are sent there)
	Key      []byte // provider callback signing key
	Client   *http.Client
	Queue    Sender
	QueueURL string
	Log      *slog.Logger
	Now      func() time.Time
	// MaxWait is the longest a job that is almost due is waited for inside
	// the invocation (SQS delays are whole seconds); later jobs are re-queued.
	MaxWait time.Duration
	// Provider, when set, is the sandbox acquirer: a result is looked up in
	// its ledger (which books it as final) before the callback reports it,
	// so the ledger and the callbacks never disagree.
	Provider provider.Provider
}

// New returns the SQS handler (partial batch responses).
func New(d Deps) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Client == nil {
		d.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if d.MaxWait == 0 {
		d.MaxWait = 3 * time.Second
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	d.BaseURL = strings.TrimRight(d.BaseURL, "/")
	w := &worker{d}
	return w.handle
}

type worker struct{ Deps }

func (w *worker) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var (
		mu   sync.Mutex
		resp events.SQSEventResponse
		wg   sync.WaitGroup
	)
	for _, rec := range ev.Records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.process(ctx, rec); err != nil {
				w.Log.Warn("sandbox job failed; it will be retried", "message_id", rec.MessageId, "error", err.Error())
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return resp, nil
}

func (w *worker) process(ctx context.Context, rec events.SQSMessage) error {
	var job asyncjob.Job
	if err := json.Unmarshal([]byte(rec.Body), &job); err != nil || job.TransactionID <= 0 || job.EventID == "" {
		// A malformed job can never succeed: log it and drop it.
		w.Log.Error("malformed sandbox job dropped", "message_id", rec.MessageId)
		return nil
	}
	if wait := job.DueAt.Sub(w.Now()); wait > 0 {
		if wait > w.MaxWait {
			if err := w.Queue.Send(ctx, w.QueueURL, job, wait); err != nil {
				return fmt.Errorf("re-queue job of transaction %d: %w", job.TransactionID, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return w.deliver(ctx, job)
}

func (w *worker) deliver(ctx context.Context, job asyncjob.Job) error {
	cb := Callback{EventID: job.EventID, TransactionID: job.TransactionID, PaymentRequestID: job.PaymentRequestID,
		ProviderRef: job.ProviderRef, Timestamp: w.Now().UTC().Format(time.RFC3339)}
	path := ResultPath
	switch job.Kind {
	case asyncjob.KindResult:
		if w.Provider != nil {
			out, err := w.Provider.Lookup(ctx, payment.ChargeReference(job.TransactionID))
			if err != nil {
				return fmt.Errorf("look up transaction %d: %w", job.TransactionID, err)
			}
			if out.Status == provider.Pending {
				return fmt.Errorf("transaction %d is not due yet at the sandbox", job.TransactionID)
			}
			job.Status, job.Code = int(out.Status), string(out.Code)
		}
		switch job.Status {
		case 1:
			cb.Status = "approved"
		case 2:
			cb.Status, cb.Code = "declined", job.Code
		default:
			w.Log.Error("sandbox job with invalid status dropped", "transaction_id", job.TransactionID, "status", job.Status)
			return nil
		}
	case asyncjob.KindThreeDSTimeout:
		path, cb.Result = ThreeDSPath, "timeout"
	case asyncjob.KindThreeDSAnswer:
		if job.Result != "approve" && job.Result != "fail" {
			w.Log.Error("sandbox 3-D Secure answer with invalid result dropped", "transaction_id", job.TransactionID)
			return nil
		}
		path, cb.Result = ThreeDSPath, job.Result
	default:
		w.Log.Error("sandbox job of unknown kind dropped", "kind", job.Kind)
		return nil
	}
	if err := Post(ctx, w.Client, w.BaseURL, path, w.Key, cb, w.Now()); err != nil {
		return err
	}
	w.Log.Info("sandbox callback delivered", "kind", job.Kind, "transaction_id", job.TransactionID)
	return nil
}

// Post sends cb to the service's callback endpoint path, signed like a real
// provider's callback (X-Provider-Signature over the raw body). The sandbox
// worker and the hosted checkout's sandbox 3-D Secure page both use it, so
// every simulated result arrives through the real callback path.
func Post(ctx context.Context, client *http.Client, baseURL, path string, key []byte, cb Callback, now time.Time) error {
	body, _ := json.Marshal(cb)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(sig.Header, sig.Sign(key, now, body))
	req.Header.Set("User-Agent", "payreq-sandbox-provider/1")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return errors.New("POST " + path + ": " + resp.Status + ": " + strings.TrimSpace(string(msg)))
	}
	return nil
}
