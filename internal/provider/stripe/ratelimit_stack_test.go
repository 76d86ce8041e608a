package stripe_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// TestAcquirer429IsNotADecline runs the local production stack against
// stripe-mock behind a front that answers Stripe's 429 rate_limit, through
// the hosted page:
//
//   - a card payment whose every send is rate limited is answered 503
//     (998, Retry-After) — not a decline — with no lookup sent to Stripe,
//     no transaction left behind, no notification, and the request still
//     payable: paid at once when the limiter lets it through;
//   - 30 shoppers paying at once against a limit of 12 requests a second
//     (each payment is 2 Stripe requests) are never declined: each is
//     approved, or asked to try again (503) and approved when it does, and
//     each request is charged under exactly one Idempotency-Key.
func TestAcquirer429IsNotADecline(t *testing.T) {
	front, err := stripetest.NewFront(stripetest.Start(t, stripemock.Succeeded))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	stack := startProductionStack(t, front.URL, "whsec_ratelimit")
	ctx := context.Background()
	base, key := stack.Info.APIBase, stack.Info.Merchant.APIKey

	newSession := func(t *testing.T) (int64, string) {
		cr := testenv.Do(t, "POST", base+"/payment-requests", key,
			fmt.Sprintf(`{"amount":12.34,"unit":"EUR","referenceId":"rl-%d"}`, time.Now().UnixNano()))
		if cr.Status != 201 {
			t.Fatalf("create: %d %s", cr.Status, cr.Body)
		}
		id := int64(cr.JSON(t)["id"].(float64))
		s := testenv.Do(t, "POST", base+"/payment-requests/"+strconv.FormatInt(id, 10)+"/checkout-session", key, nil)
		if s.Status != 201 && s.Status != 200 {
			t.Fatalf("checkout session: %d %s", s.Status, s.Body)
		}
		return id, s.JSON(t)["token"].(string)
	}
	pay := func(t *testing.T, tok string) testenv.Response {
		return testenv.Do(t, "POST", base+"/checkout/api/pay/card", "",
			`{"holderName":"Ann Lee","number":"4242 4242 4242 4242","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", tok)
	}

	t.Run("exhausted", func(t *testing.T) {
		id, tok := newSession(t)
		front.RefuseNext(1 << 30)
		r := pay(t, tok)
		front.RefuseNext(0)
		if v := r.JSON(t); r.Status != 503 || v["code"] != "998" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("rate-limited payment: %d %s (Retry-After %q), want 503 998 with Retry-After", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		if n := front.Lookups.Load(); n != 0 {
			t.Fatalf("lookups sent to Stripe: %d, want none", n)
		}
		txs, err := stack.Store.TransactionsOfRequest(ctx, id)
		if err != nil || len(txs) != 0 {
			t.Fatalf("transactions of the request after a 429: %d %v, want none (nothing was charged)", len(txs), err)
		}
		req, err := stack.Store.PaymentRequest(ctx, id)
		if err != nil || req.TransactionStatus != nil {
			t.Fatalf("request after a 429: %+v %v, want no attempt outcome", req, err)
		}
		if d, err := stack.Store.Deliveries(ctx, id, time.Now()); err != nil || len(d) != 0 {
			t.Fatalf("notifications after a 429: %v %v, want none", d, err)
		}
		// Payable at once: no lease left behind.
		r = pay(t, tok)
		if v := r.JSON(t); r.Status != 200 || v["transactionStatusId"] != 1.0 {
			t.Fatalf("payment after the limiter let go: %d %s", r.Status, r.Body)
		}
		if keys := front.Charges()[strconv.FormatInt(id, 10)]; keys != 1 {
			t.Fatalf("idempotency keys that confirmed request %d: %d, want 1", id, keys)
		}
	})

	// The same request paid 30 times at once while Stripe rate limits: the
	// attempt lease lets one charge run at a time, a discarded attempt frees
	// it for the next; one is approved, the others are told it is busy, paid,
	// or to try again; none is declined and the request is charged once.
	t.Run("30 at once on one request", func(t *testing.T) {
		id, tok := newSession(t)
		front.SetRate(4)
		defer front.SetRate(0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[string]int{}
		for range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := pay(t, tok)
				k := strconv.Itoa(r.Status)
				if r.Status == 200 {
					k += fmt.Sprintf("/tx%v", r.JSON(t)["transactionStatusId"])
				}
				mu.Lock()
				statuses[k]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("30 payments of one request at 4 req/s: %v", statuses)
		for k := range statuses {
			if strings.HasPrefix(k, "200/") && k != "200/tx1" {
				t.Errorf("a payment answered %s, want approved, busy or try again", k)
			}
		}
		if statuses["200/tx1"] < 1 {
			// All 30 may have been told to try again: the shopper does.
			if r := pay(t, tok); r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
				t.Fatalf("payment after the burst: %d %s", r.Status, r.Body)
			}
		}
		if n := front.Charges()[strconv.FormatInt(id, 10)]; n != 1 {
			t.Fatalf("request %d confirmed under %d keys, want 1", id, n)
		}
	})

	t.Run("30 shoppers", func(t *testing.T) {
		const shoppers = 30
		ids, toks := make([]int64, shoppers), make([]string, shoppers)
		for i := range shoppers {
			ids[i], toks[i] = newSession(t)
		}
		limitedBefore := front.Limited.Load()
		front.SetRate(12)
		defer front.SetRate(0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		declines, busy := 0, 0
		for i := range shoppers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 0; try < 10; try++ {
					r := pay(t, toks[i])
					mu.Lock()
					switch {
					case r.Status == 200 && r.JSON(t)["transactionStatusId"] == 1.0:
						mu.Unlock()
						return
					case r.Status == 503:
						busy++ // asked to try again: the shopper does
						mu.Unlock()
						time.Sleep(time.Second)
						continue
					case try > 0 && r.Status == 409 && strings.Contains(string(r.Body), "already paid"):
						// The 503 before was an answer lost on a loaded
						// machine after the charge went through: paid (the
						// count below holds it to one charge).
						mu.Unlock()
						return
					default:
						declines++
						mu.Unlock()
						t.Errorf("shopper %d: %d %s", i, r.Status, r.Body)
						return
					}
				}
				t.Errorf("shopper %d never paid", i)
			}()
		}
		wg.Wait()
		charges := front.Charges()
		for _, id := range ids {
			if n := charges[strconv.FormatInt(id, 10)]; n != 1 {
				t.Errorf("request %d confirmed under %d idempotency keys, want 1", id, n)
			}
		}
		t.Logf("30 shoppers at 12 req/s: %d 429s answered by Stripe, %d asked to try again, %d declined",
			front.Limited.Load()-limitedBefore, busy, declines)
		if front.Limited.Load() == limitedBefore {
			t.Fatal("the limit was never reached: the test proves nothing")
		}
		if n := front.Lookups.Load(); n != 0 {
			t.Fatalf("lookups sent to Stripe: %d, want none", n)
		}
	})
}
