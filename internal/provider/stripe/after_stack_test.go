package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/payment"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// afterEnv is the local production stack against stripe-mock behind a front
// that plays what Stripe does after its first answer (stripetest.Front
// with KeepState): saved results per Idempotency-Key, 500s included;
// intents and refunds kept, listed and searched; refunds answered pending;
// disputes; events signed as Stripe signs them, posted to the stack.
type afterEnv struct {
	front *stripetest.Front
	stack *devstack.Stack
	base  string
	key   string
	state string // the stack's state directory (its seal key)
}

const afterSecret = "whsec_after_first_answer"

func startAfter(t *testing.T) *afterEnv {
	t.Helper()
	front, err := stripetest.NewFront(stripetest.Start(t, stripemock.Succeeded))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.KeepState()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The reconciler runs when a test says so (RunScheduled), not on its
	// own minute.
	opts := stackOptions(t)
	opts.Stage, opts.ScheduleEvery = "production", 24*time.Hour
	opts.Params = map[string]string{"LocalStripeSecretKey": "sk_test_local", "LocalStripeApiBase": front.URL, "LocalStripeWebhookSecrets": afterSecret}
	stack, err := devstack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start production stack: %v", err)
	}
	t.Cleanup(stack.Close)
	front.SendEventsTo(stack.Info.APIBase+"/callbacks/svcwh", afterSecret)
	return &afterEnv{front: front, stack: stack, base: stack.Info.APIBase, key: stack.Info.Merchant.APIKey, state: opts.StateDir}
}

// request creates a payment request and returns its id.
func (e *afterEnv) request(t *testing.T, amount, unit string) int64 {
	t.Helper()
	r := testenv.Do(t, "POST", e.base+"/payment-requests", e.key,
		fmt.Sprintf(`{"amount":%s,"unit":%q,"referenceId":"after-%d","notifyUrl":"https://shop.example/notify"}`, amount, unit, time.Now().UnixNano()))
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	return int64(r.JSON(t)["id"].(float64))
}

// session opens a hosted-page checkout session of request id.
func (e *afterEnv) session(t *testing.T, id int64) string {
	t.Helper()
	s := testenv.Do(t, "POST", e.base+"/payment-requests/"+strconv.FormatInt(id, 10)+"/checkout-session", e.key, nil)
	if s.Status != 201 && s.Status != 200 {
		t.Fatalf("checkout session: %d %s", s.Status, s.Body)
	}
	return s.JSON(t)["token"].(string)
}

