package paycore_test

// Unit tests of the payment state machine on the in-memory store
// (internal/testing/memstore) and the sandbox acquirer with its memory
// ledger: no emulator, so they run in the fast suite (go test -short), and
// the store can fail on purpose where the emulators never do.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/testing/memstore"
)

const (
	cardApprove   = "4111 1111 1111 1111"
	cardDecline   = "4000 0000 0000 0002"
	cardChallenge = "4000 0000 0000 3220"
)

var errInjected = errors.New("injected failure")

// acquirer wraps the sandbox: it counts charges and refunds per reference
// and can lose the answer of a charge it made (the outcome is then unknown
// to the service) or refuse lookups.
type acquirer struct {
	provider.Provider
	mu          sync.Mutex
	charges     map[string]int
	refunds     map[string]int
	loseAnswers int  // the next n charges are made, their answer lost
	lookupDown  bool // Lookup fails
}

func (a *acquirer) Charge(ctx context.Context, req provider.ChargeRequest) (provider.Outcome, error) {
	out, err := a.Provider.Charge(ctx, req)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.charges[req.Reference]++
	if a.loseAnswers > 0 {
		a.loseAnswers--
		return provider.Outcome{}, errInjected
	}
	return out, err
}

func (a *acquirer) Refund(ctx context.Context, req provider.RefundRequest) (provider.RefundOutcome, error) {
	a.mu.Lock()
	a.refunds[req.ChargeReference]++
	a.mu.Unlock()
	return a.Provider.Refund(ctx, req)
}

func (a *acquirer) Lookup(ctx context.Context, ref string) (provider.Outcome, error) {
	a.mu.Lock()
	down := a.lookupDown
	a.mu.Unlock()
	if down {
		return provider.Outcome{}, errInjected
	}
	return a.Provider.Lookup(ctx, ref)
}

// chargedReferences is how many distinct references were charged, and
// the most calls any one got.
func (a *acquirer) chargedReferences() (refs, maxCalls int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.charges {
		refs++
		maxCalls = max(maxCalls, n)
	}
	return refs, maxCalls
}

// sender records queued messages; fail makes Send fail.
type sender struct {
	mu   sync.Mutex
	sent []any
	fail atomic.Bool
}

func (s *sender) Send(_ context.Context, _ string, body any, _ time.Duration) error {
	if s.fail.Load() {
		return errInjected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, body)
	return nil
}

func (s *sender) events() []payment.NotifyEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []payment.NotifyEvent
	for _, b := range s.sent {
		if ev, ok := b.(payment.NotifyEvent); ok {
			out = append(out, ev)
		}
	}
	return out
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fastEnv struct {
	store *memstore.Store
	acq   *acquirer
	queue *sender
	clock *clock
	svc   *paycore.Service
	m     *merchant.Merchant
}

// storeFault is how an injected store call goes wrong.
type storeFault int

const (
	failsBeforeApplying storeFault = iota // nothing written
	answerLost                            // written; only its answer is lost
)

func (f storeFault) String() string {
	if f == answerLost {
		return "losing its answer"
	}
	return "failing"
}

// inject makes the store's next call of op go wrong as f, with errInjected.
func (e *fastEnv) inject(op string, f storeFault) {
	if f == answerLost {
		e.store.CrashAfter(op, 1, errInjected)
		return
	}
	e.store.Fail(op, 1, errInjected)
}

