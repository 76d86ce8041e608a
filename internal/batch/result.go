package batch

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// Status is the outcome of one input line in the result file.
type Status string

const (
	StatusApproved Status = "approved"
	StatusDeclined Status = "declined"
	StatusPending  Status = "pending"
	StatusRejected Status = "rejected" // the line was not a valid row; nothing was charged
	// StatusDuplicate: the payment was charged before (same Reference ID, or
	// same card, amount and unit within a day); the line names the original
	// payment request and transaction and charges nothing.
	StatusDuplicate Status = "duplicate"
)

// transactionStatusID is the spec's transactionStatusId of each status; a
// rejected row has no transaction.
var transactionStatusID = map[Status]string{
	StatusApproved: "1",
	StatusDeclined: "2",
	StatusPending:  "3",
	StatusRejected: "",
	// The ids are the original payment's; its outcome is in the message, so
	// the column cannot be read as this line's own approval.
	StatusDuplicate: "",
}

// Result is one line of the result file. It has no card fields on purpose:
// the result file is given back to the merchant and must never carry a card
// number or security code.
type Result struct {
	Row              int // 1-based line number of the input line
	Status           Status
	PaymentRequestID string
	TransactionID    string
	Code             codes.Code
	Message          string
}

// Rejected is the result of a line that Reader.Next returned with errors. Its
// code is the first error's (like a 400 problem's top-level code) and its
// message lists every field error.
func Rejected(line int, errs []errkind.FieldError) Result {
	res := Result{Row: line, Status: StatusRejected}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Field+": "+e.Detail)
	}
	if len(errs) > 0 {
		res.Code = errs[0].Code
	}
	res.Message = strings.Join(parts, ", ")
	return res
}

// ResultWriter writes result lines
// row;status;paymentRequestId;transactionId;transactionStatusId;code;message
// with no header, as CSV with ';' as separator. Values are neutralised so
// that every line keeps exactly seven fields and no cell is read as a
// formula by a spreadsheet.
type ResultWriter struct {
	w *bufio.Writer
}

// NewResultWriter buffers its output; call Flush when done.
func NewResultWriter(w io.Writer) *ResultWriter { return &ResultWriter{w: bufio.NewWriter(w)} }

// Write appends one result line.
func (rw *ResultWriter) Write(r Result) error {
	tsID, ok := transactionStatusID[r.Status]
	if !ok {
		return fmt.Errorf("batch: unknown result status %q", r.Status)
	}
	if r.Row < 1 {
		return fmt.Errorf("batch: result row %d is not a line number", r.Row)
	}
	if r.TransactionID == "" {
		tsID = "" // no transaction, so no transaction status
	}
	fields := [...]string{
		strconv.Itoa(r.Row), string(r.Status), r.PaymentRequestID, r.TransactionID,
		tsID, string(r.Code), r.Message,
	}
	for i, f := range fields {
		if i > 0 {
			rw.w.WriteByte(';')
		}
		rw.w.WriteString(neutralise(f))
	}
	return rw.w.WriteByte('\n')
}

// Flush writes buffered lines to the underlying writer.
func (rw *ResultWriter) Flush() error { return rw.w.Flush() }

// lineBreaks are replaced inside values so that they cannot add a line to
// the result file.
var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// neutralise defuses CSV injection (a cell starting with =, +, -, @, tab or
// CR is a formula to spreadsheet software, so it gets a leading apostrophe),
// replaces line breaks, and quotes a value that holds a ';' or a '"' as RFC
// 4180 does (inner quotes doubled): the text keeps its ';' (a rejection
// message says `separated by ";"`) and the line keeps its seven fields for
// any CSV reader set to ';', spreadsheet imports included.
func neutralise(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		v = "'" + v
	}
	v = lineBreaks.Replace(v)
	if strings.ContainsAny(v, `;"`) {
		v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
	}
	return v
}
