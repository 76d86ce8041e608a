package batch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payer"
)

const (
	// MaxLineLength is the longest accepted line in bytes, without its line
	// terminator. Longer lines are rejected rows.
	MaxLineLength = 4096

	// bufferSize bounds the reader's memory. Anything larger than a line would
	// do; 64 KiB keeps the number of reads from a network body low.
	bufferSize = 64 << 10

	minFields = 13
	maxFields = 14
)

// FieldRow is the Field of a FieldError about the line as a whole (empty line,
// wrong field count, line too long). Such errors carry no spec code: the spec
// has none for a line that is not a row at all.
const FieldRow = "row"

var bom = []byte("\xEF\xBB\xBF")

// CurrencyLookup reports how many decimal places an amount in unit may carry,
// and whether unit is accepted at all (ISO 4217 fiat or a supported crypto
// code). currency.Decimals has this shape.
type CurrencyLookup func(unit string) (decimals int32, ok bool)

// Option configures a Reader.
type Option func(*Reader)

// WithCurrencies sets the currency lookup used to validate unit and amount.
// Without it every row is rejected with code 027: the reader cannot guess
// which currencies the service accepts.
func WithCurrencies(lookup CurrencyLookup) Option { return func(r *Reader) { r.currencies = lookup } }

// WithClock sets the clock that decides whether a card has expired
// (default time.Now).
func WithClock(now func() time.Time) Option { return func(r *Reader) { r.now = now } }

// WithStartOffset tells the reader at which byte of the object its input
// begins, so that Offset is an absolute position usable for the next ranged
// read.
func WithStartOffset(off int64) Option { return func(r *Reader) { r.off = off } }

// Reader streams the rows of a batch file. It holds one fixed-size buffer, so
// its memory does not grow with the file or with an over-long line.
type Reader struct {
	br         *bufio.Reader
	first      bool  // no line read yet: a BOM may follow
	bomAllowed bool  // input starts at the beginning of the file
	line       int   // number of the next line
	off        int64 // offset of the next line
	err        error // sticky: io.EOF or a read error

	now        func() time.Time
	currencies CurrencyLookup
}

// NewReader reads rows from r, whose first line is line startLine of the file
// (1 for a whole file; the line after the last row read when resuming).
func NewReader(r io.Reader, startLine int, opts ...Option) *Reader {
	rd := &Reader{
		br:         bufio.NewReaderSize(r, bufferSize),
		first:      true,
		bomAllowed: startLine == 1,
		line:       startLine,
		now:        time.Now,
	}
	for _, o := range opts {
		o(rd)
	}
	return rd
}

// Offset is the byte offset of the next unread line: a new Reader over the
// object from this offset, with NextLine as its startLine, continues exactly
// where this one stopped.
func (r *Reader) Offset() int64 { return r.off }

// NextLine is the line number the next row will carry.
func (r *Reader) NextLine() int { return r.line }

// Next returns the next line of the file as a row. A line that is not a valid
// row is not an error: it comes back with rowErrs describing why, so the
// caller can report it and carry on. err is io.EOF after the last line, or the
// error of the underlying reader; in both cases no row is returned.
func (r *Reader) Next() (line int, row Row, rowErrs []errkind.FieldError, err error) {
	if r.err != nil {
		return 0, Row{}, nil, r.err
	}
	raw, n, tooLong, err := r.readLine()
	if err != nil && (n == 0 || !errors.Is(err, io.EOF)) {
		// Nothing read, or a partial line cut by a failing body: the line is
		// not consumed, so Offset still points at its start for a retry.
		r.err = err
		return 0, Row{}, nil, err
	}
	atEOF := err != nil
	line = r.line
	r.line++
	r.off += n

	switch {
	case tooLong:
		return line, Row{}, rowError("line is longer than " + strconv.Itoa(MaxLineLength) + " bytes"), nil
	case isBlank(raw):
		if atEOF || r.atEOF() {
			// The one tolerated empty line: the last one of the file.
			r.err = io.EOF
			return 0, Row{}, nil, io.EOF
		}
		return line, Row{}, rowError("empty line"), nil
	}
	row, amountOK, rowErrs := parseRow(string(raw))
	if rowErrs != nil {
		return line, Row{}, rowErrs, nil
	}
	return line, row, validate(row, amountOK, r.now(), r.currencies), nil
}

// readLine returns the next line without its terminator, the number of bytes
// it occupied in the input (terminator and BOM included) and whether it was
// longer than MaxLineLength (its content is then discarded, not returned).
// The returned slice is only valid until the next read.
func (r *Reader) readLine() (line []byte, n int64, tooLong bool, err error) {
	line, err = r.br.ReadSlice('\n')
	n = int64(len(line))
	for errors.Is(err, bufio.ErrBufferFull) {
		// Over-long line: skip the rest without keeping it.
		tooLong, line = true, nil
		var more []byte
		more, err = r.br.ReadSlice('\n')
		n += int64(len(more))
	}
	if r.first && n > 0 {
		r.first = false
		if r.bomAllowed {
			line = bytes.TrimPrefix(line, bom)
		}
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) > MaxLineLength {
		tooLong, line = true, nil
	}
	return line, n, tooLong, err
}

// atEOF reports whether the input has no byte left after the current line.
func (r *Reader) atEOF() bool {
	_, err := r.br.Peek(1)
	return errors.Is(err, io.EOF)
}

func isBlank(line []byte) bool { return len(bytes.Trim(line, " \t")) == 0 }

// parseRow splits a line into a Row. Only the layout is checked here: the
// field count, and whether the amount is written as a plain decimal (the
// Decimal in Row no longer shows how it was written). Validate checks values.
func parseRow(line string) (row Row, amountOK bool, rowErrs []errkind.FieldError) {
	n := strings.Count(line, ";") + 1
	if n < minFields || n > maxFields {
		return Row{}, false, rowError("expected 13 or 14 fields separated by \";\", found " + strconv.Itoa(n))
	}
	var f [maxFields]string
	for i := range n {
		field, rest, _ := strings.Cut(line, ";")
		f[i] = strings.Trim(field, " \t")
		line = rest
	}
	row = Row{
		HolderName: f[0], CardNumber: f[1], CardExpiry: f[2], CVV: f[3],
		Email: f[4], Phone: f[5], Address: f[6], City: f[7], State: f[8],
		PostalCode: f[9], Country: payer.NormalizeCountry(f[10]), Unit: upperASCII(f[12]),
		ReferenceID: f[13],
	}
	row.Amount, amountOK = parseAmount(f[11])
	return row, amountOK, nil
}

// parseAmount accepts an optional sign, digits and an optional dot followed by
// digits: no exponent, no thousands separator, no decimal comma.
func parseAmount(s string) (decimal.Decimal, bool) {
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 {
		return decimal.Decimal{}, false
	}
	intPart, frac, hasDot := strings.Cut(digits, ".")
	if !isDigits(intPart) || (hasDot && !isDigits(frac)) {
		return decimal.Decimal{}, false
	}
	d, err := decimal.NewFromString(s)
	return d, err == nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// upperASCII upper-cases ASCII letters only, so unit and country codes are
// case-insensitive without Unicode case mapping changing other bytes.
func upperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'a' <= b[j] && b[j] <= 'z' {
					b[j] -= 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func rowError(detail string) []errkind.FieldError {
	return []errkind.FieldError{{Field: FieldRow, Detail: detail}}
}
