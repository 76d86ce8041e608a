package batchwire

import (
	"math"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batchproc"
)

// The template's defaults (Stripe live: 100 requests a second in all, 25
// per endpoint; batch 50%; 4 queue invocations) give batch 12.5 rows a
// second: the per-endpoint limit binds (a row is one request on each of two
// endpoints); an invocation keeps up to 25 rows in flight (the whole share
// at 2 s a row) and paces at its part of the share.
func TestBatchShareOfTheAcquirer(t *testing.T) {
	env := map[string]string{"BATCH_ACQUIRER_RPS": "100", "BATCH_ACQUIRER_ENDPOINT_RPS": "25", "BATCH_ACQUIRER_SHARE": "50",
		"BATCH_QUEUE_CONCURRENCY": "4", "BATCH_SLICE": "30s", "BATCH_QUEUE_CHARGING": "1", "BATCH_MERCHANT_ORDER": "1"}
	var cfg batchproc.Config
	if err := shareOfAcquirer(func(k string) string { return env[k] }, &cfg); err != nil {
		t.Fatal(err)
	}
	if math.Abs(cfg.RowsPerSecond-12.5) > 1e-9 || cfg.QueueConcurrency != 4 || cfg.Concurrency != 25 || cfg.Slice != 30*time.Second || !cfg.QueueCharging || !cfg.MerchantOrder {
		t.Fatalf("config %+v", cfg)
	}
	// Without a per-endpoint limit the global one binds: 20/2 × 50% = 5.
	if r := (BatchShare{GlobalPerSecond: 20, SharePercent: 50, QueueConcurrency: 2}).RowsPerSecond(); r != 5 {
		t.Fatalf("rows/s %v", r)
	}
	// The sandbox: no acquirer limit, no pacing, the explicit concurrency.
	cfg = batchproc.Config{Concurrency: 32}
	if err := shareOfAcquirer(func(k string) string { return map[string]string{"BATCH_ACQUIRER_RPS": "0"}[k] }, &cfg); err != nil || cfg.RowsPerSecond != 0 || cfg.Concurrency != 32 {
		t.Fatalf("sandbox: %+v %v", cfg, err)
	}
	if err := shareOfAcquirer(func(k string) string { return map[string]string{"BATCH_ACQUIRER_RPS": "100"}[k] }, &cfg); err == nil {
		t.Fatal("a budget without share and queue concurrency was accepted")
	}
}
