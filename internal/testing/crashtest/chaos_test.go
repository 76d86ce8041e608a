//go:build chaos

package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/testing/needs"
)

// TestChaos (make chaos): the local stack, its emulators running outside it,
// under a mixed load — wallet payments of existing requests, create-and-pay,
// card payments, UPI payments settled by the sandbox's callbacks — is killed
// with SIGKILL at random moments, restarted on the same ports, and every
// client retries as the docs say (same Idempotency-Key and body). At the
// end no attempt is left open, every request is paid at most once, and the
// sandbox acquirer's ledger holds exactly one live charge per approved
// transaction: zero double charges.
func TestChaos(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	kills := envInt("CHAOS_KILLS", 10)
	workers := envInt("CHAOS_WORKERS", 6)
	dir := t.TempDir()
	port, _ := devstack.FreePort()
	sftpPort, _ := devstack.FreePort()
	extra := []string{"-schedule-every", "3s"}
	os.Setenv("PAYMENT_PENDING_GRACE", "3s") // pending UPI attempts become recoverable quickly
	var (
		mu  sync.Mutex
		cur = startStackOn(t, dir, "", port, sftpPort, extra...)
	)
	current := func() *proc { mu.Lock(); defer mu.Unlock(); return cur }

	var ops, retries, approved atomic.Int64
	var reqMu sync.Mutex
	requests := map[int64]bool{} // every payment request the load touched
	stop := make(chan struct{})
	var paused atomic.Bool // no fault armed while the stack restarts
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("chaos-%d-%d", w, i)
				var path, body string
				switch rand.IntN(4) {
				case 0: // wallet payment of a request created first
					r := retryCall(current, &retries, "POST", "/payment-requests", key+"-create", `{"amount": 10.00, "unit": "EUR"}`)
					if r.status != http.StatusCreated {
						t.Errorf("create: %d %s", r.status, r.body)
						return
					}
					id := int64(r.json(t)["id"].(float64))
					path, body = "/payments/walletA/"+strconv.FormatInt(id, 10), payerBody("token", "tok_success")
				case 1:
					path, body = "/payments/h2h/27", payerBody("amount", "12.50", "unit", "EUR")
				case 2:
					path, body = "/payments/h2h/1", payerBody("amount", "7.00", "unit", "EUR",
						"card", map[string]any{"number": "4111111111111111", "expiry": "12/30", "cvc": "123", "holderName": "Ann Lee"})
				default:
					path, body = "/payments/h2h/30", payerBody("amount", "99", "unit", "INR", "upiId", "success@upi")
				}
				r := retryCall(current, &retries, "POST", path, key, body)
				if r.status != http.StatusOK {
					t.Errorf("%s: %d %s", path, r.status, r.body)
					return
				}
				res := r.json(t)
				reqMu.Lock()
				requests[int64(res["paymentRequestId"].(float64))] = true
				reqMu.Unlock()
				if res["transactionStatusId"] == 1.0 {
					approved.Add(1)
				}
				ops.Add(1)
			}
		}()
	}
	lost, conflicts, faultsDone := injectFaults(stop, &paused)
	killAndRestart(t, kills, &paused, current, func(next *proc) { mu.Lock(); cur = next; mu.Unlock() },
		func() *proc { return startStackOn(t, dir, "", port, sftpPort, extra...) })
	time.Sleep(2 * time.Second)
	untilFaultsFired(lost, conflicts)
	close(stop)
	wg.Wait()
	<-faultsDone

	// Let the reconciler and the sandbox finish every open attempt.
	s := current().store(t)
	noOpenAttempts(t, s, 4*time.Minute)
	// Invariants over everything the load touched.
	ctx := context.Background()
	ledger, err := s.LedgerEntries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]int{}
	for _, e := range ledger {
		if e.Kind == "charge" && e.Status == provider.Approved && !e.Voided && !e.Abandoned {
			live[e.Reference]++
		}
	}
	paid, doubles, orphans := 0, 0, 0
	for id := range requests {
		req, err := s.PaymentRequest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		txs, err := s.TransactionsOfRequest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		nApproved, charges := 0, 0
		for _, tx := range txs {
			charges += live[tx.Reference]
			if tx.Status == payment.TxApproved {
				nApproved++
				if live[tx.Reference] != 1 {
					orphans++
					t.Errorf("approved transaction %d has %d live charges", tx.ID, live[tx.Reference])
				}
			}
		}
		if charges > 1 || nApproved > 1 {
			doubles++
			t.Errorf("request %d: %d approved transactions, %d live charges", id, nApproved, charges)
		}
		if req.Status == payment.RequestPaid {
			paid++
			if nApproved != 1 || req.TransactionID == 0 {
				t.Errorf("request %d paid without its approved transaction", id)
			}
		} else if nApproved != 0 {
			t.Errorf("request %d has an approved transaction but is not paid", id)
		}
	}
	rep := auditClean(t, current())
	t.Logf("audit: %d requests, %d transactions, %d ledger entries checked, %d violations",
		rep.Checked.Requests, rep.Checked.Transactions, rep.Checked.LedgerEntries, len(rep.Violations))
	t.Logf("chaos: %d kills, %d lost answers, %d transaction conflicts, %d workers, %d operations (%d approved at once), %d retries, %d requests, %d paid, %d double charges, %d charges without their transaction",
		kills, lost.Load(), conflicts.Load(), workers, ops.Load(), approved.Load(), retries.Load(), len(requests), paid, doubles, orphans)
	faultsFired(t, lost, conflicts)
}

