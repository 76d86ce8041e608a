package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

func TestReaderValidRow(t *testing.T) {
	got := parseString(t, validLine+"\n")
	if len(got) != 1 {
		t.Fatalf("got %d rows, want 1", len(got))
	}
	e := got[0]
	if e.line != 1 || e.errs != nil || e.offset != int64(len(validLine)+1) {
		t.Fatalf("line %d, errs %v, offset %d", e.line, e.errs, e.offset)
	}
	want := Row{
		HolderName: "Jane Doe", CardNumber: "4111 1111 1111 1111", CardExpiry: "12/30", CVV: "123",
		Email: "jane@example.com", Phone: "4155550100", Address: "1 Main St", City: "Springfield",
		State: "IL", PostalCode: "62701", Country: "US", Amount: decimal.RequireFromString("10.50"),
		Unit: "USD", ReferenceID: "INV-1",
	}
	if !sameRow(e.row, want) {
		t.Errorf("row = %#v", []any{e.row.HolderName, e.row.Email, e.row.Amount, e.row.Unit, e.row.ReferenceID})
	}
}

func TestReaderLayout(t *testing.T) {
	without14 := strings.TrimSuffix(validLine, ";INV-1")
	cases := []struct {
		name     string
		input    string
		wantRows []int // line numbers returned
		wantErr  map[int]string
	}{
		{"13 fields", without14 + "\n", []int{1}, nil},
		{"14th field empty", without14 + ";\n", []int{1}, nil},
		{"no final newline", validLine, []int{1}, nil},
		{"CRLF", validLine + "\r\n" + validLine + "\r\n", []int{1, 2}, nil},
		{"BOM", "\xEF\xBB\xBF" + validLine + "\n" + validLine + "\n", []int{1, 2}, nil},
		{"BOM with CRLF", "\xEF\xBB\xBF" + validLine + "\r\n", []int{1}, nil},
		{"trailing empty line", validLine + "\n\n", []int{1}, nil},
		{"trailing empty CRLF line", validLine + "\r\n\r\n", []int{1}, nil},
		{"trailing blank line without newline", validLine + "\n  ", []int{1}, nil},
		{"two trailing empty lines", validLine + "\n\n\n", []int{1, 2}, map[int]string{2: "row"}},
		{"empty line inside", validLine + "\n\n" + validLine + "\n", []int{1, 2, 3}, map[int]string{2: "row"}},
		{"empty first line", "\n" + validLine + "\n", []int{1, 2}, map[int]string{1: "row"}},
		{"empty file", "", nil, nil},
		{"only a newline", "\n", nil, nil},
		{"only a BOM", "\xEF\xBB\xBF", nil, nil},
		{"12 fields", strings.TrimSuffix(without14, ";USD") + "\n", []int{1}, map[int]string{1: "row"}},
		{"15 fields", validLine + ";extra\n", []int{1}, map[int]string{1: "row"}},
		{"15 fields, last empty", validLine + ";\n", []int{1}, map[int]string{1: "row"}},
		{"quotes do not protect a separator", `"Doe; Jane";` + validLine[9:] + "\n", []int{1}, map[int]string{1: "row"}},
		{"long line then valid", strings.Repeat("x", MaxLineLength+1) + "\n" + validLine + "\n", []int{1, 2}, map[int]string{1: "row"}},
		{"very long line then valid", strings.Repeat("x;", 100_000) + "\n" + validLine + "\n", []int{1, 2}, map[int]string{1: "row"}},
		{"long last line", validLine + "\n" + strings.Repeat("y", 3*bufferSize), []int{1, 2}, map[int]string{2: "row"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parseString(t, c.input)
			var lines []int
			for _, e := range got {
				lines = append(lines, e.line)
				wantField, wantBad := c.wantErr[e.line]
				switch {
				case wantBad && (len(e.errs) == 0 || e.errs[0].Field != wantField):
					t.Errorf("line %d: errors %v, want one on %q", e.line, e.errs, wantField)
				case !wantBad && len(e.errs) != 0:
					t.Errorf("line %d: unexpected errors %v", e.line, e.errs)
				}
				if wantField == FieldRow && (e.row != Row{} || e.errs[0].Code != "" || len(e.errs) != 1) {
					t.Errorf("line %d: a layout error must come alone, with no code and no row: %v", e.line, e.errs)
				}
			}
			if !slices.Equal(lines, c.wantRows) {
				t.Errorf("lines %v, want %v", lines, c.wantRows)
			}
			if len(got) > 0 && got[len(got)-1].offset > int64(len(c.input)) {
				t.Errorf("offset %d beyond input length %d", got[len(got)-1].offset, len(c.input))
			}
		})
	}
}

