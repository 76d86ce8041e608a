package dashboard

import (
	"net/url"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

func overviewURL(p *pw, period, unit string) string {
	return p.at("/overview?" + url.Values{"period": {period}, "unit": {unit}}.Encode())
}

// count is a whole number the page's script shows in the viewer's locale.
func count(n int64) markup {
	v := strconv.FormatInt(n, 10)
	return markup(`<data class="count" value="` + v + `">` + v + `</data>`)
}

// methodLabel names a method as the attempts do (methodNames).
func methodLabel(m string) string {
	if l := methodNames[m]; l != "" {
		return l
	}
	return m
}

func viewOverview(p *pw, d map[string]any) {
	o := d["O"].(overviewData)
	p.raw(`<h1>Overview</h1><nav aria-label="Period" class="periods"><ul>`)
	for _, pr := range periods {
		if pr.key == o.Period {
			p.f(`<li><a href="%s" aria-current="true">%s</a></li>`, overviewURL(p, pr.key, o.Unit), pr.label)
		} else {
			p.f(`<li><a href="%s">%s</a></li>`, overviewURL(p, pr.key, o.Unit), pr.label)
		}
	}
	p.f(`</ul></nav><form method="get" action="%s" class="filters">`, p.at("/overview"))
	p.f(`<input type="hidden" name="period" value="%s"><div><label for="unit">Currency</label><select id="unit" name="unit">`, o.Period)
	for _, u := range o.Units {
		p.f(`<option value="%s"%s>%s</option>`, u, attrIf(u == o.Unit, " selected"), u)
	}
	p.raw(`</select></div><div><button type="submit" id="show">Show</button></div></form>`)
	span := o.From.Format("2006-01-02")
	if o.Period == "today" {
		span += " (UTC)"
	} else {
		span += " to " + o.To.Format("2006-01-02") + " (UTC days)"
	}
	p.f(`<p class="hint" id="span">%s, %s. Settled attempts; refunds by the day they completed.</p>`, span, o.Unit)

	p.f(`<ul class="kpis" id="kpis">
<li><span class="kpi-label">Gross volume</span><span class="kpi" id="kpi-gross">%s</span></li>
<li><span class="kpi-label">Payments</span><span class="kpi" id="kpi-count">%s</span></li>
<li><span class="kpi-label">Approval rate</span><span class="kpi" id="kpi-rate">%s</span><span class="hint">%s approved, %s declined</span></li>
<li><span class="kpi-label">Refunds</span><span class="kpi" id="kpi-refunds">%s</span><span class="hint" id="kpi-refund-volume">%s</span></li>
%s</ul>`, money(o.Gross, o.Unit), count(o.Approved), permille(o.RatePermille), count(o.Approved), count(o.Declined),
		count(o.Refunds), money(o.RefundVolume, o.Unit), disputeKPI(o))
	viewDisputes(p, o)

	// Volume over the period: chart and its table.
	p.raw(`<section aria-labelledby="h-volume"><h2 id="h-volume">Volume</h2>`)
	p.f(`<figure>%s</figure>`, volumeChart("volume-chart", "Approved volume per "+map[bool]string{true: "hour", false: "day"}[o.Period == "today"]+" in "+o.Unit, o.Slots, o.Unit))
	p.raw(`<details><summary>Volume as a table</summary><div class="scroll" tabindex="0" role="region" aria-label="Volume table"><table id="volume-table"><thead><tr><th scope="col">When</th><th scope="col">Payments</th><th scope="col">Volume</th></tr></thead><tbody>`)
	for _, s := range o.Slots {
		p.f(`<tr><td>%s</td><td>%s</td><td>%s</td></tr>`, s.Title, count(s.Count), money(s.Volume, o.Unit))
	}
	p.raw(`</tbody></table></div></details></section>`)

	// Declines by code.
	p.raw(`<section aria-labelledby="h-declines"><h2 id="h-declines">Declines by code</h2>`)
	var bars []hbar
	for _, c := range o.Declines {
		bars = append(bars, hbar{label: c.Code + " " + c.Meaning, value: decimal.NewFromInt(c.Count), text: strconv.FormatInt(c.Count, 10)})
	}
	p.f(`<figure>%s</figure>`, barList("declines-chart", "Declined attempts by code in "+o.Unit, bars))
	p.raw(`<div class="scroll" tabindex="0" role="region" aria-label="Declines table"><table id="declines"><thead><tr><th scope="col">Code</th><th scope="col">Meaning</th><th scope="col">Declines</th></tr></thead><tbody>`)
	for _, c := range o.Declines {
		p.f(`<tr><td><code>%s</code></td><td>%s</td><td>%s</td></tr>`, c.Code, c.Meaning, count(c.Count))
	}
	if len(o.Declines) == 0 {
		p.raw(`<tr><td colspan="3">No declined attempt in this period.</td></tr>`)
	}
	p.raw(`</tbody></table></div></section>`)

	// Split by method.
	p.raw(`<section aria-labelledby="h-methods"><h2 id="h-methods">By method</h2>`)
	bars = nil
	for _, m := range o.Methods {
		bars = append(bars, hbar{label: methodLabel(m.Method), value: m.Volume, text: amount(m.Volume, o.Unit) + " " + o.Unit, unit: o.Unit})
	}
	p.f(`<figure>%s</figure>`, barList("methods-chart", "Approved volume by method in "+o.Unit, bars))
	p.raw(`<div class="scroll" tabindex="0" role="region" aria-label="Methods table"><table id="methods"><thead><tr><th scope="col">Method</th><th scope="col">Payments</th><th scope="col">Volume</th></tr></thead><tbody>`)
	for _, m := range o.Methods {
		p.f(`<tr><td>%s</td><td>%s</td><td>%s</td></tr>`, methodLabel(m.Method), count(m.Count), money(m.Volume, o.Unit))
	}
	if len(o.Methods) == 0 {
		p.raw(`<tr><td colspan="3">No approved payment in this period.</td></tr>`)
	}
	p.raw(`</tbody></table></div></section>`)

	// Split by connector: the acquirer connection that charged.
	p.raw(`<section aria-labelledby="h-connectors"><h2 id="h-connectors">By connector</h2>`)
	p.raw(`<div class="scroll" tabindex="0" role="region" aria-label="Connectors table"><table id="connectors"><thead><tr><th scope="col">Connector</th><th scope="col">Approved</th><th scope="col">Declined</th><th scope="col">Approval rate</th><th scope="col">Volume</th></tr></thead><tbody>`)
	for _, c := range o.Connectors {
		p.f(`<tr><td class="connector">%s</td><td>%s</td><td>%s</td><td class="rate">%s</td><td class="volume">%s</td></tr>`,
			c.Connector, count(c.Approved), count(c.Declined), permille(c.RatePermille), money(c.Volume, o.Unit))
	}
	if len(o.Connectors) == 0 {
		p.raw(`<tr><td colspan="5">No settled payment in this period.</td></tr>`)
	}
	p.raw(`</tbody></table></div></section>`)

	// Notifications and batch files.
	p.f(`<section aria-labelledby="h-health" id="overview-live" data-live-refresh%s><h2 id="h-health">Notifications and batch files</h2><dl class="facts health">
<dt>Notifications failing (retries scheduled)</dt><dd id="notify-failing">%s</dd>
<dt>Notifications in the dead-letter queue</dt><dd id="notify-dlq">%s</dd>
<dt>Batch files in progress</dt><dd id="batches-running">%s</dd></dl>`, markup(attrIf(len(o.Running) > 0, ` data-running=""`)), count(int64(o.NotifyFail)), count(int64(o.NotifyDLQ)), count(int64(len(o.Running))))
	if o.NotifyDLQ > 0 {
		p.raw(`<p class="hint">Parked notifications go out again with <code>payctl dlq redrive</code> or <strong>Send the notification again</strong> on the payment's page.</p>`)
	}
	if len(o.Running) > 0 {
		p.raw(`<ul id="running-batches">`)
		for _, b := range o.Running {
			p.f(`<li><a href="%s">%s</a>: %s %s</li>`, p.at("/batches"), b.File, b.State, batchProgress(b))
		}
		p.raw(`</ul>`)
	}
	p.raw(`</section>`)
}

// disputeKPI is the overview's count of open disputes (all currencies).
func disputeKPI(o overviewData) markup {
	if !o.DisputesShown {
		return ""
	}
	return markup(`<li><span class="kpi-label">Open disputes</span><span class="kpi" id="kpi-disputes">` + string(count(int64(len(o.Disputes)))) + `</span><span class="hint">all currencies</span></li>`)
}

// viewDisputes lists the open disputes, the nearest evidence deadline
// first; the evidence is submitted in Stripe's Dashboard.
func viewDisputes(p *pw, o overviewData) {
	if !o.DisputesShown {
		return
	}
	p.raw(`<section aria-labelledby="h-disputes"><h2 id="h-disputes">Open disputes</h2>`)
	p.raw(`<p class="hint">A cardholder disputes a payment with their bank. Submit your evidence in Stripe's Dashboard before the deadline; the payment stays paid until the dispute is lost.</p>`)
	p.raw(`<div class="scroll" tabindex="0" role="region" aria-label="Open disputes table"><table id="disputes"><thead><tr><th scope="col">Evidence due</th><th scope="col">Payment</th><th scope="col">Amount</th><th scope="col">Reason</th><th scope="col">Status</th><th scope="col">Evidence</th></tr></thead><tbody>`)
	for _, e := range o.Disputes {
		due := "not asked"
		if !e.EvidenceDueBy.IsZero() {
			due = e.EvidenceDueBy.UTC().Format("2006-01-02 15:04") + " UTC"
		}
		d := payment.Dispute{ID: e.DisputeID, Live: e.Live}
		p.f(`<tr><td>%s</td><td><a href="/dashboard/payments/%d">%d</a></td><td>%s</td><td>%s</td><td>%s</td><td><a href="%s" rel="noopener noreferrer" target="_blank">Respond in Stripe</a></td></tr>`,
			due, e.PaymentRequestID, e.PaymentRequestID, money(e.Amount, e.Unit), e.Reason, e.Status, d.DashboardURL())
	}
	if len(o.Disputes) == 0 {
		p.raw(`<tr><td colspan="6">No open dispute.</td></tr>`)
	}
	p.raw(`</tbody></table></div></section>`)
}
