package paycore

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
	a, err := tmpl.Alarm("UnboundProviderResultsAlarm")
	if err != nil {
		t.Fatal(err)
	}
	if a.Namespace != emf.Namespace || a.MetricName != MetricUnbound || a.Threshold != 1 ||
		a.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(a.Dimensions) != 0 {
		t.Fatalf("alarm %+v", a)
	}
}

func TestTemplateAlarmWatchesLateCharges(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	a, err := tmpl.Alarm("LateChargesVoidedAlarm")
	if err != nil {
		t.Fatal(err)
	}
	if a.Namespace != emf.Namespace || a.MetricName != MetricLateVoided || a.Threshold != 1 ||
		a.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(a.Dimensions) != 0 {
		t.Fatalf("alarm %+v", a)
	}
}
