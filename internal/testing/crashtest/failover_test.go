package crashtest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/testing/adyentest"
	"github.com/payreq/payreq/internal/testing/needs"
)

// TestCrashDuringFailover: a production stack with Stripe (the default,
// refusing every connection) and Adyen, a merchant whose routing fails
// over to Adyen. A shopper pays by card on the hosted page; the process is
// killed after the request's lease, after the attempt moved to Adyen,
// after Adyen's answer and after the request's commit. After a restart the
// shopper pays again on the same page (409 while the dead attempt's lease
// runs; then the dead attempt is finished first, asking its connector,
// never charging): the request ends paid once, and Adyen authorised its
// transactions once in all. Killing the process anywhere in a failover
// charges at most once.
//
// Killed after the move and before Adyen was asked, the attempt waits on
// Adyen, which cannot prove a reference unused (its lookup replays the
// key; a refusal proves nothing). Once its lease ran out, the shopper's
// retry cancels it at Adyen by its reference (the technical cancel) and
// declines it 001, then pays through a new attempt; the restarted process
// is killed once more right after Adyen acknowledged the cancel, and the
// next one sends it again (one cancel at Adyen: its Idempotency-Key)
// before it declines (docs/acquirers.md, Failover).
func TestCrashDuringFailover(t *testing.T) {
	needs.External(t, "paydev with crash points, Prism serving Adyen's description")
	mock := adyentest.Start(t)
	down := adyentest.Unreachable(t)
	extra := []string{"-stage", "production", "-param", "PaymentConnector=stripe",
		"-param", "LocalStripeSecretKey=sk_test_crash", "-param", "LocalStripeApiBase=" + down, "-param", "LocalStripeWebhookSecrets=whsec_crash_test",
	}
	for name, v := range adyentest.StackParams(mock) {
		extra = append(extra, "-param", name+"="+v)
	}
	const card = `{"holderName":"Ann Lee","number":"4111111111111111","expiry":"03/30","cvc":"737"}`
	for _, point := range []string{crashpoint.AfterLease, crashpoint.AfterFailover, crashpoint.AfterCharge, crashpoint.AfterRequestCommit} {
		t.Run(point, func(t *testing.T) {
			t.Parallel() // a stack of its own; mostly waits (start-up, the dead attempt's lease)
			stateDir := t.TempDir()
			p := startStack(t, stateDir, point, extra...)
			failOverToAdyen(t, p)
			reqID := createRequest(t, p)
			s := p.call("POST", "/payment-requests/"+strconv.FormatInt(reqID, 10)+"/checkout-session", "", "")
			if s.err != nil || s.status != http.StatusCreated {
				t.Fatalf("checkout session: %v %d %s", s.err, s.status, s.body)
			}
			token := s.json(t)["token"].(string)
			pay := func() response {
				return p.call("POST", "/checkout/api/pay/card", "", card, "X-Checkout-Token", token)
			}
			if first := pay(); first.err == nil {
				t.Fatalf("the payment survived the crash point: %d %s", first.status, first.body)
			}
			p.died()
			again := ""
			if point == crashpoint.AfterFailover {
				// The attempt waits on Adyen: its technical cancel is killed
				// once too.
				again = crashpoint.AfterTechnicalCancel
			}
			p = startStack(t, stateDir, again, extra...)
			paidAlready := func(r response) bool {
				return r.status == http.StatusConflict && strings.Contains(string(r.body), "already paid")
			}
			retryThroughLease := func() response {
				retry := pay()
				for deadline := time.Now().Add(150 * time.Second); retry.err == nil && (retry.status == http.StatusConflict && !paidAlready(retry) ||
					retry.status == http.StatusServiceUnavailable && again != "") && time.Now().Before(deadline); {
					// The dead attempt's lease runs (30 s: 409); an attempt
					// Adyen cannot tell is cancelled only one more lease later
					// (503 meanwhile); 12 s apart, as the page allows 10
					// attempts a request in 15 minutes.
					time.Sleep(12 * time.Second)
					retry = pay()
				}
				return retry
			}
			retry := retryThroughLease()
			if again != "" {
				if retry.err == nil {
					t.Fatalf("the retry after the lease did not reach the technical cancel: %d %s", retry.status, retry.body)
				}
				p.died() // the retry's recovery, or the reconciler's, sent the cancel and died
				p = startStack(t, stateDir, "", extra...)
				retry = retryThroughLease()
			}
			// Paid now, or paid by the dead process's commit (the page then
			// shows the request paid).
			if !paidAlready(retry) && (retry.err != nil || retry.status != http.StatusOK || retry.json(t)["transactionStatusId"] != 1.0) {
				t.Fatalf("the shopper's payment after the crash: %v %d %s", retry.err, retry.status, retry.body)
			}
			req, txs := requestAndTransactions(t, p, reqID)
			authorised, approved := 0, 0
			for _, tx := range txs {
				authorised += mock.Front.Authorisations(tx.Reference)
				if tx.Status == payment.TxApproved {
					approved++
					if tx.Connector != "adyen" {
						t.Errorf("transaction %d approved through %q, want adyen", tx.ID, tx.Connector)
					}
				}
			}
			if authorised != 1 || approved != 1 || req.Status != payment.RequestPaid {
				t.Fatalf("request %d: status %d, %d approved of %d transactions, %d authorisations at Adyen; want paid once, authorised once",
					reqID, req.Status, approved, len(txs), authorised)
			}
			if point == crashpoint.AfterFailover {
				technicallyCancelled(t, p, mock, txs)
			}
			auditClean(t, p)
		})
	}
}

