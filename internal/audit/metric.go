package audit

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/payreq/payreq/internal/emf"
)

// The reconciler publishes the violation count as a CloudWatch metric with
// the embedded metric format: one JSON log line carrying an "_aws" key,
// which CloudWatch Logs turns into a metric, so publishing costs no API
// call and no permission. template.yaml alarms on it (AuditViolationsAlarm).
const (
	MetricNamespace = emf.Namespace
	MetricName      = "AuditViolations"
)

// MetricLine returns the embedded-metric-format log line for r (no
// dimensions: one series for the whole service), plus the violated
// invariants' names so the log line alone tells what to look at.
func MetricLine(r Report) ([]byte, error) {
	names := []string{}
	seen := map[string]bool{}
	for _, v := range r.Violations {
		if !seen[v.Invariant] {
			seen[v.Invariant] = true
			names = append(names, v.Invariant)
		}
	}
	line := map[string]any{
		"_aws":       emf.Directive(MetricName, r.CheckedAt),
		MetricName:   len(r.Violations),
		"invariants": names,
		"message":    "audit finished",
	}
	b, err := json.Marshal(line)
	if err != nil {
		return nil, fmt.Errorf("marshal audit metric: %w", err)
	}
	return b, nil
}

// PublishMetric writes r's metric line to w (the function's stdout, which
// Lambda forwards to CloudWatch Logs), newline-terminated.
func PublishMetric(w io.Writer, r Report) error {
	b, err := MetricLine(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
