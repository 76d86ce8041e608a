package paycore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// TestBindRefusesAResultForAnotherCharge checks each rule of Bind: a
// provider result changes a transaction only with its acquirer object id,
// reference, payment request, amount and unit.
func TestBindRefusesAResultForAnotherCharge(t *testing.T) {
	tx := &payment.Transaction{ID: 7, PaymentRequestID: 70, Reference: "ptx_7", ProviderRef: "pi_mine",
		Amount: decimal.RequireFromString("100.00"), Unit: "EUR"}
	facts := func(edit func(*provider.ChargeFacts)) *provider.ChargeFacts {
		f := &provider.ChargeFacts{Reference: "ptx_7", PaymentRequestID: 70, Amount: decimal.RequireFromString("100"), Unit: "EUR"}
		if edit != nil {
			edit(f)
		}
		return f
	}
	noRef := *tx
	noRef.ProviderRef = ""
	for _, tc := range []struct {
		name  string
		tx    *payment.Transaction
		ref   string
		f     *provider.ChargeFacts
		event bool
		ok    bool
	}{
		{"event bound", tx, "pi_mine", facts(nil), true, true},
		{"event for another intent", tx, "pi_other", facts(nil), true, false},
		{"event before the id is stored", &noRef, "pi_mine", facts(nil), true, false},
		{"event without facts", tx, "pi_mine", nil, true, false},
		{"other reference", tx, "pi_mine", facts(func(f *provider.ChargeFacts) { f.Reference = "ptx_8" }), true, false},
		{"no payment request id", tx, "pi_mine", facts(func(f *provider.ChargeFacts) { f.PaymentRequestID = 0 }), true, false},
		{"other amount", tx, "pi_mine", facts(func(f *provider.ChargeFacts) { f.Amount = decimal.RequireFromString("0.50") }), true, false},
		{"other currency", tx, "pi_mine", facts(func(f *provider.ChargeFacts) { f.Unit = "USD" }), true, false},
		{"unknown currency", tx, "pi_mine", facts(func(f *provider.ChargeFacts) { f.Unit = "" }), true, false},
		{"lookup bound", tx, "pi_mine", facts(nil), false, true},
		{"lookup of another intent", tx, "pi_other", facts(nil), false, false},
		{"lookup after a crash lost the id", &noRef, "pi_mine", facts(nil), false, true},
		{"lookup after a crash, other amount", &noRef, "pi_mine", facts(func(f *provider.ChargeFacts) { f.Amount = decimal.RequireFromString("1") }), false, false},
		{"answer to the service's own call", tx, "pi_mine", nil, false, true},
	} {
		err := Bind(tc.tx, tc.ref, tc.f, tc.event)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnbound)) {
			t.Errorf("%s: %v, want bound %v", tc.name, err, tc.ok)
		}
	}
}

// TestRefusedResultIsLoggedAndCounted: a refusal is one JSON log line with
// its reason and the embedded-metric directive of UnboundProviderResults,
// the metric template.yaml's UnboundProviderResultsAlarm watches.
func TestRefusedResultIsLoggedAndCounted(t *testing.T) {
	var buf bytes.Buffer
	s := New(Deps{Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	tx := &payment.Transaction{ID: 7, PaymentRequestID: 70, Reference: "ptx_7", ProviderRef: "pi_mine",
		Amount: decimal.RequireFromString("100"), Unit: "EUR"}
	if err := s.bind(tx, "pi_other", &provider.ChargeFacts{Reference: "ptx_7", PaymentRequestID: 70,
		Amount: decimal.RequireFromString("0.5"), Unit: "USD"}, true, "event evt_1"); !errors.Is(err, ErrUnbound) {
		t.Fatalf("bind: %v", err)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	aws, _ := line["_aws"].(map[string]any)
	metrics, _ := aws["CloudWatchMetrics"].([]any)
	if len(metrics) != 1 || line[MetricUnbound] != 1.0 || line["transaction_id"] != 7.0 ||
		!strings.Contains(line["reason"].(string), "pi_other") {
		t.Fatalf("log line: %s", buf.String())
	}
	m := metrics[0].(map[string]any)
	if m["Namespace"] != "PayReq" || fmt.Sprint(m["Metrics"]) != "[map[Name:UnboundProviderResults Unit:Count]]" {
		t.Fatalf("metric directive: %v", m)
	}
	// A bound result logs nothing.
	buf.Reset()
	if err := s.bind(tx, "pi_mine", nil, false, "charge"); err != nil || buf.Len() != 0 {
		t.Fatalf("bound result: %v, logged %q", err, buf.String())
	}
}
