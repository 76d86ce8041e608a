//go:build chaos

package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testing/adyentest"
	"github.com/payreq/payreq/internal/testing/needs"
)

// TestChaosFailover (make chaos): a production stack whose Stripe refuses
// every connection and whose merchant fails over to Adyen, under card
// payments from several clients, is killed with SIGKILL at random moments
// and restarted; DynamoDB loses answers and conflicts transactions
// meanwhile, and Adyen's webhooks are delivered (again, until accepted, as
// Adyen does) to whichever process runs. Every client retries with the
// same Idempotency-Key and body. At the end no attempt is left open (one
// whose charge Adyen never answered is cancelled there by its reference and
// declined), no request has more than one approved attempt, and Adyen holds
// exactly one live authorisation per approved attempt and none for any
// other: zero double charges through the failover path.
func TestChaosFailover(t *testing.T) {
	needs.External(t, "paydev with crash points, Prism serving Adyen's description")
	kills := envInt("CHAOS_KILLS", 10)
	workers := envInt("CHAOS_WORKERS", 4)
	mock := adyentest.Start(t)
	down := adyentest.Unreachable(t)
	extra := []string{"-schedule-every", "3s", "-stage", "production", "-param", "PaymentConnector=stripe",
		"-param", "LocalStripeSecretKey=sk_test_chaos", "-param", "LocalStripeApiBase=" + down, "-param", "LocalStripeWebhookSecrets=whsec_chaos_test"}
	for name, v := range adyentest.StackParams(mock) {
		extra = append(extra, "-param", name+"="+v)
	}
	dir := t.TempDir()
	port, _ := devstack.FreePort()
	sftpPort, _ := devstack.FreePort()
	var (
		mu  sync.Mutex
		cur = startStackOn(t, dir, "", port, sftpPort, extra...)
	)
	current := func() *proc { mu.Lock(); defer mu.Unlock(); return cur }
	failOverToAdyen(t, cur)

	var ops, retries, approved, limited atomic.Int64
	var reqMu sync.Mutex
	requests := map[int64]bool{}
	stop := make(chan struct{})
	var paused atomic.Bool
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
				key := fmt.Sprintf("chaosfo-%d-%d", w, i)
				c := retryCall(current, &retries, "POST", "/payment-requests", key, fmt.Sprintf(`{"amount": %d.%02d, "unit": "EUR"}`, 5+w, i%100))
				if c.status != http.StatusCreated {
					t.Errorf("create: %v %d %s", c.err, c.status, c.body)
					return
				}
				id := int64(c.json(t)["id"].(float64))
				reqMu.Lock()
				requests[id] = true
				reqMu.Unlock()
				sess := retryCall(current, &retries, "POST", "/payment-requests/"+strconv.FormatInt(id, 10)+"/checkout-session", "", "")
				if sess.status != http.StatusCreated {
					t.Errorf("checkout session: %v %d %s", sess.err, sess.status, sess.body)
					return
				}
				token := sess.json(t)["token"].(string)
				switch r := payOnPage(current, &retries, token); {
				case r.status == http.StatusTooManyRequests:
					limited.Add(1) // the page's 10 attempts in 15 minutes, spent on retries through kills
				case r.status == http.StatusConflict && strings.Contains(string(r.body), "already paid"):
					approved.Add(1) // paid by a commit the kill cut the answer of
				case r.status != http.StatusOK:
					t.Errorf("card payment on the page: %v %d %s", r.err, r.status, r.body)
					return
				case r.json(t)["transactionStatusId"] == 1.0:
					approved.Add(1)
				}
				ops.Add(1)
			}
		}()
	}
	delivered, webhooksDone := deliverAdyenWebhooks(mock, current, stop)
	lost, conflicts, faultsDone := injectFaults(stop, &paused)
	killAndRestart(t, kills, &paused, current, func(next *proc) { mu.Lock(); cur = next; mu.Unlock() },
		func() *proc { return startStackOn(t, dir, "", port, sftpPort, extra...) })
	time.Sleep(2 * time.Second)
	untilFaultsFired(lost, conflicts)
	close(stop)
	wg.Wait()
	<-faultsDone

	// The reconciler closes what the kills left open: an attempt whose
	// charge Adyen never answered waits out its sender's lease (30 s) and
	// is cancelled there by its reference.
	s := current().store(t)
	noOpenAttempts(t, s, 4*time.Minute)
	<-webhooksDone
	final := deliverAll(t, mock, current) // what Adyen still has to say, then any void it caused
	ctx := context.Background()
	paid, doubles, cancelled, failedOver := 0, 0, 0, 0
	var stillLive []string
	deadline := time.Now().Add(time.Minute)
	for id := range requests {
		req, err := s.PaymentRequest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		txs, err := s.TransactionsOfRequest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		nApproved, live := 0, 0
		for _, tx := range txs {
			if len(tx.FailedOver) > 0 {
				failedOver++
			}
			cancelled += mock.Front.TechnicalCancels(tx.Reference)
			n := mock.Front.Live(tx.Reference)
			for n > 0 && tx.Status != payment.TxApproved && time.Now().Before(deadline) {
				// A late charge's void (a reversal at Adyen) may still be on its way.
				time.Sleep(time.Second)
				final += deliverAll(t, mock, current)
				n = mock.Front.Live(tx.Reference)
			}
			live += n
			if tx.Status == payment.TxApproved {
				nApproved++
				if tx.Connector != "adyen" || n != 1 {
					t.Errorf("approved transaction %d (connector %q) has %d live authorisations at Adyen, want 1 at adyen", tx.ID, tx.Connector, n)
				}
			} else if n != 0 {
				stillLive = append(stillLive, strconv.FormatInt(tx.ID, 10))
			}
		}
		if nApproved > 1 || live > 1 {
			doubles++
			t.Errorf("request %d: %d approved transactions, %d live authorisations", id, nApproved, live)
		}
		if req.Status == payment.RequestPaid {
			paid++
			if nApproved != 1 {
				t.Errorf("request %d paid without its approved transaction", id)
			}
		} else if nApproved != 0 {
			t.Errorf("request %d has an approved transaction but is not paid", id)
		}
	}
	if len(stillLive) > 0 {
		t.Errorf("transactions not approved still hold money at Adyen: %s", strings.Join(stillLive, ", "))
	}
	rep := auditClean(t, current())
	t.Logf("audit: %d requests, %d transactions, %d violations", rep.Checked.Requests, rep.Checked.Transactions, len(rep.Violations))
	t.Logf("chaos failover: %d kills, %d lost answers, %d transaction conflicts, %d workers, %d operations (%d approved, %d stopped by the page's attempt limit), %d retries, %d requests, %d paid, %d attempts failed over, %d technical cancels, %d webhook items delivered, %d double charges",
		kills, lost.Load(), conflicts.Load(), workers, ops.Load(), approved.Load(), limited.Load(), retries.Load(), len(requests), paid, failedOver, cancelled, delivered.Load()+int64(final), doubles)
	if failedOver == 0 {
		t.Error("no attempt failed over: the soak never took the failover path")
	}
	faultsFired(t, lost, conflicts)
}