func TestReaderLineLengthLimit(t *testing.T) {
	// Pad the reference so the line is exactly MaxLineLength bytes; the
	// reference is then too long (028), but the line is read as a row.
	base := strings.TrimSuffix(validLine, "INV-1")
	atLimit := base + strings.Repeat("r", MaxLineLength-len(base))
	got := parseString(t, atLimit+"\r\n"+atLimit+"r\n")
	if len(got) != 2 {
		t.Fatalf("%d rows", len(got))
	}
	if e := got[0].errs; len(e) != 1 || e[0].Code != codes.InvalidReference {
		t.Errorf("line of %d bytes: %v, want only the reference error", MaxLineLength, e)
	}
	if e := got[1].errs; len(e) != 1 || e[0].Field != FieldRow || !strings.Contains(e[0].Detail, "4096") {
		t.Errorf("line of %d bytes: %v, want a line-length error", MaxLineLength+1, e)
	}
}

func TestReaderTrimsAndNormalises(t *testing.T) {
	line := "  Jane Doe\t; 4111 1111 1111 1111 ;12/30; 123 ;jane@example.com;4155550100;1 Main St;Springfield;IL;62701; us ;  10.50 ; usd ; INV 1  "
	got := parseString(t, line)
	if len(got) != 1 || got[0].errs != nil {
		t.Fatalf("%+v", got)
	}
	r := got[0].row
	if r.HolderName != "Jane Doe" || r.CardNumber != "4111 1111 1111 1111" || r.CVV != "123" ||
		r.Country != "US" || r.Unit != "USD" || r.ReferenceID != "INV 1" || r.Amount.String() != "10.5" {
		t.Errorf("row not trimmed/normalised: %q %q %q %q %q %q", r.HolderName, r.CardNumber, r.Country, r.Unit, r.ReferenceID, r.Amount)
	}
}

func TestReaderBOMOnlyAtFileStart(t *testing.T) {
	// Only the first line of the file may start with a BOM; anywhere else
	// (a later line, or a reader resuming mid-file) it is content and is
	// kept, so resuming cannot change what a line contains.
	const bomRune = "\uFEFF"
	for _, c := range []struct {
		input     string
		startLine int
		row       int
	}{
		{validLine + "\n" + bomRune + validLine + "\n", 1, 1},
		{bomRune + validLine + "\n", 7, 0},
	} {
		got := readAll(t, NewReader(strings.NewReader(c.input), c.startLine, testOptions()...))
		if len(got) <= c.row || !strings.HasPrefix(got[c.row].row.HolderName, bomRune) {
			t.Errorf("start %d: BOM not kept as content", c.startLine)
		}
		if got[0].line != c.startLine {
			t.Errorf("first line %d, want %d", got[0].line, c.startLine)
		}
	}
}

