package audit

import (
	"testing"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
)

// The alarm in template.yaml watches the metric MetricLine publishes.
func TestTemplateAlarmWatchesTheAuditMetric(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	a, err := tmpl.Alarm("AuditViolationsAlarm")
	if err != nil {
		t.Fatal(err)
	}
	if a.Namespace != MetricNamespace || a.MetricName != MetricViolations || a.Threshold != 1 ||
		a.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(a.Dimensions) != 0 {
		t.Fatalf("alarm %+v", a)
	}
}
