package batchproc_test

// The batch row's charge on the in-memory store (no emulator): a row is
// charged at most once whatever happens to the invocation charging it — a
// lease that lapsed and a second invocation re-claiming the row, thirty
// invocations at once, a crash after the commit or after the create.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/testing/memstore"
)

var errCrash = errors.New("crashed")

// countingAcquirer counts charges per reference.
type countingAcquirer struct {
	provider.Provider
	mu      sync.Mutex
	charges map[string]int
}

func (a *countingAcquirer) Charge(ctx context.Context, req provider.ChargeRequest) (provider.Outcome, error) {
	a.mu.Lock()
	a.charges[req.Reference]++
	a.mu.Unlock()
	return a.Provider.Charge(ctx, req)
}

func (a *countingAcquirer) total() (refs, calls int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.charges {
		refs, calls = refs+1, calls+n
	}
	return refs, calls
}

type rowEnv struct {
	store   *memstore.Store
	acq     *countingAcquirer
	charger *batchproc.PaymentsCharger
	m       *merchant.Merchant
}

func newRowEnv() *rowEnv {
	st := memstore.New()
	acq := &countingAcquirer{Provider: sandbox.New(sandbox.Options{Ledger: sandbox.NewMemoryLedger()}), charges: map[string]int{}}
	m := &merchant.Merchant{ID: "mer_rows", Sandbox: true}
	st.PutMerchant(m)
	svc := paycore.New(paycore.Deps{Store: st, Provider: acq, Sandbox: true, Queue: discardQueue{},
		SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &rowEnv{store: st, acq: acq, m: m, charger: &batchproc.PaymentsCharger{Service: svc, Store: st, Wait: 10 * time.Second}}
}

type discardQueue struct{}

func (discardQueue) Send(context.Context, string, any, time.Duration) error { return nil }

func row(number string) batch.Row {
	return batch.Row{HolderName: "Ann Example", CardNumber: number, CardExpiry: "12/39", CVV: "123", Email: "ann@example.com",
		Phone: "491701234567", Address: "Hauptstr. 1", City: "Berlin", State: "BE", PostalCode: "10115", Country: "DE", Amount: decimal.RequireFromString("19.99"), Unit: "EUR", ReferenceID: "row-1"}
}

func (e *rowEnv) charge(t *testing.T, r batch.Row, ref batchproc.RowRef) (batch.Result, error) {
	t.Helper()
	return e.charger.ChargeRow(context.Background(), e.m, r, ref)
}

func (e *rowEnv) oneCharge(t *testing.T) {
	t.Helper()
	if refs, calls := e.acq.total(); refs != 1 {
		t.Fatalf("acquirer charged %d references (%d calls), want one charge", refs, calls)
	}
}

// The invocation holding the row lost its lease (it stalled) and another
// re-claimed the row and charged it again with the row's fixed id: the
// second gets the first's outcome, nothing is charged twice.
func TestFastRowReclaimedAfterALapsedLeaseIsNotChargedTwice(t *testing.T) {
	e := newRowEnv()
	ref := batchproc.RowRef{PaymentRequestID: ids.New(time.Now())}
	first, err := e.charge(t, row("4111 1111 1111 1111"), ref)
	if err != nil || first.Status != batch.StatusApproved {
		t.Fatalf("first: %+v %v", first, err)
	}
	second, err := e.charge(t, row("4111 1111 1111 1111"), ref)
	if err != nil || second != first {
		t.Fatalf("re-claimed row: %+v %v, want %+v", second, err, first)
	}
	e.oneCharge(t)
}

func TestFastRowChargedAtOnceByThirtyInvocations(t *testing.T) {
	e := newRowEnv()
	e.store.SetLatency(time.Millisecond)
	ref := batchproc.RowRef{PaymentRequestID: ids.New(time.Now())}
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[batch.Result]int{}
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := e.charge(t, row("4111 1111 1111 1111"), ref)
			if err != nil {
				t.Errorf("charge: %v", err)
				return
			}
			mu.Lock()
			results[res]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if len(results) != 1 {
		t.Fatalf("results %v, want one outcome for all", results)
	}
	for res := range results {
		if res.Status != batch.StatusApproved {
			t.Fatalf("%+v", res)
		}
	}
	e.oneCharge(t)
}

// A crash after the attempt's commit (the answer lost): the retried row
// reports the stored outcome.
func TestFastRowCrashAfterTheCommit(t *testing.T) {
	e := newRowEnv()
	ref := batchproc.RowRef{PaymentRequestID: ids.New(time.Now())}
	e.store.CrashAfter("CommitAndSettle", 1, errCrash)
	if _, err := e.charge(t, row("4111 1111 1111 1111"), ref); err == nil {
		t.Fatal("the lost answer was not reported")
	}
	res, err := e.charge(t, row("4111 1111 1111 1111"), ref)
	if err != nil || res.Status != batch.StatusApproved || res.TransactionID == "" {
		t.Fatalf("retried row: %+v %v", res, err)
	}
	e.oneCharge(t)
}

// A crash after the request and its waiting transaction were written,
// before the charge: the retry resumes that very attempt (same
// transaction, same reference) rather than starting another.
func TestFastRowCrashAfterTheCreate(t *testing.T) {
	e := newRowEnv()
	ref := batchproc.RowRef{PaymentRequestID: ids.New(time.Now())}
	e.store.CrashAfter("CreateLeasedRequestWithTransaction", 1, errCrash)
	if _, err := e.charge(t, row("4111 1111 1111 1111"), ref); err == nil {
		t.Fatal("the lost answer was not reported")
	}
	res, err := e.charge(t, row("4111 1111 1111 1111"), ref)
	if err != nil || res.Status != batch.StatusApproved {
		t.Fatalf("retried row: %+v %v", res, err)
	}
	txs, _ := e.store.TransactionsOfRequest(context.Background(), ref.PaymentRequestID)
	if len(txs) != 1 {
		t.Fatalf("%d transactions, want the first attempt's only", len(txs))
	}
	e.oneCharge(t)
}

func TestFastRowOutcomes(t *testing.T) {
	e := newRowEnv()
	// No cardholder to answer 3-D Secure: declined 004, nothing pending.
	res, err := e.charge(t, row("4000 0000 0000 3220"), batchproc.RowRef{PaymentRequestID: ids.New(time.Now())})
	if err != nil || res.Status != batch.StatusDeclined || res.Code != codes.ThreeDSDecline {
		t.Fatalf("3-D Secure card in a batch: %+v %v", res, err)
	}
	// The row's id belongs to another payment request: the processor must
	// draw another id, and nothing is charged on the other request.
	other := &payment.Request{ID: ids.New(time.Now()), MerchantID: e.m.ID, Status: payment.RequestUnpaid,
		Amount: decimal.NewFromInt(5), Unit: "EUR", CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := e.store.CreatePaymentRequest(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.charge(t, row("4111 1111 1111 1111"), batchproc.RowRef{PaymentRequestID: other.ID}); !errors.Is(err, batchproc.ErrPaymentRequestIDTaken) {
		t.Fatalf("an id of another request: %v", err)
	}
	if cur, _ := e.store.PaymentRequest(context.Background(), other.ID); cur.Status != payment.RequestUnpaid || cur.TransactionID != 0 {
		t.Fatalf("the other request was touched: %+v", cur)
	}
}