// payOnPage pays by card on the hosted page as a shopper would after a
// failure: again on a broken connection, a 5xx or a 409 while the earlier
// attempt's lease runs, a few seconds apart (the page counts every attempt
// against its limit of 10 a request in 15 minutes).
func payOnPage(current func() *proc, retries *atomic.Int64, token string) response {
	const card = `{"holderName":"Ann Lee","number":"4111111111111111","expiry":"03/30","cvc":"737"}`
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := current().call("POST", "/checkout/api/pay/card", "", card, "X-Checkout-Token", token)
		paid := r.status == http.StatusConflict && strings.Contains(string(r.body), "already paid")
		if r.err == nil && r.status < 500 && (r.status != http.StatusConflict || paid) || time.Now().After(deadline) {
			return r
		}
		retries.Add(1)
		time.Sleep(5 * time.Second)
	}
}

// deliverAdyenWebhooks posts Adyen's queued webhooks to the running process
// every second until stop, keeping what was not accepted for the next
// round (Adyen retries a delivery until it is accepted).
func deliverAdyenWebhooks(mock *adyenmock.Mock, current func() *proc, stop <-chan struct{}) (*atomic.Int64, <-chan struct{}) {
	var delivered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var pending []adyenmock.Item
		for {
			select {
			case <-stop:
				// What the last kill cut off, to the process that runs now.
				for deadline := time.Now().Add(time.Minute); len(pending) > 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
					if postAdyen(current().info.APIBase, pending) == nil {
						delivered.Add(int64(len(pending)))
						pending = nil
					}
				}
				return
			case <-time.After(time.Second):
			}
			pending = append(pending, mock.Front.Webhooks()...)
			if len(pending) > 0 && postAdyen(current().info.APIBase, pending) == nil {
				delivered.Add(int64(len(pending)))
				pending = nil
			}
		}
	}()
	return &delivered, done
}

// deliverAll posts every queued webhook until accepted (or a minute) and
// returns how many items it delivered.
func deliverAll(t *testing.T, mock *adyenmock.Mock, current func() *proc) int {
	t.Helper()
	items := mock.Front.Webhooks()
	for deadline := time.Now().Add(time.Minute); len(items) > 0; time.Sleep(time.Second) {
		err := postAdyen(current().info.APIBase, items)
		if err == nil {
			return len(items)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Adyen's webhooks were never accepted: %v", err)
		}
	}
	return 0
}

// postAdyen sends items to the stack's Adyen callback address.
func postAdyen(apiBase string, items []adyenmock.Item) error {
	return adyenmock.Post(context.Background(), apiBase+"/callbacks/adyen", items)
}
