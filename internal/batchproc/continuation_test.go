package batchproc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/testenv"
)

// bigMixed is a file of n lines cycling through approved, declined, 3-D
// Secure (declined 004) and rejected lines, with long fields so that the
// hash phase spans several reads; references are REF-<line>.
func bigMixed(t testing.TB, n int) (string, []expect) {
	t.Helper()
	long := strings.Repeat("x", 90)
	var b strings.Builder
	var want []expect
	for i := 1; i <= n; i++ {
		ref := fmt.Sprintf("REF-%d", i)
		var l string
		var w expect
		switch i % 5 {
		case 0:
			l, w = line("Holder "+long, "4111 1111 1111 1111", "12/30", "123", "10.50", "EUR", ref), expect{"approved", "1", "", ""}
		case 1:
			l, w = line("Holder "+long, "4000 0000 0000 0002", "12/30", "123", "7", "USD", ref), expect{"declined", "2", "999", "Declined"}
		case 2:
			l, w = line("Holder "+long, "4000 0000 0000 3220", "12/30", "123", "1.99", "GBP", ref), expect{"declined", "2", "004", "3-D Secure"}
		case 3:
			l, w = line("Holder "+long, "4111 1111 1111 1111", "12/30", "12", "1", "USD", ref), expect{"rejected", "", "042", "cvc:"}
		default:
			l, w = line("Holder "+long, "5555 5555 5555 4444", "11/31", "999", "3", "JPY", ref), expect{"approved", "1", "", ""}
		}
		b.WriteString(l + "\n")
		want = append(want, w)
	}
	return b.String(), want
}

func checkLines(t testing.TB, got []resultLine, want []expect) { t.Helper(); checkMixed(t, got, want) }

// blankIDs removes the ids of a result, which differ between merchants.
func blankIDs(lines []resultLine) []resultLine {
	out := make([]resultLine, len(lines))
	for i, l := range lines {
		l.prID, l.txID = "", ""
		out[i] = l
	}
	return out
}

// A file processed under a tiny budget — a few hundred bytes of hashing and
// seven lines per invocation — is continued from exact byte offsets through
// the continuation queue, in many invocations, and gives the same result as
// a single pass, with every row charged exactly once.
func TestByteRangeContinuation(t *testing.T) {
	f := newFixture(t)
	small, pay, queueURL := f.processor(t, func(c *batchproc.Config) {
		c.MaxLinesPerRun, c.MaxHashBytesPerRun, c.PartSize, c.Concurrency = 7, 1000, 500, 3
	})
	content, want := bigMixed(t, 53)
	m := testenv.NewMerchant(t)
	ev := f.upload(t, m.ID, "split.csv", []byte(content))
	if err := small.HandleS3(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if _, err := f.objects.Head(context.Background(), batchproc.ResultKey(m.ID, "split.csv")); err == nil {
		t.Fatal("the first invocation finished the whole file")
	}
	continuations := f.drain(t, small, queueURL)
	split := parseResult(t, f.result(t, m.ID, "split.csv"))
	checkLines(t, split, want)
	f.checkPaidOnce(t, pay, m.ID, split, want)
	jobs := f.jobs(t, m.ID, "split.csv")
	hashRuns := (len(content) + 999) / 1000
	lineRuns := (53 + 6) / 7
	if len(jobs) != 1 || jobs[0].State != "done" || jobs[0].Invocations < hashRuns+lineRuns-1 || continuations != jobs[0].Invocations-1 {
		t.Fatalf("job %+v after %d continuations (file of %d bytes)", jobs[0], continuations, len(content))
	}
	t.Logf("%d bytes, 53 lines: %d invocations", len(content), jobs[0].Invocations)
	if keys, _ := f.objects.List(context.Background(), batchproc.WorkPrefix+m.ID+"/"); len(keys) != 0 {
		t.Errorf("work files left: %v", keys)
	}

	// The same file in a single pass (another merchant: fresh charges).
	single, _, _ := f.processor(t, nil)
	m2 := testenv.NewMerchant(t)
	if err := single.HandleS3(context.Background(), f.upload(t, m2.ID, "split.csv", []byte(content))); err != nil {
		t.Fatal(err)
	}
	one := parseResult(t, f.result(t, m2.ID, "split.csv"))
	if fmt.Sprint(blankIDs(one)) != fmt.Sprint(blankIDs(split)) {
		t.Errorf("split result differs from a single pass:\n%v\n%v", blankIDs(split), blankIDs(one))
	}
	if jobs := f.jobs(t, m2.ID, "split.csv"); jobs[0].Invocations != 1 {
		t.Errorf("single pass took %d invocations", jobs[0].Invocations)
	}
}