func TestReaderReadErrors(t *testing.T) {
	boom := errors.New("connection reset")
	input := validLine + "\n" + validLine[:20]
	r := NewReader(io.MultiReader(strings.NewReader(input), iotest.ErrReader(boom)), 1, testOptions()...)
	if line, _, errs, err := r.Next(); line != 1 || errs != nil || err != nil {
		t.Fatalf("first row: %d %v %v", line, errs, err)
	}
	if _, _, _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the read error", err)
	}
	if _, _, _, err := r.Next(); !errors.Is(err, boom) {
		t.Errorf("error is not sticky: %v", err)
	}
	// The cut line was not consumed: a retry resumes at its start.
	if r.Offset() != int64(len(validLine)+1) || r.NextLine() != 2 {
		t.Errorf("offset %d line %d after a failed read", r.Offset(), r.NextLine())
	}

	// One byte at a time and timeouts in between change nothing.
	slow := NewReader(iotest.OneByteReader(strings.NewReader(validLine+"\r\n"+validLine)), 1, testOptions()...)
	if got := readAll(t, slow); len(got) != 2 || got[1].errs != nil {
		t.Errorf("one-byte reader: %+v", got)
	}
}

func TestAmount(t *testing.T) {
	base := strings.TrimSuffix(validLine, ";10.50;USD;INV-1")
	cases := []struct {
		amount, unit string
		ok           bool
	}{
		{"10.50", "USD", true},
		{"10", "USD", true},
		{"+10.5", "USD", true},
		{"0.01", "EUR", true},
		{"10.500", "EUR", true}, // trailing zeros do not add precision
		{"100", "JPY", true},
		{"100.0", "JPY", true},
		{"0.12345678", "BTC", true},
		{"1.234", "KWD", true},
		{"0", "USD", false},
		{"0.00", "USD", false},
		{"-5", "USD", false},
		{"10.505", "EUR", false},
		{"100.5", "JPY", false},
		{"0.123456789", "BTC", false},
		{"1e3", "USD", false},
		{"1E3", "USD", false},
		{"10,50", "EUR", false},
		{"1 000", "EUR", false},
		{"1,000.00", "USD", false},
		{".5", "USD", false},
		{"5.", "USD", false},
		{"--5", "USD", false},
		{"+-5", "USD", false},
		{"0x10", "USD", false},
		{"NaN", "USD", false},
		{"Infinity", "USD", false},
		{"", "USD", false},
		{"١٠", "USD", false}, // Arabic-Indic digits
	}
	for _, c := range cases {
		got := parseString(t, base+";"+c.amount+";"+c.unit)
		if len(got) != 1 {
			t.Fatalf("%q: %d rows", c.amount, len(got))
		}
		errs := got[0].errs
		if c.ok && errs != nil {
			t.Errorf("%s %s: unexpected %v", c.amount, c.unit, errs)
		}
		if !c.ok && (len(errs) != 1 || errs[0].Field != FieldAmount || errs[0].Code != codes.InvalidAmount) {
			t.Errorf("%s %s: errors %v, want one 026 on amount", c.amount, c.unit, errs)
		}
	}
}

