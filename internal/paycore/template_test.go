package paycore

import (
	"testing"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/emf"
)

// The alarm in template.yaml watches the metric bind publishes.
// Each alarm in template.yaml watches the metric the payments core
// publishes under its name, with no dimensions.
func TestTemplateAlarmsWatchTheMetrics(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	for alarm, metric := range map[string]string{"UnboundProviderResultsAlarm": MetricUnbound,
		"LateChargesVoidedAlarm": MetricLateVoided, "ConnectorCircuitOpenAlarm": MetricCircuitOpen} {
		a, err := tmpl.Alarm(alarm)
		if err != nil {
			t.Fatal(err)
		}
		if a.Namespace != emf.Namespace || a.MetricName != metric || a.Threshold != 1 ||
			a.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(a.Dimensions) != 0 {
			t.Fatalf("%s: %+v", alarm, a)
		}
	}
}
