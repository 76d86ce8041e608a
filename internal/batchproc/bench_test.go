package batchproc_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/testenv"
)

// BenchmarkBatchFile100k charges a 100,000-line file (PAYREQ_BENCH_ROWS
// overrides) end to end on the local emulators, through the real payment
// service: one invocation and its continuations, exactly as deployed. It
// checks one result line per input line, in order, with every valid row
// charged once, and reports rows/s. `make bench` runs it; `make test` does
// not (benchmarks run only with -bench).
func BenchmarkBatchFile100k(b *testing.B) {
	rows := 100_000
	if v := os.Getenv("PAYREQ_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	content, want := bigMixed(b, rows)
	f := newFixture(b)
	// The row concurrency the template gives the batch function (the local
	// stack runs the sandbox stage).
	conc, err := strconv.Atoi(f.functionEnv(b, "BatchFunction")("BATCH_CONCURRENCY"))
	if err != nil {
		b.Fatalf("BATCH_CONCURRENCY: %v", err)
	}
	p, pay, queueURL := f.processor(b, func(c *batchproc.Config) { c.Concurrency = conc })
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m := testenv.NewMerchant(b)
		ev := f.upload(b, m.ID, "bench.csv", []byte(content))
		b.StartTimer()
		start := time.Now()
		// A call timing out on the loaded emulator fails the invocation;
		// Lambda invokes it again (an hour-long run meets a few).
		if _, err := invokeAsLambda(b, p, ev); err != nil {
			b.Fatal(err)
		}
		f.drain(b, p, queueURL)
		total += time.Since(start)
		b.StopTimer()
		lines := parseResult(b, f.result(b, m.ID, "bench.csv"))
		checkLines(b, lines, want)
		b.StartTimer()
	}
	if n, twice := pay.total(); n != b.N*validRows(want) || len(twice) > 0 {
		b.Fatalf("%d charges (want %d), charged twice: %v", n, b.N*validRows(want), twice)
	}
	b.ReportMetric(float64(b.N*rows)/total.Seconds(), "rows/s")
}
