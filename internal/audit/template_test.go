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
	res, ok := tmpl.Resources["AuditViolationsAlarm"]
	if !ok || res.Type != "AWS::CloudWatch::Alarm" {
		t.Fatalf("AuditViolationsAlarm missing or not an alarm: %+v", res)
	}
	var p struct {
		Namespace          string  `yaml:"Namespace"`
		MetricName         string  `yaml:"MetricName"`
		ComparisonOperator string  `yaml:"ComparisonOperator"`
		Threshold          float64 `yaml:"Threshold"`
		Dimensions         []any   `yaml:"Dimensions"`
	}
	if err := res.Properties.Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Namespace != MetricNamespace || p.MetricName != MetricName || p.Threshold != 1 ||
		p.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(p.Dimensions) != 0 {
		t.Fatalf("alarm %+v", p)
	}
}
