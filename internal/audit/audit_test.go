package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/payment"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const grace = 5 * time.Minute

var old = now.Add(-time.Hour)

// healthy is a consistent snapshot: request 1 paid by tx 11 (after a
// declined tx 10, its event delivered), request 2 unpaid with an open
// attempt inside its deadline, a finished and a running batch job.
func healthy() Data {
	return Data{
		Requests: []Request{
			{ID: 1, Status: payment.RequestPaid, TransactionID: 11, UpdatedAt: old},
			{ID: 2, Status: payment.RequestUnpaid, UpdatedAt: old},
		},
		Transactions: []Transaction{
			{ID: 10, PaymentRequestID: 1, Status: payment.TxDeclined, Reference: "ptx_10", CreatedAt: old, UpdatedAt: old},
			{ID: 11, PaymentRequestID: 1, Status: payment.TxApproved, Reference: "ptx_11", OutboxEventID: "evt_11_1", CreatedAt: old, UpdatedAt: old},
			{ID: 20, PaymentRequestID: 2, Status: payment.TxPending, Reference: "ptx_20", RecoverAfter: now.Add(time.Minute), CreatedAt: old, UpdatedAt: old},
		},
		Ledger: []LedgerEntry{
			{Reference: "ptx_10", Charge: true, UpdatedAt: old}, // declined charge: no money moved
			{Reference: "ptx_11", Charge: true, Approved: true, UpdatedAt: old},
			{Reference: "ptx_20", Charge: true, UpdatedAt: old},
			{Reference: "rfd_x", Approved: true, UpdatedAt: old}, // a refund, not a charge
		},
		Deliveries: []Delivery{{RequestID: 1, EventID: "evt_10_2"}},
		BatchJobs: []BatchJob{
			{MerchantID: "m", JobID: "file#a#1", State: "done", Finished: true, UpdatedAt: old},
			{MerchantID: "m", JobID: "file#b#1", State: "charging", LeaseUntil: now.Add(time.Minute), UpdatedAt: old},
		},
		SandboxAcquirer: true,
		LedgerRetention: 90 * 24 * time.Hour, DeliveryRetention: 30 * 24 * time.Hour,
	}
}

func only(t *testing.T, d Data, invariant string) Violation {
	t.Helper()
	r := Check(d, now, grace)
	if len(r.Violations) != 1 || r.Violations[0].Invariant != invariant {
		t.Fatalf("want exactly one %s violation, got %+v", invariant, r.Violations)
	}
	return r.Violations[0]
}

