package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
)

// The overview (the dashboard's home) reads the merchant's aggregates, kept
// as payments settle (internal/dynamo overview.go), never the payments: a
// view is one Query of at most 30 days × currencies small items, however
// many payments the period had.

// OverviewSource reads the aggregates (internal/dynamo, wired in internal/wire).
type OverviewSource interface {
	// Buckets are the merchant's hours (hourly) or days from..to, every currency.
	Buckets(ctx context.Context, merchantID string, from, to time.Time, hourly bool) ([]payment.OverviewBucket, error)
	// NotificationProblems counts the merchant's notifications whose
	// delivery is failing (retries scheduled) and those parked in the DLQ.
	NotificationProblems(ctx context.Context, merchantID string) (failing, dlq int, err error)
}

// DisputeSource lists a merchant's disputes (open, and closed within 180
// days); an OverviewSource that has it shows the open ones with their
// evidence deadline and counts them.
type DisputeSource interface {
	Disputes(ctx context.Context, merchantID string, now time.Time) ([]payment.DisputeEntry, error)
}

// Periods of the overview.
var periods = []struct{ key, label string }{{"today", "Today"}, {"7d", "7 days"}, {"30d", "30 days"}}

// slot is one bar of the volume chart.
type slot struct {
	Label  string // "14:00", "11-26"
	Title  string // the full hour or day
	Volume decimal.Decimal
	Count  int64
}

type codeCount struct {
	Code    string
	Meaning string
	Count   int64
}

type methodRow struct {
	Method string
	payment.OverviewMethod
}

// connectorRow is one connector's settled attempts in the period.
type connectorRow struct {
	Connector string
	payment.OverviewConnector
	RatePermille int64 // approval rate in tenths of a percent; -1: no attempt
}

// overviewData is what the page shows for one period and currency.
type overviewData struct {
	Period, Unit string
	Units        []string
	From, To     time.Time
	Gross        decimal.Decimal
	Approved     int64
	Declined     int64
	RatePermille int64 // approval rate in tenths of a percent; -1: no attempt
	Refunds      int64
	RefundVolume decimal.Decimal
	Slots        []slot
	Declines     []codeCount
	Methods      []methodRow
	Connectors   []connectorRow
	NotifyFail   int
	NotifyDLQ    int
	Running      []Batch
	// Disputes are the open ones, the nearest evidence deadline first;
	// Disputes nil with DisputesShown false: no dispute source.
	Disputes      []payment.DisputeEntry
	DisputesShown bool
}

// window is the period's first and last bucket and whether they are hours.
func window(period string, now time.Time) (from, to time.Time, hourly bool) {
	day := now.UTC().Truncate(24 * time.Hour)
	switch period {
	case "7d":
		return day.AddDate(0, 0, -6), day, false
	case "30d":
		return day.AddDate(0, 0, -29), day, false
	}
	return day, now.UTC().Truncate(time.Hour), true
}