// payCard pays on the hosted page, as a shopper does.
func (e *afterEnv) payCard(t *testing.T, tok string) testenv.Response {
	t.Helper()
	return testenv.Do(t, "POST", e.base+"/checkout/api/pay/card", "",
		`{"holderName":"Ann Lee","number":"4242 4242 4242 4242","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", tok)
}

// paid makes an approved card payment and returns its transaction.
func (e *afterEnv) paid(t *testing.T, amount, unit string) *payment.Transaction {
	t.Helper()
	id := e.request(t, amount, unit)
	r := e.payCard(t, e.session(t, id))
	if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
		t.Fatalf("card payment: %d %s", r.Status, r.Body)
	}
	return e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
}

func (e *afterEnv) tx(t *testing.T, id int64) *payment.Transaction {
	t.Helper()
	tx, err := e.stack.Store.Transaction(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func (e *afterEnv) txs(t *testing.T, requestID int64) []*payment.Transaction {
	t.Helper()
	txs, err := e.stack.Store.TransactionsOfRequest(context.Background(), requestID)
	if err != nil {
		t.Fatal(err)
	}
	return txs
}

// view is GET /transactions/{id}, checked against docs/openapi.yaml by the
// stack's tests of every response.
func (e *afterEnv) view(t *testing.T, id int64) map[string]any {
	t.Helper()
	r := testenv.Do(t, "GET", e.base+"/transactions/"+strconv.FormatInt(id, 10), e.key, nil)
	if r.Status != 200 {
		t.Fatalf("transaction %d: %d %s", id, r.Status, r.Body)
	}
	return r.JSON(t)
}

// reconcile runs one reconciler pass.
func (e *afterEnv) reconcile(t *testing.T) {
	t.Helper()
	if err := e.stack.RunScheduled(context.Background(), "ReconcilerFunction"); err != nil {
		t.Fatalf("reconciler: %v", err)
	}
}

// notified waits until the merchant notification eventID of request
// prID was attempted (the notify URL does not resolve offline: the attempt
// is what counts).
func (e *afterEnv) notified(t *testing.T, prID int64, eventID string) {
	t.Helper()
	// A bound against a hang. On a loaded machine a notification's first
	// send may be cut off (an event answered 503 after its change was
	// written): the outbox sweep sends it, which the reconciler's minute
	// schedule runs on AWS and this stack (its schedules a day apart) runs
	// here every 30 s of waiting.
	deadline := time.Now().Add(3 * time.Minute)
	sweepAt := time.Now().Add(30 * time.Second)
	for {
		ds, err := e.stack.Store.Deliveries(context.Background(), prID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.EventID == eventID {
				return
			}
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, d := range ds {
				seen = append(seen, d.EventID)
			}
			t.Fatalf("notification %s of request %d never attempted; attempted: %v", eventID, prID, seen)
		}
		if time.Now().After(sweepAt) {
			e.reconcile(t)
			sweepAt = time.Now().Add(30 * time.Second)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventsSent lists the distinct notification event ids attempted for
// request prID.
func (e *afterEnv) eventsSent(t *testing.T, prID int64) map[string]bool {
	t.Helper()
	ds, err := e.stack.Store.Deliveries(context.Background(), prID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range ds {
		out[d.EventID] = true
	}
	return out
}

func ack(t *testing.T, a stripetest.EventAnswer) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Body, &m); err != nil {
		t.Fatalf("event %s answer %d %s", a.Type, a.Status, a.Body)
	}
	return m
}

// TestSavedServerErrorKeepsTheRequestPayable: Stripe saves a request's 500
// for its Idempotency-Key and answers every later request with that key
// with it (docs.stripe.com/api/idempotent_requests). A hosted-page card
// payment whose confirmation Stripe answered 500:
//
//   - created nothing: the attempt is resolved at once (the lookup's close
//     request is refused as idempotency_error, search finds nothing, a
//     complete list of the intents created since the attempt began shows
//     none), declined 001, not charged; the request is payable at once and
//     the next attempt, under a new key, is approved: one intent in all;
//   - created and confirmed its intent before failing: the lookup finds it
//     (search, or the list where search is off) and the payment is
//     approved, with no second charge;
//
// and the same where Stripe's search is not offered (an account in India).
// Before, both left the request blocked until Stripe forgot the key (a
// day): the search found no intent and the attempt stayed waiting.
func TestSavedServerErrorKeepsTheRequestPayable(t *testing.T) {
	e := startAfter(t)
	for _, india := range []bool{false, true} {
		e.front.SearchOff(india)
		name := map[bool]string{false: "search", true: "india"}[india]

		t.Run(name+"/not-processed", func(t *testing.T) {
			id := e.request(t, "21.50", "EUR")
			tok := e.session(t, id)
			e.front.FailNextCharge(false)
			start := time.Now()
			r := e.payCard(t, tok)
			if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 2.0 {
				t.Fatalf("payment whose confirmation Stripe answered with a saved 500: %d %s (want declined, resolved at once)", r.Status, r.Body)
			}
			v := r.JSON(t)
			if ll := v["lastLog"].(map[string]any); ll["code"] != "001" {
				t.Fatalf("lastLog %v, want 001", ll)
			}
			first := e.tx(t, int64(v["transactionId"].(float64)))
			if n := e.front.IntentsOf(first.Reference); n != 0 {
				t.Fatalf("the failed attempt has %d intents at Stripe, want none", n)
			}
			resolved := time.Since(start)
			// Payable at once: the next attempt uses a new key and is paid.
			r = e.payCard(t, tok)
			if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 || r.JSON(t)["paymentRequestStatusId"] != 1.0 {
				t.Fatalf("next attempt: %d %s (want approved and paid at once)", r.Status, r.Body)
			}
			second := e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
			if second.Reference == first.Reference {
				t.Fatal("the next attempt reused the key Stripe saved a 500 for")
			}
			if n := e.front.Charges()[strconv.FormatInt(id, 10)]; n != 2 {
				t.Fatalf("confirmations under %d keys, want 2 (the saved 500, the payment)", n)
			}
			if n := e.front.IntentsOf(second.Reference); n != 1 {
				t.Fatalf("%d intents of the paying attempt, want 1", n)
			}
			t.Logf("saved 500 (nothing created, %s): resolved within the attempt in %v", name, resolved.Round(time.Millisecond))
		})

		t.Run(name+"/processed", func(t *testing.T) {
			id := e.request(t, "33.10", "EUR")
			tok := e.session(t, id)
			e.front.FailNextCharge(true)
			r := e.payCard(t, tok)
			if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
				t.Fatalf("payment charged before Stripe answered 500: %d %s (want approved, found by lookup)", r.Status, r.Body)
			}
			tx := e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
			pi := e.front.IntentOf(tx.Reference)
			if pi == nil || tx.ProviderRef != pi["id"] {
				t.Fatalf("transaction holds intent %q, Stripe has %v", tx.ProviderRef, pi)
			}
			if n := e.front.Charges()[strconv.FormatInt(id, 10)]; n != 1 {
				t.Fatalf("confirmations under %d keys, want 1", n)
			}
			// Paid once: a second attempt is refused.
			if r := e.payCard(t, tok); r.Status != 409 && r.Status != 401 {
				t.Fatalf("attempt on a paid request: %d %s", r.Status, r.Body)
			}
		})
	}
}

// TestQRAnswersQRInEveryCurrency: POST /payments/qr/{id} answers
// nextAction.type "qr" with its payload in every currency, INR included
// (Stripe routes an INR QR through UPI, whose own step is a UPI collect
// with a QR); UPI's own operation keeps "upi_collect". Before, an INR QR
// answered "upi_collect".
func TestQRAnswersQRInEveryCurrency(t *testing.T) {
	e := startAfter(t)
	exp := time.Now().Add(30 * time.Minute).Unix()
	actions := map[string]map[string]any{
		"upi": {"type": "upi_handle_redirect_or_display_qr_code", "upi_handle_redirect_or_display_qr_code": map[string]any{
			"hosted_instructions_url": "https://payments.stripe.com/upi/instructions/test",
			"qr_code":                 map[string]any{"data": "upi://pay?pa=stripe@upi&am=500.00", "expires_at": exp}}},
		"pix": {"type": "pix_display_qr_code", "pix_display_qr_code": map[string]any{"data": "00020101021226880014br.gov.bcb.pix",
			"expires_at": exp, "hosted_instructions_url": "https://payments.stripe.com/pix/instructions/test"}},
	}
	e.front.ModifyIntents(func(form url.Values, pi map[string]any) {
		if na := actions[form.Get("payment_method_types[0]")]; na != nil {
			pi["status"], pi["next_action"] = "requires_action", na
		}
	})
	payer := `{"name":"Ann Lee","email":"ann@example.com","phoneNumber":"4915112345678","address":"1 Main St","city":"Mumbai","state":"MH","postalCode":"400001","country":"IN"}`
	for _, c := range []struct{ unit, amount, payload string }{{"INR", "500", "upi://pay"}, {"BRL", "20", "000201"}} {
		id := e.request(t, c.amount, c.unit)
		r := testenv.Do(t, "POST", e.base+"/payments/qr/"+strconv.FormatInt(id, 10), e.key, payer)
		if r.Status != 200 {
			t.Fatalf("QR in %s: %d %s", c.unit, r.Status, r.Body)
		}
		na, _ := r.JSON(t)["nextAction"].(map[string]any)
		if na["type"] != "qr" || !strings.HasPrefix(fmt.Sprint(na["qrPayload"]), c.payload) {
			t.Fatalf("QR in %s: nextAction %v, want type qr with its payload", c.unit, na)
		}
		// The lookup shows the same contract.
		v := e.view(t, int64(r.JSON(t)["transactionId"].(float64)))
		if na, _ := v["nextAction"].(map[string]any); na["type"] != "qr" {
			t.Fatalf("GET /transactions of a QR in %s: nextAction %v", c.unit, na)
		}
	}
	r := testenv.Do(t, "POST", e.base+"/payments/h2h/30", e.key,
		`{"amount":500,"unit":"INR","upiId":"ann@okbank","name":"Ann Lee","email":"ann@example.com","phoneNumber":"4915112345678","address":"1 Main St","city":"Mumbai","state":"MH","postalCode":"400001","country":"IN"}`)
	if na, _ := r.JSON(t)["nextAction"].(map[string]any); r.Status != 200 || na["type"] != "upi_collect" {
		t.Fatalf("UPI's own operation: %d %s (want upi_collect)", r.Status, r.Body)
	}
}

// TestUnknownNextActionIsCancelledBeforeTheDecline: Stripe asks for a step
// the service cannot show (next_action use_stripe_sdk): the intent is
// cancelled at Stripe before the attempt is declined 004, so it can never
// take the money of a payment the merchant was told was declined.
func TestUnknownNextActionIsCancelledBeforeTheDecline(t *testing.T) {
	e := startAfter(t)
	var mu sync.Mutex
	e.front.ModifyIntents(func(form url.Values, pi map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		if form.Get("payment_method_types[0]") == "card" {
			pi["status"], pi["next_action"] = "requires_action", map[string]any{"type": "use_stripe_sdk", "use_stripe_sdk": map[string]any{}}
		}
	})
	id := e.request(t, "12.00", "EUR")
	r := e.payCard(t, e.session(t, id))
	if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 2.0 {
		t.Fatalf("payment: %d %s (want declined)", r.Status, r.Body)
	}
	tx := e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
	if tx.Code != "004" {
		t.Fatalf("code %s, want 004", tx.Code)
	}
	if pi := e.front.Intent(tx.ProviderRef); pi == nil || pi["status"] != "canceled" {
		t.Fatalf("intent %s at Stripe: %v, want canceled before the decline", tx.ProviderRef, pi)
	}
	_ = stripeprov.MetaReference
}
