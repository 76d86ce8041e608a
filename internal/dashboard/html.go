package dashboard

import (
	"fmt"
	"html"
	"io"
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
type pw struct {
	b strings.Builder
	// base starts the addresses of a merchant's pages
	// (/dashboard/m/<merchantId>); see at.
	base string
}

// at is the address of the merchant's page rest ("/payments").
func (p *pw) at(rest string) string { return p.base + rest }

// markup is HTML that a function of this package built from literals and
// escaped values (money, the charts); f writes it as it is.
type markup string

// f writes format with every argument escaped (markup as built). Every
// argument is written through text, which escapes it whatever its verb, so
// a verb that does not fit the value's type never prints a %!verb slip; a
// number keeps its verb (%d, %.1f).
func (p *pw) f(format string, args ...any) {
	esc := make([]any, len(args))
	for i, a := range args {
		if m, ok := a.(markup); ok {
			esc[i] = string(m)
			continue
		}
		esc[i] = escArg{a}
	}
	fmt.Fprintf(&p.b, format, esc...)
}

// escArg is an argument of f: escaped text, or a number in its verb.
type escArg struct{ v any }

func (t escArg) Format(f fmt.State, verb rune) {
	switch t.v.(type) {
	case int, int32, int64, uint, uint32, uint64, float64:
		if verb != 's' && verb != 'v' {
			fmt.Fprintf(f, fmt.FormatString(f, verb), t.v)
			return
		}
	}
	_, _ = io.WriteString(f, html.EscapeString(fmt.Sprint(t.v)))
}

// lifetime says a duration in words: "24 hours", "15 minutes", "1 hour".
func lifetime(d time.Duration) string {
	n, unit := int64(d/time.Minute), "minute"
	if d >= time.Hour && d%time.Hour == 0 {
		n, unit = int64(d/time.Hour), "hour"
	}
	if d > 24*time.Hour && d%(24*time.Hour) == 0 {
		n, unit = int64(d/(24*time.Hour)), "day"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d %s", n, unit)
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

// amount is d as a plain decimal string with its currency's decimals
// ("12.50", "1500", "1.230"), whatever the scale it was stored with (a
// store may return 735.300000 for 735.3); more significant decimals than
// the currency's are kept.
func amount(d decimal.Decimal, unit string) string {
	if n, ok := currency.Decimals(unit); ok && d.Equal(d.Truncate(n)) {
		return d.StringFixed(n)
	}
	return d.String()
}

// moneyText is an amount in plain text ("12.50 EUR"): notices, audit log.
func moneyText(d decimal.Decimal, unit string) string { return amount(d, unit) + " " + unit }

// money is an amount as the pages show it: a <data> element whose text is
// "12.50 EUR" and whose value and data-unit let dashboard.js format it in
// the viewer's locale with the hosted page's own function (money() in
// web/checkout/checkout.js; TestDashboardFormatsMoneyLikeTheHostedPage ties
// the two): "12,50 €" for de-DE, "€12.50" for en-US.
func money(d decimal.Decimal, unit string) markup {
	a := amount(d, unit)
	return markup(`<data class="money" value="` + html.EscapeString(a) + `" data-unit="` + html.EscapeString(unit) + `">` +
		html.EscapeString(a+" "+unit) + `</data>`)
}