// summarize folds the buckets of one currency into the page's numbers.
func summarize(bs []payment.OverviewBucket, period, unit string, from, to time.Time, hourly bool) overviewData {
	d := overviewData{Period: period, Unit: unit, From: from, To: to, RatePermille: -1}
	step, label, title := 24*time.Hour, "01-02", "2006-01-02"
	if hourly {
		step, label, title = time.Hour, "15:00", "2006-01-02 15:00 UTC"
	}
	index := map[time.Time]int{}
	for t := from; !t.After(to); t = t.Add(step) {
		index[t] = len(d.Slots)
		d.Slots = append(d.Slots, slot{Label: t.Format(label), Title: t.Format(title)})
	}
	declines := map[string]int64{}
	methods := map[string]payment.OverviewMethod{}
	conns := map[string]payment.OverviewConnector{}
	volumes := map[string]decimal.Decimal{}
	for _, b := range bs {
		volumes[b.Unit] = volumes[b.Unit].Add(b.Volume)
		if !slices.Contains(d.Units, b.Unit) {
			d.Units = append(d.Units, b.Unit)
		}
		if b.Unit != unit {
			continue
		}
		d.Gross = d.Gross.Add(b.Volume)
		d.Approved += b.Approved
		d.Declined += b.Declined
		d.Refunds += b.Refunds
		d.RefundVolume = d.RefundVolume.Add(b.RefundVolume)
		if i, ok := index[b.Start.UTC()]; ok {
			d.Slots[i].Volume = d.Slots[i].Volume.Add(b.Volume)
			d.Slots[i].Count += b.Approved
		}
		for c, n := range b.Declines {
			declines[c] += n
		}
		for m, p := range b.Methods {
			q := methods[m]
			methods[m] = payment.OverviewMethod{Count: q.Count + p.Count, Volume: q.Volume.Add(p.Volume)}
		}
		for c, p := range b.Connectors {
			q := conns[c]
			conns[c] = payment.OverviewConnector{Approved: q.Approved + p.Approved, Declined: q.Declined + p.Declined, Volume: q.Volume.Add(p.Volume)}
		}
	}
	// Currencies by volume, then code: the first is the default.
	slices.SortFunc(d.Units, func(a, b string) int {
		if c := volumes[b].Cmp(volumes[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if n := d.Approved + d.Declined; n > 0 {
		d.RatePermille = (d.Approved*1000 + n/2) / n
	}
	for c, n := range declines {
		meaning := codes.Code(c).Message()
		if meaning == "" {
			meaning = "No code"
		}
		d.Declines = append(d.Declines, codeCount{Code: c, Meaning: meaning, Count: n})
	}
	slices.SortFunc(d.Declines, func(a, b codeCount) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Code, b.Code)
	})
	for m, p := range methods {
		d.Methods = append(d.Methods, methodRow{Method: m, OverviewMethod: p})
	}
	slices.SortFunc(d.Methods, func(a, b methodRow) int {
		if c := b.Volume.Cmp(a.Volume); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	for c, p := range conns {
		row := connectorRow{Connector: c, OverviewConnector: p, RatePermille: -1}
		if n := p.Approved + p.Declined; n > 0 {
			row.RatePermille = (p.Approved*1000 + n/2) / n
		}
		d.Connectors = append(d.Connectors, row)
	}
	slices.SortFunc(d.Connectors, func(a, b connectorRow) int {
		if c := b.Volume.Cmp(a.Volume); c != 0 {
			return c
		}
		return strings.Compare(a.Connector, b.Connector)
	})
	return d
}

// pickUnit is the currency asked for when the period has it or it is a
// known code, else the period's largest.
func pickUnit(asked string, bs []payment.OverviewBucket) string {
	vol := map[string]decimal.Decimal{}
	for _, b := range bs {
		vol[b.Unit] = vol[b.Unit].Add(b.Volume)
	}
	if _, ok := vol[asked]; ok {
		return asked
	}
	if _, ok := currency.Lookup(asked); ok {
		return asked
	}
	best := ""
	for u, v := range vol {
		if best == "" || v.Cmp(vol[best]) > 0 || v.Equal(vol[best]) && u < best {
			best = u
		}
	}
	if best == "" {
		return "EUR"
	}
	return best
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	if h.Overview == nil {
		return refuse(errkind.NotFound, "The overview is not configured.")
	}
	q := r.URL.Query()
	period := q.Get("period")
	if period == "" {
		period = "today"
	}
	if !slices.ContainsFunc(periods, func(p struct{ key, label string }) bool { return p.key == period }) {
		return refuse(errkind.Invalid, "Unknown period.")
	}
	unit := strings.ToUpper(strings.TrimSpace(q.Get("unit")))
	if unit != "" {
		if _, ok := currency.Lookup(unit); !ok {
			return refuse(errkind.Invalid, "Unknown currency.")
		}
	}
	from, to, hourly := window(period, h.Now())
	ctx := r.Context()
	bs, err := h.Overview.Buckets(ctx, s.MerchantID, from, to, hourly)
	if err != nil {
		return err
	}
	unit = pickUnit(unit, bs)
	d := summarize(bs, period, unit, from, to, hourly)
	if !slices.Contains(d.Units, unit) {
		d.Units = append(d.Units, unit)
	}
	if d.NotifyFail, d.NotifyDLQ, err = h.Overview.NotificationProblems(ctx, s.MerchantID); err != nil {
		return err
	}
	if ds, ok := h.Overview.(DisputeSource); ok {
		all, err := ds.Disputes(ctx, s.MerchantID, h.Now())
		if err != nil {
			return err
		}
		d.DisputesShown = true
		for _, e := range all {
			if payment.DisputeOpen(e.Status) {
				d.Disputes = append(d.Disputes, e)
			}
		}
		slices.SortFunc(d.Disputes, func(a, b payment.DisputeEntry) int {
			switch {
			case a.EvidenceDueBy.IsZero() != b.EvidenceDueBy.IsZero():
				if a.EvidenceDueBy.IsZero() {
					return 1
				}
				return -1
			case a.EvidenceDueBy.Before(b.EvidenceDueBy):
				return -1
			case b.EvidenceDueBy.Before(a.EvidenceDueBy):
				return 1
			}
			return int(a.TransactionID - b.TransactionID)
		})
	}
	batches, err := h.Ops.Batches(ctx, s.MerchantID)
	if err != nil {
		return err
	}
	for _, b := range batches {
		if b.Running() {
			d.Running = append(d.Running, b)
		}
	}
	h.render(w, r, http.StatusOK, "overview", s, map[string]any{"O": d})
	return nil
}