// injectFaults: meanwhile DynamoDB loses the answer of a write now and then
// (the write applied, the SDK sends it again) and cancels a transaction for
// a conflict, as AWS does and the emulator never does. At most two faults
// wait at a time (armed faults count writes independently, so unbounded
// arming would stack them up while the load is slow and fail every write
// after it), and none while the stack restarts (paused): the faults are for
// the service's writes, not for the start-up's seeding, whose SDK retries
// would otherwise meet one fault after another. It returns the counts of
// faults that fired and a channel closed once it stopped.
func injectFaults(stop <-chan struct{}, paused *atomic.Bool) (lost, conflicts *atomic.Int64, done <-chan struct{}) {
	lost, conflicts = new(atomic.Int64), new(atomic.Int64)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-stop:
				faults.Disarm()
				return
			case <-time.After(time.Duration(100+rand.IntN(300)) * time.Millisecond):
			}
			if paused.Load() || faults.Pending() >= 2 {
				continue
			}
			kind, counter := devstack.FaultLoseAnswer, lost
			if rand.IntN(4) == 0 {
				kind, counter = devstack.FaultTransactionConflict, conflicts
			}
			if a, err := faults.Arm(devstack.Fault{Kind: kind, Nth: 1 + rand.IntN(20), Drop: rand.IntN(2) == 0}); err == nil {
				go func() {
					select {
					case <-a.Done():
						counter.Add(1)
					case <-stop: // never fired, or dropped by a restart
					}
				}()
			}
		}
	}()
	return lost, conflicts, finished
}

// untilFaultsFired keeps the load running (at most two more minutes) until
// both kinds of fault fired: a slow run may end its kills before a
// transaction met an armed conflict.
func untilFaultsFired(lost, conflicts *atomic.Int64) {
	for deadline := time.Now().Add(2 * time.Minute); (lost.Load() == 0 || conflicts.Load() == 0) && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}
}

// faultsFired fails a soak whose injected faults never fired.
func faultsFired(t *testing.T, lost, conflicts *atomic.Int64) {
	t.Helper()
	if lost.Load() == 0 || conflicts.Load() == 0 {
		t.Errorf("the soak lost no answer (%d) or conflicted no transaction (%d): the faults never fired", lost.Load(), conflicts.Load())
	}
}

// killAndRestart SIGKILLs the current stack kills times at random moments
// and starts the next one on the same ports and state (start).
func killAndRestart(t *testing.T, kills int, paused *atomic.Bool, current func() *proc, set func(*proc), start func() *proc) {
	t.Helper()
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(1500+rand.IntN(3000)) * time.Millisecond)
		p := current()
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		p.exited <- nil
		paused.Store(true)
		faults.Disarm()
		next := start()
		paused.Store(false)
		set(next)
	}
}

// noOpenAttempts waits until the store has no open attempt left.
func noOpenAttempts(t *testing.T, s *dynamo.Store, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		open := 0
		for shard := 0; shard < payment.OpenShards; shard++ {
			txs, err := s.OpenAttempts(context.Background(), shard, time.Now().Add(time.Hour), 1000)
			if err != nil {
				t.Fatal(err)
			}
			open += len(txs)
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts still open after the load", open)
		}
		time.Sleep(2 * time.Second)
	}
}

// retryCall retries as the docs tell merchants to: on a broken connection,
// a 5xx or a 409 (key in use / attempt in progress), with the same key and
// body, until the answer is final.
func retryCall(current func() *proc, retries *atomic.Int64, method, path, key, body string) response {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := current().call(method, path, key, body)
		if r.err == nil && r.status < 500 && r.status != http.StatusConflict && r.status != http.StatusTooManyRequests {
			return r
		}
		if time.Now().After(deadline) {
			return r
		}
		retries.Add(1)
		wait := 300 * time.Millisecond
		if r.status == http.StatusTooManyRequests {
			wait = 2 * time.Second // the rate limit's window: wait, then the same request again
		}
		time.Sleep(wait)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
