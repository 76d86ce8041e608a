package audit

import (
	"testing"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/emf"
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
	if a.Namespace != emf.Namespace || a.MetricName != MetricViolations || a.Threshold != 1 ||
		a.ComparisonOperator != "GreaterThanOrEqualToThreshold" || len(a.Dimensions) != 0 {
		t.Fatalf("alarm %+v", a)
	}
}

// Every metric the scheduled run publishes that an alarm watches treats
// missing data as breaching (an audit that stopped is not a clean one), and
// every scheduled function has an invocation heartbeat alarm.
func TestTemplateAuditAlarmsNeverGoQuiet(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	watched := map[string]bool{}
	for _, r := range tmpl.OfType("AWS::CloudWatch::Alarm") {
		ns := cfn.Path(r.Properties, "Namespace")
		name := cfn.Path(r.Properties, "MetricName")
		if ns == nil || name == nil || ns.Value != emf.Namespace {
			continue
		}
		for _, m := range ScheduledMetrics {
			if name.Value == m {
				watched[m] = true
				if tmd := cfn.Path(r.Properties, "TreatMissingData"); tmd == nil || tmd.Value != "breaching" {
					t.Errorf("%s watches %s, published by a scheduled run, without TreatMissingData: breaching", r.LogicalID, m)
				}
			}
		}
	}
	for _, m := range []string{MetricViolations, MetricUncheckedAge, MetricPassLate} {
		if !watched[m] {
			t.Errorf("no alarm on %s", m)
		}
	}
	for _, name := range []string{"AuditHeartbeatAlarm", "ReconcilerHeartbeatAlarm", "BatchHeartbeatAlarm"} {
		r, ok := tmpl.Resources[name]
		if !ok || cfn.Path(r.Properties, "MetricName").Value != "Invocations" || cfn.Path(r.Properties, "TreatMissingData").Value != "breaching" {
			t.Errorf("%s: missing or not an invocation heartbeat breaching on missing data", name)
		}
	}
}

// The audited tables keep their records for a bounded time: TTL on
// expiresAt (the attribute the store writes), and a stream that brings
// TTL deletions to the archive.
func TestTemplateTablesExpireAndStream(t *testing.T) {
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TransactionsTable", "PaymentRequestsTable", "OperationsTable"} {
		r, ok := tmpl.Resources[name]
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if a, e := cfn.Path(r.Properties, "TimeToLiveSpecification", "AttributeName"), cfn.Path(r.Properties, "TimeToLiveSpecification", "Enabled"); a == nil || a.Value != "expiresAt" || e == nil || e.Value != "true" {
			t.Errorf("%s: no TTL on expiresAt", name)
		}
		if v := cfn.Path(r.Properties, "StreamSpecification", "StreamViewType"); v == nil || v.Value != "NEW_AND_OLD_IMAGES" {
			t.Errorf("%s: no stream with both images", name)
		}
	}
}
