package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/payreq/payreq/internal/emf"
)

// The audit's scheduled run publishes its metrics as CloudWatch's embedded
// metric format: one JSON log line carrying an "_aws" key, which CloudWatch
// Logs turns into metrics, so publishing costs no API call and no
// permission. Every run publishes every metric, 0 included: template.yaml
// treats a missing value as breaching, so an audit that stopped running
// alarms instead of reading as "no violations".
const (
	// MetricViolations is the number of violations kept (found and not
	// yet seen holding again): its alarm stays on while one is open.
	MetricViolations = "AuditViolations"
	// MetricUncheckedAge is how old, in seconds, the oldest change not
	// yet judged may be (RunStats.UncheckedAge).
	MetricUncheckedAge = "AuditUncheckedAge"
	// MetricPassAge is how old, in seconds, the full pass's assurance is
	// (Pass.Age): it grows past its period when the pass stalls.
	MetricPassAge = "AuditFullPassAge"
	// MetricPassLate is how many seconds the full pass's assurance is older
	// than its period plus a day's slack (0 while on time): its alarm is a
	// stalled pass.
	MetricPassLate = "AuditFullPassLate"
	// MetricPassProgress is how far the running full pass has got, in
	// percent (100 between passes).
	MetricPassProgress = "AuditFullPassProgress"
	// MetricJudged is how many due checks the run judged.
	MetricJudged = "AuditChecksJudged"
)

// ScheduledMetrics are the metrics the scheduled run publishes on every
// run (a template test holds their alarms to TreatMissingData: breaching).
var ScheduledMetrics = []string{MetricViolations, MetricUncheckedAge, MetricPassAge, MetricPassLate, MetricPassProgress, MetricJudged}

// RunMetrics are one run's values.
type RunMetrics struct {
	At             time.Time
	OpenViolations int
	UncheckedAge   time.Duration
	PassAge        time.Duration
	PassLate       time.Duration
	PassPercent    float64
	Judged         int
}

// Line is the embedded-metric-format log line of m (no dimensions: one
// series each for the whole service).
func (m RunMetrics) Line() ([]byte, error) {
	line := map[string]any{
		"_aws": emf.Directives(m.At, []emf.Metric{
			{Name: MetricViolations, Unit: "Count"}, {Name: MetricUncheckedAge, Unit: "Seconds"},
			{Name: MetricPassAge, Unit: "Seconds"}, {Name: MetricPassLate, Unit: "Seconds"}, {Name: MetricPassProgress, Unit: "Percent"},
			{Name: MetricJudged, Unit: "Count"}}),
		MetricViolations:   m.OpenViolations,
		MetricUncheckedAge: int64(m.UncheckedAge / time.Second),
		MetricPassAge:      int64(m.PassAge / time.Second),
		MetricPassLate:     int64(m.PassLate / time.Second),
		MetricPassProgress: m.PassPercent,
		MetricJudged:       m.Judged,
		"message":          "audit metrics",
	}
	b, err := json.Marshal(line)
	if err != nil {
		return nil, fmt.Errorf("marshal audit metrics: %w", err)
	}
	return b, nil
}

// Publish writes m's line to w (the function's stdout, which Lambda
// forwards to CloudWatch Logs), newline-terminated.
func (m RunMetrics) Publish(w io.Writer) error {
	b, err := m.Line()
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