// failOverToAdyen routes the stack's merchant to Stripe with Adyen as its
// failover (before its first payment; the state outlives restarts).
func failOverToAdyen(t *testing.T, p *proc) {
	t.Helper()
	ctx := context.Background()
	s := p.store(t)
	m, err := s.Merchant(ctx, p.info.Merchant.ID)
	if err != nil {
		t.Fatal(err)
	}
	m.Routing = routing.Rules{Default: "stripe", Failover: []string{"adyen"}}
	if err := s.UpdateMerchant(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// technicallyCancelled checks the after-failover case's end: the dead
// attempt waits no more on Adyen; it was cancelled there by its reference
// once (the cancel sent again after the second kill met Adyen's stored
// answer), never authorised, and declined 001; Adyen's webhooks (the
// new attempt's AUTHORISATION, the TECHNICAL_CANCEL of a reference it
// never got) are acknowledged.
func technicallyCancelled(t *testing.T, p *proc, mock *adyenmock.Mock, txs []*payment.Transaction) {
	t.Helper()
	dead := 0
	for _, tx := range txs {
		if strings.Join(tx.FailedOver, ",") != "stripe" || tx.Status == payment.TxApproved {
			continue
		}
		dead++
		if tx.Status != payment.TxDeclined || tx.Code != "001" || tx.Connector != "adyen" ||
			mock.Front.TechnicalCancels(tx.Reference) != 1 || mock.Front.Authorisations(tx.Reference) != 0 {
			t.Fatalf("dead attempt %d: status %d code %q on %q, %d technical cancels, %d authorisations; want declined 001 on adyen, cancelled once, never authorised",
				tx.ID, tx.Status, tx.Code, tx.Connector, mock.Front.TechnicalCancels(tx.Reference), mock.Front.Authorisations(tx.Reference))
		}
	}
	if dead != 1 {
		t.Fatalf("%d dead attempts among %d transactions, want 1", dead, len(txs))
	}
	if err := mock.Front.Deliver(context.Background(), p.info.APIBase+"/callbacks/adyen"); err != nil {
		t.Fatalf("Adyen's webhooks after the technical cancel: %v", err)
	}
}

// requestAndTransactions reads request reqID and its transactions.
func requestAndTransactions(t *testing.T, p *proc, reqID int64) (*payment.Request, []*payment.Transaction) {
	t.Helper()
	ctx := context.Background()
	s := p.store(t)
	req, err := s.PaymentRequest(ctx, reqID)
	if err != nil {
		t.Fatal(err)
	}
	txs, err := s.TransactionsOfRequest(ctx, reqID)
	if err != nil {
		t.Fatal(err)
	}
	return req, txs
}