func TestHealthySnapshotHasNoViolation(t *testing.T) {
	r := Check(healthy(), now, grace)
	if !r.OK() {
		t.Fatalf("violations: %+v", r.Violations)
	}
	if r.Checked != (Counts{Requests: 2, Transactions: 3, LedgerEntries: 4, Deliveries: 1, BatchJobs: 2}) {
		t.Fatalf("counts %+v", r.Checked)
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"violations":[]`)) {
		t.Fatalf("violations must serialise as an empty list: %s", b)
	}
}

func TestSecondApprovedTransaction(t *testing.T) {
	d := healthy()
	d.Transactions[0].Status = payment.TxApproved // tx 10 approved too
	d.Ledger[0].Approved = true                   // with its charge
	d.Transactions[0].OutboxEventID = "evt_10_1"
	r := Check(d, now, grace)
	found := false
	for _, v := range r.Violations {
		if v.Invariant == OneApprovedPerRequest && v.PaymentRequestID == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no %s violation in %+v", OneApprovedPerRequest, r.Violations)
	}
}

func TestPaidRequestWithDeclinedTransaction(t *testing.T) {
	d := healthy()
	d.Requests[0].TransactionID = 10
	// tx 11 is now an approved transaction its request does not name, so
	// both directions fire.
	r := Check(d, now, grace)
	got := map[string]bool{}
	for _, v := range r.Violations {
		got[v.Invariant] = true
	}
	if !got[PaidRequestHasApprovedTx] || !got[ApprovedTxHasPaidRequest] || len(r.Violations) != 2 {
		t.Fatalf("violations %+v", r.Violations)
	}
}

func TestPaidRequestWithMissingTransaction(t *testing.T) {
	d := healthy()
	d.Requests = append(d.Requests, Request{ID: 3, Status: payment.RequestPaid, TransactionID: 99, UpdatedAt: old})
	only(t, d, PaidRequestHasApprovedTx)
	// The same within the grace period may be a payment the scans caught mid-way.
	d.Requests[2].UpdatedAt = now.Add(-time.Minute)
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("recent change judged: %+v", r.Violations)
	}
}

func TestPaidRequestWithOpenTransactionIsInFlight(t *testing.T) {
	d := healthy()
	d.Requests[1].Status, d.Requests[1].TransactionID = payment.RequestPaid, 20
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("violations: %+v", r.Violations)
	}
}

func TestApprovedTransactionOfUnpaidRequest(t *testing.T) {
	d := healthy()
	d.Requests[0].Status = payment.RequestUnpaid
	r := Check(d, now, grace)
	var v *Violation
	for i := range r.Violations {
		if r.Violations[i].Invariant == ApprovedTxHasPaidRequest {
			v = &r.Violations[i]
		}
	}
	if v == nil || v.TransactionID != 11 {
		t.Fatalf("violations %+v", r.Violations)
	}
}

func TestFinalTransactionWithoutNotificationRecord(t *testing.T) {
	d := healthy()
	d.Deliveries = nil // tx 10's event never recorded, and its outbox is empty
	v := only(t, d, FinalTxNotified)
	if v.TransactionID != 10 {
		t.Fatalf("violation %+v", v)
	}
	// A delivery of another event of the request does not count.
	d.Deliveries = []Delivery{{RequestID: 1, EventID: "evt_11_1"}}
	only(t, d, FinalTxNotified)
	// Settled within the grace period: the notifier may hold the event.
	d.Transactions[0].UpdatedAt = now.Add(-time.Minute)
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("violations: %+v", r.Violations)
	}
}

func TestEventIDMatchesThePaymentPath(t *testing.T) {
	if got := EventID(Transaction{ID: 10, PaymentRequestID: 1, Status: payment.TxDeclined}); got != "evt_10_2" {
		t.Fatalf("EventID = %q", got)
	}
}

func TestLedgerChargeWithoutTransaction(t *testing.T) {
	d := healthy()
	d.Ledger = append(d.Ledger, LedgerEntry{Reference: "ptx_77", Charge: true, Approved: true, UpdatedAt: old})
	if v := only(t, d, LedgerChargeHasApprovedTx); v.Reference != "ptx_77" {
		t.Fatalf("violation %+v", v)
	}
	// Voided or abandoned: no money taken.
	d.Ledger[4].Voided = true
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("voided charge judged: %+v", r.Violations)
	}
}

func TestLedgerChargeOfDeclinedTransaction(t *testing.T) {
	d := healthy()
	d.Ledger[0].Approved = true // money taken for declined tx 10
	if v := only(t, d, LedgerChargeHasApprovedTx); v.TransactionID != 10 {
		t.Fatalf("violation %+v", v)
	}
}

func TestApprovedTransactionWithoutCharge(t *testing.T) {
	d := healthy()
	d.Ledger[1].Voided = true
	if v := only(t, d, ApprovedTxHasLedgerCharge); v.TransactionID != 11 {
		t.Fatalf("violation %+v", v)
	}
}

func TestOpenTransactionPastDeadline(t *testing.T) {
	d := healthy()
	d.Transactions[2].RecoverAfter = now.Add(-grace - time.Second)
	if v := only(t, d, TransactionNotStuck); v.TransactionID != 20 {
		t.Fatalf("violation %+v", v)
	}
	// Past the deadline but within the grace: the reconciler has time.
	d.Transactions[2].RecoverAfter = now.Add(-grace + time.Second)
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("violations: %+v", r.Violations)
	}
}

func TestRefundProcessingPastDeadline(t *testing.T) {
	d := healthy()
	d.Transactions[1].RefundProcessing = true
	d.Transactions[1].RecoverAfter = now.Add(-time.Hour)
	only(t, d, TransactionNotStuck)
}

func TestBatchJobPastLease(t *testing.T) {
	d := healthy()
	d.BatchJobs[1].LeaseUntil = now.Add(-grace - time.Minute)
	if v := only(t, d, BatchJobNotStuck); v.BatchJob != "m/file#b#1" {
		t.Fatalf("violation %+v", v)
	}
	d.BatchJobs[1].Finished = true
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("finished job judged: %+v", r.Violations)
	}
}

func TestRunMetricsLine(t *testing.T) {
	var buf bytes.Buffer
	m := RunMetrics{At: now, OpenViolations: 1, UncheckedAge: 90 * time.Second, PassAge: time.Hour, PassLate: time.Minute, PassPercent: 42.5, Judged: 7}
	if err := m.Publish(&buf); err != nil {
		t.Fatal(err)
	}
	var line struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Violations int     `json:"AuditViolations"`
		Unchecked  int64   `json:"AuditUncheckedAge"`
		PassAge    int64   `json:"AuditFullPassAge"`
		PassLate   int64   `json:"AuditFullPassLate"`
		Progress   float64 `json:"AuditFullPassProgress"`
		Judged     int     `json:"AuditChecksJudged"`
	}
	if err := json.Unmarshal(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	cw := line.AWS.CloudWatchMetrics
	if line.Violations != 1 || line.Unchecked != 90 || line.PassAge != 3600 || line.PassLate != 60 || line.Progress != 42.5 || line.Judged != 7 ||
		line.AWS.Timestamp != now.UnixMilli() || len(cw) != 1 || cw[0].Namespace != "PayReq" || len(cw[0].Metrics) != len(ScheduledMetrics) {
		t.Fatalf("metric line %s", buf.Bytes())
	}
	for i, name := range ScheduledMetrics {
		if cw[0].Metrics[i].Name != name {
			t.Errorf("metric %d is %s, want %s", i, cw[0].Metrics[i].Name, name)
		}
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("want one log line: %q", buf.Bytes())
	}
}

// On a production stage Stripe charges and no sandbox ledger is kept: the
// audit judges every other invariant, but not the ledger's, which would
// call each approved payment broken (the bench's production stack reported
// 50,331 such violations, one per approved payment, each a false alarm on
// the template's AuditViolations alarm).
func TestLedgerInvariantsOnlyWhereTheSandboxCharges(t *testing.T) {
	d := healthy()
	d.Ledger, d.SandboxAcquirer = nil, false
	if r := Check(d, now, grace); !r.OK() {
		t.Fatalf("production stage without a ledger: %+v", r.Violations)
	}
	d.Requests[0].Status = payment.RequestUnpaid // still judged: paid by tx 11 but not marked paid
	if r := Check(d, now, grace); r.OK() {
		t.Fatal("a production stage's other invariants were not judged")
	}
	d = healthy()
	d.Ledger = nil
	only(t, d, ApprovedTxHasLedgerCharge) // the sandbox stage still needs the charge
}