func newFastEnv(t *testing.T) *fastEnv {
	t.Helper()
	clk := &clock{now: time.Now().UTC()}
	e := &fastEnv{store: memstore.New(), queue: &sender{}, clock: clk,
		acq: &acquirer{Provider: sandbox.New(sandbox.Options{Ledger: sandbox.NewMemoryLedger(), Now: clk.Now}),
			charges: map[string]int{}, refunds: map[string]int{}},
		m: &merchant.Merchant{ID: "mer_fast", Sandbox: true, CreatedAt: clk.Now()}}
	e.store.PutMerchant(e.m)
	e.svc = paycore.New(paycore.Deps{Store: e.store, Provider: e.acq, Sandbox: true, Queue: e.queue,
		SandboxQueueURL: "sandbox", NotificationsQueueURL: "notifications", ThreeDSKey: []byte("k3ds-0123456789abcdef0123456789ab"),
		CallbackKey: []byte("kcb-0123456789abcdef0123456789abc"), Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return e
}

func (e *fastEnv) request(t *testing.T, amount string) *payment.Request {
	t.Helper()
	now := e.clock.Now()
	r := &payment.Request{ID: ids.New(now), MerchantID: e.m.ID, Status: payment.RequestUnpaid,
		Amount: decimal.RequireFromString(amount), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	if err := e.store.CreatePaymentRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func cardAttempt(number string) paycore.Attempt {
	return paycore.Attempt{Method: provider.MethodCard, CardholderPresent: true,
		Card: &card.Input{Holder: "Ann Example", Number: number, Expiry: "12/39", CVV: "123"}}
}

func (e *fastEnv) requestNow(t *testing.T, id int64) *payment.Request {
	t.Helper()
	r, err := e.store.PaymentRequest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *fastEnv) txsOf(t *testing.T, id int64) []*payment.Transaction {
	t.Helper()
	txs, err := e.store.TransactionsOfRequest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return txs
}

func kindOf(err error) errkind.Kind { return errkind.KindOf(err) }

func TestFastApproveAndDecline(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r := e.request(t, "12.50")

	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardDecline))
	if err != nil || res.TransactionStatusID != payment.TxDeclined || res.LastLog.Code != codes.DeclinedContactIssuer {
		t.Fatalf("declined card: %+v %v", res, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestUnpaid {
		t.Fatalf("a decline left the request %d, want unpaid", got.Status)
	}
	if _, held, _ := e.store.PaymentRequestLease(ctx, r.ID); held.TransactionID != 0 {
		t.Fatalf("a decline kept the lease: %+v", held)
	}

	res, err = e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved || res.PaymentRequestStatusID != payment.RequestPaid {
		t.Fatalf("approved card after a decline: %+v %v", res, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid || got.TransactionID != res.TransactionID {
		t.Fatalf("request after approval: %+v", got)
	}
	// Each final state put its notification in the outbox with the state
	// change, and it was queued.
	for _, tx := range e.txsOf(t, r.ID) {
		ev := e.store.Outbox(tx.ID)
		if ev == nil || ev.TransactionStatusID != tx.Status {
			t.Fatalf("transaction %d (%d): outbox %+v", tx.ID, tx.Status, ev)
		}
	}
	if evs := e.queue.events(); len(evs) != 2 {
		t.Fatalf("%d notifications queued, want 2", len(evs))
	}

	_, err = e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if kindOf(err) != errkind.Conflict {
		t.Fatalf("paying a paid request: %v", err)
	}
	if refs, _ := e.acq.chargedReferences(); refs != 2 {
		t.Fatalf("%d charges, want 2 (the decline and the approval)", refs)
	}
}

// Thirty attempts on one request at once: one charge, one transaction, and
// every other attempt refused without reaching the acquirer.
func TestFastConcurrentAttemptsChargeOnce(t *testing.T) {
	e := newFastEnv(t)
	r := e.request(t, "30.00")
	e.store.SetLatency(time.Millisecond) // the attempts interleave, as on DynamoDB
	var approved atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
			if err == nil && res.TransactionStatusID == payment.TxApproved {
				approved.Add(1)
			} else if k := kindOf(err); k != errkind.Conflict && k != errkind.Unavailable {
				t.Errorf("a refused attempt: %v (kind %q)", err, k)
			}
		}()
	}
	close(start)
	wg.Wait()
	if approved.Load() != 1 {
		t.Fatalf("%d attempts approved, want 1", approved.Load())
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("acquirer charged %d references (at most %d times each), want one charge", refs, most)
	}
	if txs := e.txsOf(t, r.ID); len(txs) != 1 {
		t.Fatalf("%d transactions, want 1", len(txs))
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request %+v", got)
	}
}

// The acquirer charged but its answer was lost: the service looks the
// reference up and records the charge's real outcome, never guessing and
// never charging again.
func TestFastUnknownOutcomeIsLookedUp(t *testing.T) {
	e := newFastEnv(t)
	r := e.request(t, "10.00")
	e.acq.loseAnswers = 1
	res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("lost answer, lookup works: %+v %v", res, err)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}

// The answer is lost and the lookup fails too: 503, the attempt stays
// waiting (lease held), and the reconciler settles it later from the
// acquirer's record; a retry meanwhile neither charges nor takes the lease.
func TestFastUnknownOutcomeLeftToTheReconciler(t *testing.T) {
	e := newFastEnv(t)
	ctx := context.Background()
	r := e.request(t, "10.00")
	e.acq.loseAnswers, e.acq.lookupDown = 1, true
	_, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if kindOf(err) != errkind.Unavailable {
		t.Fatalf("unknown outcome: %v, want unavailable", err)
	}
	txs := e.txsOf(t, r.ID)
	if len(txs) != 1 || txs[0].Status != payment.TxWaiting {
		t.Fatalf("transactions %+v, want one waiting", txs)
	}
	if _, held, _ := e.store.PaymentRequestLease(ctx, r.ID); held.TransactionID != txs[0].ID {
		t.Fatalf("the unknown attempt gave up its lease: %+v", held)
	}
	if _, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err == nil {
		t.Fatal("a second attempt ran while the first one's outcome is unknown")
	}
	e.acq.mu.Lock()
	e.acq.lookupDown = false
	e.acq.mu.Unlock()
	e.clock.Add(time.Hour)
	if n, err := e.svc.RecoverOpen(ctx, e.clock.Now()); err != nil || n < 1 {
		t.Fatalf("reconciler: %d %v", n, err)
	}
	if got := e.requestNow(t, r.ID); got.Status != payment.RequestPaid {
		t.Fatalf("request after the reconciler: %d, want paid", got.Status)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}

// A retry with the same Idempotency-Key (same seed) after the store failed
// to record the outcome resumes the same attempt: same transaction, one
// charge, the request paid.
func TestFastRetryWithTheSameKeyResumes(t *testing.T) {
	e := newFastEnv(t)
	r := e.request(t, "10.00")
	ctx := ids.WithSeed(context.Background(), []byte("idempotency-record-1"))
	e.store.Fail("CommitAndSettle", 1, errInjected)
	if _, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err == nil {
		t.Fatal("the first try recorded its outcome although the store failed")
	}
	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("retry: %+v %v", res, err)
	}
	again, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || again.TransactionID != res.TransactionID {
		t.Fatalf("a third try with the key: %+v %v, want transaction %d", again, err, res.TransactionID)
	}
	if txs := e.txsOf(t, r.ID); len(txs) != 1 {
		t.Fatalf("%d transactions, want 1", len(txs))
	}
	if refs, _ := e.acq.chargedReferences(); refs != 1 {
		t.Fatalf("%d references charged, want 1", refs)
	}
}

// The notification is written with the state change (the outbox), so a
// queue that fails after the commit loses nothing: the reconciler finds it
// in the outbox.
func TestFastOutboxKeepsTheNotificationWhenTheQueueFails(t *testing.T) {
	e := newFastEnv(t)
	r := e.request(t, "10.00")
	e.queue.fail.Store(true)
	res, err := e.svc.Pay(context.Background(), e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("%+v %v", res, err)
	}
	ev := e.store.Outbox(res.TransactionID)
	if ev == nil || ev.TransactionStatusID != payment.TxApproved || ev.PaymentRequestStatusID != payment.RequestPaid || ev.RequestID != r.ID {
		t.Fatalf("outbox after a failed send: %+v", ev)
	}
}

// A crash after the combined commit was written (the answer lost): the
// payer gets an error, the state change and its notification are both
// stored, and a retry with the key returns the recorded outcome without a
// second charge.
func TestFastCrashAfterTheCommit(t *testing.T) {
	e := newFastEnv(t)
	r := e.request(t, "10.00")
	ctx := ids.WithSeed(context.Background(), []byte("idempotency-record-2"))
	e.store.CrashAfter("CommitAndSettle", 1, errInjected)
	if _, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove)); err == nil {
		t.Fatal("the lost answer was not reported")
	}
	txs := e.txsOf(t, r.ID)
	if len(txs) != 1 || txs[0].Status != payment.TxApproved || e.store.Outbox(txs[0].ID) == nil {
		t.Fatalf("after the crash: %+v", txs)
	}
	res, err := e.svc.Pay(ctx, e.m, r.ID, cardAttempt(cardApprove))
	if err != nil || res.TransactionID != txs[0].ID || res.TransactionStatusID != payment.TxApproved {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if refs, most := e.acq.chargedReferences(); refs != 1 || most != 1 {
		t.Fatalf("charges %d/%d, want one", refs, most)
	}
}
