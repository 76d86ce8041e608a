package batch

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/errkind"
)

// testNow is the clock of every test: cards expiring 12/30 are valid,
// 12/25 expired.
var testNow = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)

func testOptions() []Option {
	return []Option{WithCurrencies(currency.Decimals), WithClock(func() time.Time { return testNow })}
}

const validLine = "Jane Doe;4111 1111 1111 1111;12/30;123;jane@example.com;4155550100;1 Main St;Springfield;IL;62701;US;10.50;USD;INV-1"

// entry is one result of Reader.Next, with the offset after it.
type entry struct {
	line   int
	row    Row
	errs   []errkind.FieldError
	offset int64
}

func readAll(t testing.TB, r *Reader) []entry {
	t.Helper()
	var out []entry
	for {
		line, row, errs, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, entry{line, row, errs, r.Offset()})
	}
}

func parseString(t testing.TB, s string) []entry {
	t.Helper()
	return readAll(t, NewReader(strings.NewReader(s), 1, testOptions()...))
}

// sameRow compares rows field by field; amounts compare by value
// ("10.50" and "10.5" are the same amount).
func sameRow(a, b Row) bool {
	amountsEqual := a.Amount.Equal(b.Amount)
	a.Amount, b.Amount = decimal.Decimal{}, decimal.Decimal{}
	return amountsEqual && a == b
}

// formatRow writes a row back in the file format (the card data included:
// test use only).
func formatRow(r Row) string {
	return strings.Join([]string{
		r.HolderName, r.CardNumber, r.CardExpiry, r.CVV, r.Email, r.Phone, r.Address, r.City,
		r.State, r.PostalCode, r.Country, r.Amount.String(), r.Unit, r.ReferenceID,
	}, ";")
}

// rowGenerator produces n generated rows (n < 0: without end) one line at a
// time, so tests can stream millions of rows without holding them.
type rowGenerator struct {
	n, i    int
	pending []byte
	scratch []byte
}

func (g *rowGenerator) Read(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		if len(g.pending) == 0 {
			if g.n >= 0 && g.i >= g.n {
				break
			}
			g.pending = g.line(g.i)
			g.i++
		}
		c := copy(p[written:], g.pending)
		g.pending = g.pending[c:]
		written += c
	}
	if written == 0 {
		return 0, io.EOF
	}
	return written, nil
}

// line i: mostly valid rows with varying values, every 10th one invalid.
func (g *rowGenerator) line(i int) []byte {
	b := g.scratch[:0]
	b = append(b, "Payer "...)
	b = strconv.AppendInt(b, int64(i), 10)
	if i%10 == 9 {
		b = append(b, ";4111 1111 1111 1112;13/30;12;not-an-email;123;1 Main St;Springfield;IL;62701;XX;-1;ZZZ;"...)
	} else {
		b = append(b, ";4111 1111 1111 1111;12/30;123;payer"...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, "@example.com;4155550100;1 Main St;Springfield;IL;62701;US;"...)
		b = strconv.AppendInt(b, int64(i%1000+1), 10)
		b = append(b, ".50;EUR;INV-"...)
		b = strconv.AppendInt(b, int64(i), 10)
	}
	b = append(b, '\r', '\n')
	g.scratch = b
	return b
}
