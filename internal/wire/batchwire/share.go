package batchwire

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/config"
)

// CallsPerRow is what a batch row costs at the acquirer: a payment method
// and a confirmed intent (docs/stripe.md), one request on each endpoint.
const CallsPerRow = 2

// RowLatency is the acquirer latency the row concurrency is sized for: an
// invocation keeps RowsPerSecond × RowLatency rows in flight.
const RowLatency = 2 * time.Second

// BatchShare is the batch function's part of the acquirer's budget, from
// the template's per-stage parameters (docs/batch.md):
//
//	rows/s for batch      = share% × min(global/CallsPerRow, perEndpoint)
//	rows/s per invocation = that / min(merchants with open files, queue concurrency)
//	rows in flight        = ceil(rows/s for batch × RowLatency), at most 64
//
// The global limit counts both of a row's requests; the per-endpoint limit
// one (each of the two goes to its own endpoint).
type BatchShare struct {
	GlobalPerSecond, EndpointPerSecond float64
	SharePercent                       float64
	QueueConcurrency                   int
}

// RowsPerSecond is the batch rows per second of all invocations together.
func (b BatchShare) RowsPerSecond() float64 {
	perRow := b.GlobalPerSecond / CallsPerRow
	if b.EndpointPerSecond > 0 && b.EndpointPerSecond < perRow {
		perRow = b.EndpointPerSecond
	}
	return perRow * b.SharePercent / 100
}

// Concurrency is the rows one invocation keeps in flight: enough for the
// whole share (a lone merchant's job paces at all of it) at RowLatency.
func (b BatchShare) Concurrency() int {
	return min(64, max(1, int(math.Ceil(b.RowsPerSecond()*RowLatency.Seconds()))))
}

// shareOfAcquirer applies BATCH_ACQUIRER_RPS (0 or unset: the acquirer is
// not rate limited, the sandbox), BATCH_ACQUIRER_ENDPOINT_RPS,
// BATCH_ACQUIRER_SHARE, BATCH_QUEUE_CONCURRENCY, BATCH_SLICE,
// BATCH_QUEUE_CHARGING and BATCH_MERCHANT_ORDER. An explicit
// BATCH_CONCURRENCY above 0 wins over the derived concurrency.
func shareOfAcquirer(getenv config.Getenv, cfg *batchproc.Config) error {
	num := func(name string) (float64, error) {
		v := getenv(name)
		if v == "" {
			return 0, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return 0, fmt.Errorf("%s: %q is not a non-negative number", name, v)
		}
		return f, nil
	}
	var b BatchShare
	var q float64
	var err error
	for name, p := range map[string]*float64{"BATCH_ACQUIRER_RPS": &b.GlobalPerSecond, "BATCH_ACQUIRER_ENDPOINT_RPS": &b.EndpointPerSecond,
		"BATCH_ACQUIRER_SHARE": &b.SharePercent, "BATCH_QUEUE_CONCURRENCY": &q} {
		if *p, err = num(name); err != nil {
			return err
		}
	}
	b.QueueConcurrency = int(q)
	if b.GlobalPerSecond > 0 {
		if b.SharePercent <= 0 || b.SharePercent > 100 || b.QueueConcurrency < 1 {
			return fmt.Errorf("BATCH_ACQUIRER_SHARE (1-100) and BATCH_QUEUE_CONCURRENCY (≥1) are required with BATCH_ACQUIRER_RPS")
		}
		cfg.RowsPerSecond, cfg.QueueConcurrency = b.RowsPerSecond(), b.QueueConcurrency
		if cfg.Concurrency <= 0 {
			cfg.Concurrency = b.Concurrency()
		}
	}
	if v := getenv("BATCH_SLICE"); v != "" {
		if cfg.Slice, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("BATCH_SLICE: %w", err)
		}
	}
	cfg.QueueCharging = getenv("BATCH_QUEUE_CHARGING") == "1"
	cfg.MerchantOrder = getenv("BATCH_MERCHANT_ORDER") == "1"
	return nil
}
