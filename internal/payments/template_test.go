package payments

import (
	"testing"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/emf"
)

// The alarm in template.yaml watches the metric bind publishes.
func TestTemplateAlarmWatchesUnboundResults(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := tmpl.Resources["UnboundProviderResultsAlarm"]
	if !ok || res.Type != "AWS::CloudWatch::Alarm" {
		t.Fatalf("UnboundProviderResultsAlarm missing or not an alarm: %+v", res)
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
	if p.Namespace != emf.Namespace || p.MetricName != MetricUnbound || p.Threshold != 1 ||
		p.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(p.Dimensions) != 0 {
		t.Fatalf("alarm %+v", p)
	}
}
