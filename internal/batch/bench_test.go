package batch

import (
	"errors"
	"io"
	"runtime"
	"testing"
)

// BenchmarkParseValidate measures reading and validating rows on one core:
//
//	go test -run '^$' -bench ParseValidate -cpu 1 ./internal/batch
//
// The target is at least 200,000 rows/s.
func BenchmarkParseValidate(b *testing.B) {
	r := NewReader(&rowGenerator{n: -1}, 1, testOptions()...)
	b.ReportAllocs()
	rows := 0
	for b.Loop() {
		if _, _, _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
		rows++
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// streamPeakHeap streams n generated rows through the reader and validation
// and returns the highest HeapInuse seen and the bytes allocated in total.
func streamPeakHeap(t *testing.T, n int) (peak, allocated uint64) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	startAlloc := ms.TotalAlloc
	peak = ms.HeapInuse

	r := NewReader(&rowGenerator{n: n}, 1, testOptions()...)
	rows := 0
	for {
		_, _, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rows++; rows%5_000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	runtime.ReadMemStats(&ms)
	if rows != n {
		t.Fatalf("read %d rows, want %d", rows, n)
	}
	return max(peak, ms.HeapInuse), ms.TotalAlloc - startAlloc
}

// Memory must not grow with the file: a million rows may not need more than
// 32 MB of heap beyond what ten thousand need.
func TestStreamingMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams a million rows")
	}
	smallPeak, smallAlloc := streamPeakHeap(t, 10_000)
	bigPeak, bigAlloc := streamPeakHeap(t, 1_000_000)
	const mb = 1 << 20
	t.Logf("peak HeapInuse: 10k rows %.1f MB, 1M rows %.1f MB; allocated in total %.0f MB / %.0f MB (%.0f B/row)",
		float64(smallPeak)/mb, float64(bigPeak)/mb, float64(smallAlloc)/mb, float64(bigAlloc)/mb, float64(bigAlloc)/1e6)
	if bigPeak > smallPeak+32*mb {
		t.Errorf("peak heap %d MB for 1M rows vs %d MB for 10k rows: memory grows with the file",
			bigPeak/mb, smallPeak/mb)
	}
}
