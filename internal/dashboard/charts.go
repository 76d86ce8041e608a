package dashboard

import (
	"fmt"
	"html"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// Charts are server-side SVG: no script draws them and the CSP stays as it
// is (fills come from dashboard.css classes, never a style attribute). Each
// has a name (role="img" with its <title>) and the page shows the same
// numbers as a table next to it. Geometry is computed with decimals scaled
// to whole pixels; no amount passes through a float.

const (
	chartW = 720
	chartH = 220
	axisH  = 24 // room for the labels under the bars
	topPad = 28 // room for the maximum's label (drawn larger on a phone)
)

// esc escapes a value for markup.
func esc(v any) string { return html.EscapeString(fmt.Sprint(v)) }

// scale is v's share of max in px whole pixels (0 when max is zero).
func scale(v, max decimal.Decimal, px int64) int64 {
	if !max.IsPositive() || !v.IsPositive() {
		return 0
	}
	n := v.Mul(decimal.NewFromInt(px)).Div(max).Round(0).IntPart()
	if n < 1 {
		n = 1 // a non-zero value stays visible
	}
	return n
}

// volumeChart draws one bar per slot; every labelEvery-th slot is labelled.
func volumeChart(id, name string, slots []slot, unit string) markup {
	var b strings.Builder
	max := decimal.Zero
	for _, s := range slots {
		if s.Volume.Cmp(max) > 0 {
			max = s.Volume
		}
	}
	n := int64(len(slots))
	if n == 0 {
		n = 1
	}
	every := 1 + (len(slots)-1)/8
	fmt.Fprintf(&b, `<svg id="%s" class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title"><title id="%s-title">%s</title>`,
		esc(id), chartW, chartH, esc(id), esc(id), esc(name))
	plot := int64(chartH - axisH - topPad)
	base := int64(chartH - axisH)
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"></line>`, base, chartW, base)
	if max.IsPositive() {
		fmt.Fprintf(&b, `<line class="grid" x1="0" y1="%d" x2="%d" y2="%d"></line><text class="label" x="0" y="%d" data-amount="%s" data-unit="%s">%s</text>`,
			topPad, chartW, topPad, topPad-6, esc(amount(max, unit)), esc(unit), esc(amount(max, unit)+" "+unit))
	}
	w := int64(chartW) / n
	for i, s := range slots {
		x := int64(i) * w
		hgt := scale(s.Volume, max, plot)
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%d" height="%d"><title>%s: %s %s, %d payments</title></rect>`,
			x+w/8, base-hgt, max64(1, w-w/4), hgt, esc(s.Title), esc(amount(s.Volume, unit)), esc(unit), s.Count)
		if i%every == 0 {
			fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">%s</text>`, x+w/8, chartH-6, esc(s.Label))
		}
	}
	b.WriteString(`</svg>`)
	return markup(b.String())
}

// hbar is one bar of a bar list.
type hbar struct {
	label string
	value decimal.Decimal
	text  string // the value as shown at the bar's end
	unit  string // when the value is an amount: dashboard.js shows it in the viewer's locale
}

// barList draws horizontal bars, one a row, labelled.
func barList(id, name string, bars []hbar) markup {
	const rowH, labelW = 34, 300
	var b strings.Builder
	h := rowH*len(bars) + 4
	if len(bars) == 0 {
		h = rowH
	}
	max := decimal.Zero
	for _, r := range bars {
		if r.value.Cmp(max) > 0 {
			max = r.value
		}
	}
	fmt.Fprintf(&b, `<svg id="%s" class="chart bars" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title"><title id="%s-title">%s</title>`,
		esc(id), chartW, h, esc(id), esc(id), esc(name))
	for i, r := range bars {
		y := i*rowH + 4
		wd := scale(r.value, max, chartW-labelW-110)
		money := ""
		if r.unit != "" {
			money = ` data-amount="` + esc(amount(r.value, r.unit)) + `" data-unit="` + esc(r.unit) + `"`
		}
		fmt.Fprintf(&b, `<text class="label" x="0" y="%d">%s</text><rect class="bar" x="%d" y="%d" width="%d" height="%d"></rect><text class="label" x="%d" y="%d"%s>%s</text>`,
			y+20, esc(truncate(r.label, 38)), labelW, y+4, wd, rowH-12, labelW+int(wd)+8, y+20, money, esc(r.text))
	}
	if len(bars) == 0 {
		fmt.Fprintf(&b, `<text class="label" x="0" y="22">None in this period</text>`)
	}
	b.WriteString(`</svg>`)
	return markup(b.String())
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// permille shows a rate in tenths of a percent ("97.5 %").
func permille(p int64) string {
	if p < 0 {
		return "–"
	}
	return strconv.FormatInt(p/10, 10) + "." + strconv.FormatInt(p%10, 10) + " %"
}
