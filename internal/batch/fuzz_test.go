package batch

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzReader checks the reader's invariants on arbitrary input. The seed
// corpus is in testdata/fuzz/FuzzReader; run with
//
//	go test -fuzz=FuzzReader ./internal/batch
func FuzzReader(f *testing.F) {
	f.Add([]byte(validLine + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := checkedRead(t, data, NewReader(bytes.NewReader(data), 1, testOptions()...), 1, 0)

		// Resuming after any row yields the same rows; try the middle one.
		if len(whole) > 0 {
			stop := len(whole) / 2
			first := NewReader(bytes.NewReader(data), 1, testOptions()...)
			for range stop {
				if _, _, _, err := first.Next(); err != nil {
					t.Fatal(err)
				}
			}
			off := first.Offset()
			rest := checkedRead(t, data[off:], NewReader(bytes.NewReader(data[off:]), first.NextLine(),
				append(testOptions(), WithStartOffset(off))...), first.NextLine(), off)
			if len(rest) != len(whole)-stop {
				t.Fatalf("resumed after %d rows: %d rows, want %d", stop, len(rest), len(whole)-stop)
			}
			for i, g := range rest {
				w := whole[stop+i]
				if g.line != w.line || g.offset != w.offset || !sameRow(g.row, w.row) || len(g.errs) != len(w.errs) {
					t.Fatalf("resumed row %d differs: line %d/%d offset %d/%d", i, g.line, w.line, g.offset, w.offset)
				}
			}
		}

		// A valid row written back parses to the same row.
		for _, e := range whole {
			if e.errs != nil {
				continue
			}
			line := formatRow(e.row)
			again := checkedRead(t, []byte(line+"\n"), NewReader(strings.NewReader(line+"\n"), 2, testOptions()...), 2, 0)
			if len(again) != 1 || again[0].errs != nil || !sameRow(again[0].row, e.row) {
				t.Fatalf("line %d does not round-trip: %q → %d rows, errors %v", e.line, line, len(again), firstErrs(again))
			}
		}
	})
}

// checkedRead reads everything from r, a reader over data whose first byte
// is at startOffset of the file, and asserts the invariants that hold for any
// input: no read error, line numbers consecutive from startLine, offsets
// increasing and within the input, the whole input consumed at the end, and
// layout errors never paired with a row.
func checkedRead(t *testing.T, data []byte, r *Reader, startLine int, startOffset int64) []entry {
	t.Helper()
	var out []entry
	prevLine, prevOff := startLine-1, startOffset
	for {
		line, row, errs, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		off := r.Offset()
		switch {
		case line != prevLine+1:
			t.Fatalf("line %d after %d", line, prevLine)
		case off <= prevOff:
			t.Fatalf("offset %d after %d: a row consumed no input", off, prevOff)
		case off > int64(len(data))+startOffset:
			t.Fatalf("offset %d beyond input length %d", off, len(data))
		case len(errs) > 0 && errs[0].Field == FieldRow && (row != Row{}):
			t.Fatalf("line %d: layout error with a row", line)
		}
		out = append(out, entry{line, row, errs, off})
		prevLine, prevOff = line, off
	}
	if r.Offset() != int64(len(data))+startOffset {
		t.Fatalf("final offset %d, input length %d", r.Offset(), len(data))
	}
	if _, _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after EOF: %v", err)
	}
	return out
}

func firstErrs(es []entry) any {
	if len(es) == 0 {
		return nil
	}
	return es[0].errs
}
