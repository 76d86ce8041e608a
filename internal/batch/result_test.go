package batch

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

func writeResults(t *testing.T, results ...Result) string {
	t.Helper()
	var buf bytes.Buffer
	w := NewResultWriter(&buf)
	for _, r := range results {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// fieldsOf reads one result line as a CSV reader set to ';' does (a
// spreadsheet import, encoding/csv): it must be exactly seven fields.
func fieldsOf(t *testing.T, line string) []string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(line))
	r.Comma = ';'
	r.FieldsPerRecord = 7
	rec, err := r.Read()
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("%q: more than one record", line)
	}
	return rec
}

func TestResultWriterFormat(t *testing.T) {
	got := writeResults(t,
		Result{Row: 1, Status: StatusApproved, PaymentRequestID: "1001", TransactionID: "5001"},
		Result{Row: 2, Status: StatusDeclined, PaymentRequestID: "1002", TransactionID: "5002",
			Code: codes.DeclinedContactIssuer, Message: codes.DeclinedContactIssuer.Message()},
		Result{Row: 3, Status: StatusPending, PaymentRequestID: "1003", TransactionID: "5003"},
		Rejected(4, []errkind.FieldError{
			{Field: "number", Code: codes.InvalidCardNumber, Detail: "number is not a valid card number"},
			{Field: "email", Code: codes.InvalidEmail, Detail: "email must be an e-mail address such as payer@example.com"},
		}),
		Rejected(5, []errkind.FieldError{{Field: FieldRow, Detail: "empty line"}}),
		// Declined before any transaction existed: no transaction status.
		Result{Row: 6, Status: StatusDeclined, PaymentRequestID: "1006", Code: codes.AmountAboveMaximum,
			Message: codes.AmountAboveMaximum.Message()},
	)
	want := "1;approved;1001;5001;1;;\n" +
		"2;declined;1002;5002;2;999;Declined, contact the card issuer\n" +
		"3;pending;1003;5003;3;;\n" +
		"4;rejected;;;;040;number: number is not a valid card number, email: email must be an e-mail address such as payer@example.com\n" +
		"5;rejected;;;;;row: empty line\n" +
		"6;declined;1006;;;018;Declined: amount above maximum\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestResultWriterNeutralises(t *testing.T) {
	cases := map[string]string{
		"=HYPERLINK(\"http://x\")": "'=HYPERLINK(\"http://x\")",
		"+1+1":                     "'+1+1",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"\tTAB":                    "'\tTAB",
		"\rCR":                     "' CR",
		"a;b;c":                    "a;b;c",
		`separated by ";"`:         `separated by ";"`,
		"line1\nline2\r\nline3":    "line1 line2 line3",
		"plain text":               "plain text",
		"":                         "",
		"x=1":                      "x=1",
	}
	for in, want := range cases {
		got := writeResults(t, Result{Row: 1, Status: StatusDeclined, PaymentRequestID: "p", TransactionID: "t", Message: in})
		fields := fieldsOf(t, got)
		if fields[6] != want {
			t.Errorf("message %q → %q, want %q", in, got, want)
		}
	}
	// Every field is neutralised, not only the message.
	got := writeResults(t, Result{Row: 9, Status: StatusApproved, PaymentRequestID: "=1", TransactionID: "@2", Code: "-3"})
	if got != "9;approved;'=1;'@2;1;'-3;\n" {
		t.Errorf("got %q", got)
	}
}

// Whatever the values, every line has exactly seven fields and no cell
// starts a formula.
func TestResultWriterAlwaysSevenFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab;=+-@\t\r\n\"' é;\u2028")
	randomString := func() string {
		r := make([]rune, rng.IntN(12))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	statuses := []Status{StatusApproved, StatusDeclined, StatusPending, StatusRejected}
	for i := range 2000 {
		res := Result{Row: i + 1, Status: statuses[rng.IntN(4)], PaymentRequestID: randomString(),
			TransactionID: randomString(), Code: codes.Code(randomString()), Message: randomString()}
		out := writeResults(t, res)
		if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || strings.Contains(out, "\r") {
			t.Fatalf("%+v → %q: not one line", res, out)
		}
		fields := fieldsOf(t, out)
		for _, f := range fields {
			if f != "" && strings.ContainsRune("=+-@\t", rune(f[0])) {
				t.Fatalf("%q → cell %q starts a formula", out, f)
			}
		}
	}
}

func TestResultWriterRefusesBadResults(t *testing.T) {
	w := NewResultWriter(&bytes.Buffer{})
	if err := w.Write(Result{Row: 1, Status: "charged"}); err == nil {
		t.Error("unknown status accepted")
	}
	if err := w.Write(Result{Row: 0, Status: StatusApproved}); err == nil {
		t.Error("row 0 accepted")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestResultWriterReportsWriteErrors(t *testing.T) {
	w := NewResultWriter(failingWriter{})
	var err error
	for i := 1; i <= 10_000 && err == nil; i++ {
		err = w.Write(Result{Row: i, Status: StatusApproved, PaymentRequestID: "p", TransactionID: "t"})
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		t.Fatal("write error not reported")
	}
}
