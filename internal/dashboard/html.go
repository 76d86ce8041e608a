package dashboard

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/currency"
)

// Pages are written in Go with this small writer rather than html/template:
// text/template's reflection (MethodByName on arbitrary values) makes the
// linker keep every exported method of every reachable type, which doubled
// the Lambda binary past its size budget. The rule that keeps it safe: markup
// comes only from format-string literals in this package, and every value is
// escaped (html.EscapeString escapes < > & ' "), and attribute values are
// always double-quoted.
type pw struct{ b strings.Builder }

// f writes format with every argument escaped.
func (p *pw) f(format string, args ...any) {
	esc := make([]any, len(args))
	for i, a := range args {
		esc[i] = html.EscapeString(fmt.Sprint(a))
	}
	fmt.Fprintf(&p.b, format, esc...)
}

// raw writes trusted markup: a literal of this package only.
func (p *pw) raw(s string) { p.b.WriteString(s) }

// csrf writes the hidden CSRF field of a form.
func (p *pw) csrf(token string) { p.f(`<input type="hidden" name="csrf" value="%s">`, token) }

// attrIf returns s when cond holds (a literal attribute such as " checked").
func attrIf(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// money shows an amount with its currency's decimals ("12.50 EUR").
func money(d decimal.Decimal, unit string) string {
	if n, ok := currency.Decimals(unit); ok && d.Exponent() > -n {
		return d.StringFixed(n) + " " + unit
	}
	return d.String() + " " + unit
}
