package batchproc_test

import (
	"context"
	"testing"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/testenv"
)

// A part size of a few lines forces a part every two or three lines in one
// invocation: the result file still has exactly one line per input line, in
// order (the buffer used to keep writing into a discarded copy after the
// first part, losing every later line of the invocation).
func TestManyPartsKeepEveryLine(t *testing.T) {
	f := newFixture(t)
	p, pay, _ := f.processor(t, func(c *batchproc.Config) { c.PartSize, c.Concurrency = 120, 4 })
	content, want := bigMixed(t, 80)
	m := testenv.NewMerchant(t)
	// An invocation that fails (a store call timing out on a loaded
	// emulator) is invoked again, as Lambda does with an S3 event.
	ev := f.upload(t, m.ID, "parts.csv", []byte(content))
	invocations := 0
	for {
		invocations++
		err := p.HandleS3(context.Background(), ev)
		if err == nil {
			break
		}
		if invocations == 3 {
			t.Fatal(err)
		}
		t.Logf("invocation %d failed; Lambda invokes the event again: %v", invocations, err)
	}
	lines := parseResult(t, f.result(t, m.ID, "parts.csv"))
	checkLines(t, lines, want)
	jobs := f.jobs(t, m.ID, "parts.csv")
	if len(jobs) != 1 || jobs[0].Parts < 20 || jobs[0].Invocations < 1 || jobs[0].Invocations > invocations {
		t.Fatalf("want at most %d invocation(s) writing at least 20 parts, got %d jobs: %+v", invocations, len(jobs), *jobs[0])
	}
	f.checkPaidOnce(t, pay, m.ID, lines, want)
}