func TestValidateCodes(t *testing.T) {
	fields := strings.Split(validLine, ";")
	with := func(pos int, value string) string {
		f := append([]string(nil), fields...)
		f[pos-1] = value
		return strings.Join(f, ";")
	}
	cases := []struct {
		name  string
		line  string
		field string
		code  codes.Code
	}{
		{"holder missing", with(1, ""), "holderName", codes.InvalidName},
		{"holder too long", with(1, strings.Repeat("é", 101)), "holderName", codes.InvalidName},
		{"holder control char", with(1, "Jane\x01Doe"), "holderName", codes.InvalidName},
		{"card missing", with(2, ""), "number", codes.InvalidCardNumber},
		{"card Luhn", with(2, "4111 1111 1111 1112"), "number", codes.InvalidCardNumber},
		{"card letters", with(2, "4111 1111 1111 111a"), "number", codes.InvalidCardNumber},
		{"card too short", with(2, "4242"), "number", codes.InvalidCardNumber},
		{"expiry format", with(3, "2030-12"), "expiry", codes.InvalidCardExpiration},
		{"expiry month", with(3, "13/30"), "expiry", codes.InvalidCardExpiration},
		{"expired", with(3, "12/25"), "expiry", codes.InvalidCardExpiration},
		{"cvv missing", with(4, ""), "cvc", codes.InvalidCardCVV},
		{"cvv too short", with(4, "12"), "cvc", codes.InvalidCardCVV},
		{"cvv 4 digits on visa", with(4, "1234"), "cvc", codes.InvalidCardCVV},
		{"email", with(5, "jane@"), "email", codes.InvalidEmail},
		{"email missing", with(5, ""), "email", codes.InvalidEmail},
		{"phone letters", with(6, "415-555-0100"), "phoneNumber", codes.InvalidPhone},
		{"phone short", with(6, "123456789"), "phoneNumber", codes.InvalidPhone},
		{"phone long", with(6, "123456789012345"), "phoneNumber", codes.InvalidPhone},
		{"address missing", with(7, ""), "address", codes.InvalidAddress},
		{"address too long", with(7, strings.Repeat("a", 101)), "address", codes.InvalidAddress},
		{"city too long", with(8, strings.Repeat("c", 51)), "city", codes.InvalidCity},
		{"city missing", with(8, ""), "city", codes.InvalidCity},
		{"state missing", with(9, ""), "state", codes.InvalidState},
		{"postal code too long", with(10, "12345678901"), "postalCode", codes.InvalidPostalCode},
		{"postal code missing", with(10, ""), "postalCode", codes.InvalidPostalCode},
		{"country unknown", with(11, "XX"), "country", codes.InvalidCountry},
		{"country alpha-3", with(11, "USA"), "country", codes.InvalidCountry},
		{"unit unknown", with(13, "ABC"), "unit", codes.InvalidCurrency},
		{"unit missing", with(13, ""), "unit", codes.InvalidCurrency},
		{"reference too long", with(14, strings.Repeat("r", 101)), "referenceId", codes.InvalidReference},
		{"reference not printable", with(14, "INV\x7f1"), "referenceId", codes.InvalidReference},
		{"reference invalid UTF-8", with(14, "INV\xff"), "referenceId", codes.InvalidReference},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parseString(t, c.line)
			if len(got) != 1 {
				t.Fatalf("%d rows", len(got))
			}
			errs := got[0].errs
			if len(errs) != 1 || errs[0].Field != c.field || errs[0].Code != c.code || errs[0].Detail == "" {
				t.Fatalf("errors %v, want exactly one %s on %s", errs, c.code, c.field)
			}
			for _, secret := range []string{"4111", "123;"} {
				if strings.Contains(errs[0].Detail, secret) {
					t.Errorf("detail %q echoes card data", errs[0].Detail)
				}
			}
		})
	}

	ok := map[string]string{
		"amex with 4-digit CVV":  with(2, "3782 822463 10005") + "", // CVV replaced below
		"crypto unit":            with(13, "BTC"),
		"lower-case unit":        with(13, "eur"),
		"empty reference":        with(14, ""),
		"state code":             with(9, "NSW"),
		"expiry this month":      with(3, "01/26"),
		"card with dashes":       with(2, "4111-1111-1111-1111"),
		"unicode holder":         with(1, "Zoë Ångström-Łukasz"),
		"postal code with space": with(10, "SW1A 1AA"),
	}
	ok["amex with 4-digit CVV"] = strings.Replace(ok["amex with 4-digit CVV"], ";123;", ";1234;", 1)
	for name, line := range ok {
		if got := parseString(t, line); len(got) != 1 || got[0].errs != nil {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

func TestValidateReportsEveryFieldInOrder(t *testing.T) {
	line := ";1234;99/99;1;x;1;;;;;X;0;ZZZ;\x01"
	got := parseString(t, line)
	if len(got) != 1 {
		t.Fatal(len(got))
	}
	var fields []string
	for _, e := range got[0].errs {
		fields = append(fields, e.Field)
	}
	want := "holderName number expiry cvc email phoneNumber address city state postalCode country amount unit referenceId"
	if strings.Join(fields, " ") != want {
		t.Errorf("fields %v\nwant   %s", fields, want)
	}
}

func TestValidateWithoutCurrencies(t *testing.T) {
	row := parseString(t, validLine)[0].row
	errs := Validate(row, testNow, nil)
	if len(errs) != 1 || errs[0].Code != codes.InvalidCurrency {
		t.Errorf("without a lookup every unit is refused: %v", errs)
	}
}

// A processor may stop after any row (time budget) and continue later with a
// new Reader over the rest of the object: the result must be exactly that of
// reading the file in one go, for every possible stopping point.
func TestResumeAtEveryLineBoundary(t *testing.T) {
	input := "\xEF\xBB\xBF" + validLine + "\r\n" +
		"\n" + // empty line: rejected
		strings.Repeat("z", MaxLineLength+10) + "\n" + // too long: rejected
		strings.TrimSuffix(validLine, ";INV-1") + "\r\n" +
		"a;b;c\n" +
		strings.Replace(validLine, "10.50", "1e3", 1) + "\n" +
		validLine + "\n" +
		"\r\n" + // trailing empty line
		""
	whole := readAll(t, NewReader(strings.NewReader(input), 1, testOptions()...))
	if len(whole) != 7 {
		t.Fatalf("whole file: %d rows, want 7", len(whole))
	}
	for stop := 0; stop <= len(whole); stop++ {
		first := NewReader(strings.NewReader(input), 1, testOptions()...)
		var got []entry
		for range stop {
			line, row, errs, err := first.Next()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, entry{line, row, errs, first.Offset()})
		}
		off := first.Offset()
		rest := NewReader(strings.NewReader(input[off:]), first.NextLine(), append(testOptions(), WithStartOffset(off))...)
		got = append(got, readAll(t, rest)...)
		if rest.Offset() != int64(len(input)) {
			t.Errorf("stop %d: final offset %d, want %d", stop, rest.Offset(), len(input))
		}
		if len(got) != len(whole) {
			t.Fatalf("stop %d: %d rows, want %d", stop, len(got), len(whole))
		}
		for i := range whole {
			w, g := whole[i], got[i]
			if g.line != w.line || g.offset != w.offset || !sameRow(g.row, w.row) || !slices.Equal(g.errs, w.errs) {
				t.Errorf("stop %d, row %d: got line %d off %d errs %v; want line %d off %d errs %v",
					stop, i, g.line, g.offset, g.errs, w.line, w.offset, w.errs)
			}
		}
	}
}

func TestRowNeverRevealsCardData(t *testing.T) {
	const cvv = "Zq9x" // invalid, but a row with value errors is still returned whole
	row := parseString(t, strings.Replace(validLine, ";123;", ";"+cvv+";", 1))[0].row
	if row.CVV != cvv {
		t.Fatalf("CVV %q", row.CVV)
	}
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x"} {
		out.WriteString(fmt.Sprintf(verb, row))
		out.WriteString(fmt.Sprintf(verb, &row))
		out.WriteString(fmt.Sprintf(verb, []Row{row}))
		out.WriteString(fmt.Sprintf(verb, struct{ R Row }{row}))
	}
	slog.New(slog.NewJSONHandler(&out, nil)).Info("row", "row", row, "rows", []Row{row})
	slog.New(slog.NewTextHandler(&out, nil)).Info("row", "row", row)
	js, err := json.Marshal(struct{ Row Row }{row})
	if err != nil {
		t.Fatal(err)
	}
	out.Write(js)
	s := out.String()
	for _, secret := range []string{"4111 1111 1111 1111", "4111111111111111", cvv, "Jane", "jane@"} {
		if strings.Contains(s, secret) {
			t.Errorf("output reveals %q:\n%s", secret, s)
		}
	}
	for _, shown := range []string{"INV-1", "10.5", "USD", "411111******1111", `"last4":"1111"`} {
		if !strings.Contains(s, shown) {
			t.Errorf("output lacks %q:\n%s", shown, s)
		}
	}
	// A short, mistyped number is not shown even in part.
	if s := (Row{CardNumber: "4111 1111 11"}).String(); strings.Contains(s, "1111") {
		t.Errorf("short number shown: %s", s)
	}
}
