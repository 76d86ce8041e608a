package batch

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The examples of docs/batch.md are what the code does: its example lines are
// valid rows, and its rejected result line is the one this package writes.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/batch.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```[a-z]*\n(.*?)^```$").FindAllStringSubmatch(string(doc), -1)
	var lines13, lines14, file, results string
	for _, b := range blocks {
		switch body := b[1]; {
		case strings.HasPrefix(body, "Jane Doe;"):
			lines13 = body
		case strings.HasPrefix(body, "Ann Lee;"):
			lines14 = body
		case strings.HasPrefix(body, "<BOM>"):
			file = strings.Replace(body, "<BOM>", "\uFEFF", 1)
		case strings.HasPrefix(body, "1;approved;"):
			results = body
		}
	}
	if lines13 == "" || lines14 == "" || file == "" || results == "" {
		t.Fatal("docs/batch.md examples not found")
	}
	for _, ex := range []struct {
		text   string
		fields int
	}{{lines13, 13}, {lines14, 14}} {
		if n := strings.Count(strings.TrimSpace(ex.text), ";") + 1; n != ex.fields {
			t.Errorf("example has %d fields, want %d", n, ex.fields)
		}
		if got := parseString(t, ex.text); len(got) != 1 || got[0].errs != nil {
			t.Errorf("documented example is not a valid row: %v", got)
		}
	}

	got := parseString(t, strings.ReplaceAll(file, "\n", "\r\n"))
	if len(got) != 3 || got[0].errs != nil || got[1].errs != nil || got[2].errs == nil {
		t.Fatalf("documented file: %d rows", len(got))
	}
	var buf bytes.Buffer
	w := NewResultWriter(&buf)
	w.Write(Rejected(3, got[2].errs))
	w.Flush()
	wantLine := strings.Split(strings.TrimSpace(results), "\n")[2]
	if strings.TrimSpace(buf.String()) != wantLine {
		t.Errorf("documented rejected line:\n%s\nwritten:\n%s", wantLine, buf.String())
	}
}
