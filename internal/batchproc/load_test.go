package batchproc_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/testenv"
)

// The closing numbers of issue 7, on the local stack:
//
//	PAYREQ_LOAD=1 go test -count=1 -run TestLoad -v -timeout 20m ./internal/batchproc/
//
// PAYREQ_LOAD_ROWS overrides the 10,000 rows.
func TestLoad(t *testing.T) {
	if os.Getenv("PAYREQ_LOAD") != "1" {
		t.Skip("load test: set PAYREQ_LOAD=1")
	}
	rows := 10000
	if v := os.Getenv("PAYREQ_LOAD_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	content, want := bigMixed(t, rows)
	f := newFixture(t)

	t.Run("UploadToResultOverSFTP", func(t *testing.T) {
		m := newSFTPMerchant(t, f)
		dir := t.TempDir()
		src := filepath.Join(dir, "load.csv")
		if err := os.WriteFile(src, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		s := openSFTP(t, f.stack.Info.SFTPAddr, m.user, m.password, "")
		start := time.Now()
		s.run("put " + src + " /incoming/")
		uploaded := time.Since(start)
		took := s.waitFor("/results", "load.csv.result.csv", 10*time.Minute)
		s.close()
		lines := parseResult(t, f.result(t, m.ID, "load.csv"))
		checkLines(t, lines, want)
		t.Logf("%d rows, %d bytes: upload %.2fs, then result file after %.1fs (%.0f rows/s)",
			rows, len(content), uploaded.Seconds(), took.Seconds(), float64(rows)/took.Seconds())
		if took > 60*time.Second {
			t.Errorf("upload to result took %.1fs, target 60s", took.Seconds())
		}
	})

	t.Run("AWSCallsPerRow", func(t *testing.T) {
		cfg, counter := testenv.CountingAWSConfig(t)
		cf := fixtureWith(t, f.stack, cfg)
		p, pay, _ := cf.processor(t, func(c *batchproc.Config) {
			if v := os.Getenv("PAYREQ_LOAD_CONCURRENCY"); v != "" {
				c.Concurrency, _ = strconv.Atoi(v)
			}
		})
		m := testenv.NewMerchant(t)
		ev := cf.upload(t, m.ID, "counted.csv", []byte(content))
		counter.Reset()
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}()
		start := time.Now()
		if err := p.HandleS3(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		close(stop)
		calls := counter.Calls()
		byOp := map[string]int{}
		for _, c := range calls {
			byOp[c]++
		}
		var ops []string
		for op, n := range byOp {
			ops = append(ops, op+"="+itoa(n))
		}
		sort.Strings(ops)
		charged, _ := pay.total()
		t.Logf("%d rows (%d charged) in one invocation: %.1fs, %d AWS calls = %.2f per row, %.2f per charged row; peak heap in use %.1f MiB (whole test process)",
			rows, charged, took.Seconds(), len(calls), float64(len(calls))/float64(rows), float64(len(calls))/float64(charged),
			float64(peak.Load())/(1<<20))
		t.Logf("calls by operation: %s", strings.Join(ops, " "))
		checkLines(t, parseResult(t, cf.result(t, m.ID, "counted.csv")), want)
	})
}
