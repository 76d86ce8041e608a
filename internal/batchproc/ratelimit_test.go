package batchproc_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/testenv"
)

// throttledPay answers its first `refuse` calls as the payment service
// answers a charge the acquirer rate limited unprocessed (503 that is also
// provider.ErrNotProcessed), then pays through svc.
type throttledPay struct {
	svc    batchproc.PaymentService
	refuse atomic.Int64
}

func (p *throttledPay) busy() error {
	if p.refuse.Add(-1) < 0 {
		return nil
	}
	return fmt.Errorf("%w (%w)", errkind.UnavailableErr("The payment provider is busy"),
		&provider.NotProcessedError{RetryAfter: time.Second})
}

func (p *throttledPay) Pay(ctx context.Context, m *merchant.Merchant, id int64, a paycore.Attempt) (paycore.Result, error) {
	if err := p.busy(); err != nil {
		return paycore.Result{}, err
	}
	return p.svc.Pay(ctx, m, id, a)
}

func (p *throttledPay) PayNew(ctx context.Context, m *merchant.Merchant, r payment.Request, a paycore.Attempt) (paycore.Result, error) {
	if err := p.busy(); err != nil {
		return paycore.Result{}, err
	}
	return p.svc.PayNew(ctx, m, r, a)
}

// A row the acquirer rate limited is neither reported nor a failed run:
// the job keeps what is done, pauses (its continuation is queued with the
// acquirer's delay) and charges the row afterwards, so the result file is
// exact and every row is charged once.
func TestRateLimitedRowsPauseTheJob(t *testing.T) {
	f := newFixture(t)
	var tp *throttledPay
	proc, pay, queueURL := f.processor(t, func(c *batchproc.Config) { c.Concurrency = 2 }, func(d *batchproc.Deps) {
		tp = &throttledPay{svc: d.Charger.(*batchproc.PaymentsCharger).Service}
		tp.refuse.Store(3)
		d.Charger = &batchproc.PaymentsCharger{Service: tp, Store: f.store}
	})
	content, want := mixedFile("rl")
	m := testenv.NewMerchant(t)
	if err := proc.HandleS3(context.Background(), f.upload(t, m.ID, "rl.csv", []byte(content))); err != nil {
		t.Fatalf("a rate-limited row failed the invocation: %v", err)
	}
	n := f.drain(t, proc, queueURL)
	got := parseResult(t, f.result(t, m.ID, "rl.csv"))
	checkMixed(t, got, want)
	f.checkPaidOnce(t, pay, m.ID, got, want)
	if n == 0 || tp.refuse.Load() >= 0 {
		t.Fatalf("continuations %d, refusals left %d: the job never paused", n, tp.refuse.Load())
	}
}
