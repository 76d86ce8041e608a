package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/payment"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// recordingFront stands between the service and stripe-mock: it records
// every PaymentIntent the service creates (the form Stripe receives) and
// can force the status of the confirmed intents it answers. Every request
// still reaches stripe-mock, which validates it against Stripe's OpenAPI
// description.
type recordingFront struct {
	URL string

	mu      sync.Mutex
	intents []url.Values
	status  string
	// actions are the next_action objects answered, with status
	// requires_action, to a confirmed intent of a payment method type
	// (stripe-mock's single fixture has none).
	actions map[string]map[string]any
}

func startRecordingFront(t *testing.T, mock string) *recordingFront {
	f := &recordingFront{}
	target, _ := url.Parse(mock)
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			form, _ := url.ParseQuery(string(b))
			r.Header.Set("X-Test-Pm-Type", form.Get("payment_method_types[0]"))
			if form.Get("metadata[payreq_closed]") == "" {
				f.mu.Lock()
				f.intents = append(f.intents, form)
				f.mu.Unlock()
			}
		}
		director(r)
	}
	proxy.ModifyResponse = func(resp *http.Response) error {
		f.mu.Lock()
		st := f.status
		action := f.actions[resp.Request.Header.Get("X-Test-Pm-Type")]
		f.mu.Unlock()
		if action != nil {
			st = "requires_action"
		}
		if st == "" || resp.Request.Method != http.MethodPost || resp.Request.URL.Path != "/v1/payment_intents" || resp.StatusCode != 200 {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var pi map[string]any
		if err := json.Unmarshal(b, &pi); err != nil {
			return err
		}
		pi["status"] = st
		if action != nil {
			pi["next_action"] = action
		}
		b, _ = json.Marshal(pi)
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Stripe's answer to a PaymentMethod it does not know (stripe-mock
		// accepts any id): 400 invalid_request_error on payment_method.
		if r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			if form, _ := url.ParseQuery(string(b)); form.Get("payment_method") == unknownPaymentMethod {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"type":"invalid_request_error","code":"resource_missing","param":"payment_method","message":"No such PaymentMethod: '%s'"}}`, unknownPaymentMethod)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// unknownPaymentMethod is a PaymentMethod id the recording front answers as
// Stripe answers one it does not know.
const unknownPaymentMethod = "pm_unknown_to_stripe"

// startProductionStack runs the local stack in the production stage
// against the Stripe API at apiBase, accepting webhooks signed with whsec.
func startProductionStack(t *testing.T, apiBase, whsec string) *devstack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	opts := stackOptions(t)
	opts.Stage, opts.Params = "production", map[string]string{
		"LocalStripeSecretKey": "sk_test_local", "LocalStripeApiBase": apiBase, "LocalStripeWebhookSecrets": whsec}
	stack, err := devstack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start production stack: %v", err)
	}
	t.Cleanup(stack.Close)
	return stack
}

func (f *recordingFront) created() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.intents...)
}

// answerWith makes confirmed intents of payment method type pmType wait
// for the payer with next action na (nil: no longer).
func (f *recordingFront) answerWith(pmType string, na map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.actions == nil {
		f.actions = map[string]map[string]any{}
	}
	f.actions[pmType] = na
}

func (f *recordingFront) forceStatus(st string) {
	f.mu.Lock()
	f.status = st
	f.mu.Unlock()
}

// TestStripeMoneyAndEventBinding runs the local production stack against
// stripe-mock behind a recording front and checks, through the public API:
// amounts reach Stripe in Stripe's own minor units (MGA zero-decimal, ISK
// in hundredths); an amount or currency Stripe cannot take is refused with
// 400 026 or 020 before any Stripe call, at creation and at payment time,
// leaving nothing written; and a signed event changes a transaction only
// when it is bound to it (intent id, reference, payment request, amount,
// currency), never overwriting the stored intent id.
func TestStripeMoneyAndEventBinding(t *testing.T) {
	front := startRecordingFront(t, stripetest.Start(t, stripemock.Succeeded))
	const whsec = "whsec_money_test_secret"
	stack := startProductionStack(t, front.URL, whsec)
	ctx := context.Background()
	base, key := stack.Info.APIBase, stack.Info.Merchant.APIKey

	create := func(amount, unit string) testenv.Response {
		t.Helper()
		return testenv.Do(t, "POST", base+"/payment-requests", key, `{"amount":`+amount+`,"unit":"`+unit+`"}`)
	}
	session := func(id int64) string {
		t.Helper()
		s := testenv.Do(t, "POST", base+"/payment-requests/"+strconv.FormatInt(id, 10)+"/checkout-session", key, nil)
		if s.Status != 201 && s.Status != 200 {
			t.Fatalf("checkout session: %d %s", s.Status, s.Body)
		}
		return s.JSON(t)["token"].(string)
	}
	payCard := func(id int64) testenv.Response {
		t.Helper()
		return testenv.Do(t, "POST", base+"/checkout/api/pay/card", "",
			`{"holderName":"Ann Lee","number":"4242 4242 4242 4242","expiry":"12/30","cvc":"123"}`, "X-Checkout-Token", session(id))
	}
	idOf := func(r testenv.Response) int64 {
		t.Helper()
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		return int64(r.JSON(t)["id"].(float64))
	}

	// 1. Stripe's minor units reach Stripe.
	for _, tc := range []struct{ amount, unit, minor, cur string }{
		{"5000", "MGA", "5000", "mga"},   // zero-decimal at Stripe (ISO: 2 decimals)
		{"1200", "ISK", "120000", "isk"}, // two decimals at Stripe (ISO: none)
		{"1.23", "KWD", "1230", "kwd"},   // three decimals, last digit 0
		{"19.99", "EUR", "1999", "eur"},
	} {
		id := idOf(create(tc.amount, tc.unit))
		before := len(front.created())
		if r := payCard(id); r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
			t.Fatalf("pay %s %s: %d %s", tc.amount, tc.unit, r.Status, r.Body)
		}
		got := front.created()
		if len(got) != before+1 {
			t.Fatalf("pay %s %s: %d PaymentIntents created, want 1", tc.amount, tc.unit, len(got)-before)
		}
		if pi := got[len(got)-1]; pi.Get("amount") != tc.minor || pi.Get("currency") != tc.cur {
			t.Fatalf("%s %s reached Stripe as amount=%s currency=%s, want %s %s", tc.amount, tc.unit,
				pi.Get("amount"), pi.Get("currency"), tc.minor, tc.cur)
		}
	}

	// 2. Refused at creation, before any Stripe call: an amount Stripe
	// cannot represent (026), a currency Stripe does not charge (020).
	sent := len(front.created())
	for _, tc := range []struct{ amount, unit, code, field string }{
		{"1.235", "KWD", "026", "amount"},
		{"5000.5", "MGA", "026", "amount"},
		{"1200.5", "ISK", "", ""}, // ISO gives ISK no decimals: the service's own 026
		{"1000000", "USD", "026", "amount"},
		{"0.5", "BTC", "020", "unit"},
		{"10", "VES", "020", "unit"},
	} {
		r := create(tc.amount, tc.unit)
		v := r.JSON(t)
		if r.Status != 400 || (tc.code != "" && v["code"] != tc.code) || v["type"] == nil {
			t.Fatalf("create %s %s: %d %s, want 400 %s", tc.amount, tc.unit, r.Status, r.Body, tc.code)
		}
		if tc.field != "" {
			errs, _ := v["errors"].([]any)
			if len(errs) != 1 || errs[0].(map[string]any)["field"] != tc.field {
				t.Fatalf("create %s %s: field errors %v, want one on %s", tc.amount, tc.unit, v["errors"], tc.field)
			}
		}
	}

	// 3. Refused at payment time too: a request stored before the rule
	// (written here directly, as an older release would have) is refused
	// with 026; no transaction is written and its lease is released.
	now := time.Now().UTC()
	old := &payment.Request{ID: ids.New(now), MerchantID: stack.Info.Merchant.ID, Status: payment.RequestUnpaid,
		Amount: decimal.RequireFromString("1.235"), Unit: "KWD", RecipientName: "Shop", CreatedAt: now, UpdatedAt: now}
	if err := stack.Store.CreatePaymentRequest(ctx, old); err != nil {
		t.Fatal(err)
	}
	if r := payCard(old.ID); r.Status != 400 || r.JSON(t)["code"] != "026" {
		t.Fatalf("pay 1.235 KWD: %d %s, want 400 026", r.Status, r.Body)
	}
	if txs, err := stack.Store.TransactionsOfRequest(ctx, old.ID); err != nil || len(txs) != 0 {
		t.Fatalf("transactions after the refusal: %d %v, want none", len(txs), err)
	}
	if _, lease, err := stack.Store.PaymentRequestLease(ctx, old.ID); err != nil || lease.TransactionID != 0 {
		t.Fatalf("lease after the refusal: %+v %v, want released", lease, err)
	}
	if n := len(front.created()); n != sent {
		t.Fatalf("%d PaymentIntents created for refused amounts, want none", n-sent)
	}

	// 4. Events bind to their own payment. A 100 EUR card payment left
	// processing (pending) with its intent id stored.
	prID := idOf(create("100", "EUR"))
	front.forceStatus("processing")
	r := payCard(prID)
	front.forceStatus("")
	if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 3.0 {
		t.Fatalf("processing payment: %d %s", r.Status, r.Body)
	}
	txID := int64(r.JSON(t)["transactionId"].(float64))
	tx, err := stack.Store.Transaction(ctx, txID)
	if err != nil || tx.ProviderRef == "" {
		t.Fatalf("pending transaction: %+v %v", tx, err)
	}
	mine := tx.ProviderRef
	meta := func(edit func(map[string]string)) map[string]string {
		m := map[string]string{stripeprov.MetaTransactionID: strconv.FormatInt(txID, 10),
			stripeprov.MetaPaymentRequestID: strconv.FormatInt(prID, 10), stripeprov.MetaReference: tx.Reference}
		if edit != nil {
			edit(m)
		}
		return m
	}
	n := 0
	send := func(piID string, amount int64, cur string, md map[string]string) map[string]any {
		t.Helper()
		n++
		event, _ := json.Marshal(map[string]any{
			"id": "evt_money_" + strconv.Itoa(n), "object": "event", "type": "payment_intent.succeeded", "api_version": "2025-01-27.acacia",
			"created": time.Now().Unix(), "livemode": false,
			"data": map[string]any{"object": map[string]any{
				"id": piID, "object": "payment_intent", "status": "succeeded", "amount": amount, "currency": cur, "metadata": md}},
		})
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: whsec, Timestamp: time.Now()})
		resp := testenv.Do(t, "POST", base+"/callbacks/svcwh", "", event, "Stripe-Signature", signed.Header)
		if resp.Status != 200 {
			t.Fatalf("event: %d %s", resp.Status, resp.Body)
		}
		return resp.JSON(t)
	}
	for _, tc := range []struct {
		name   string
		pi     string
		amount int64
		cur    string
		md     map[string]string
	}{
		// The case: another intent (50 minor units of USD) whose
		// metadata names only this transaction.
		{"another intent", "pi_other", 50, "usd", map[string]string{stripeprov.MetaTransactionID: strconv.FormatInt(txID, 10)}},
		{"another intent, full metadata", "pi_other", 10000, "eur", meta(nil)},
		{"another amount", mine, 50, "eur", meta(nil)},
		{"another currency", mine, 10000, "usd", meta(nil)},
		{"another reference", mine, 10000, "eur", meta(func(m map[string]string) { m[stripeprov.MetaReference] = "ptx_1" })},
		{"another payment request", mine, 10000, "eur", meta(func(m map[string]string) { m[stripeprov.MetaPaymentRequestID] = "1" })},
		{"no payment request", mine, 10000, "eur", meta(func(m map[string]string) { delete(m, stripeprov.MetaPaymentRequestID) })},
	} {
		ack := send(tc.pi, tc.amount, tc.cur, tc.md)
		if ack["changed"] != false || ack["ignored"] != true {
			t.Fatalf("%s: %v, want ignored and unchanged", tc.name, ack)
		}
		cur, err := stack.Store.Transaction(ctx, txID)
		if err != nil || cur.Status != payment.TxPending || cur.ProviderRef != mine {
			t.Fatalf("%s: transaction %+v %v, want still pending with providerRef %s", tc.name, cur, err, mine)
		}
	}
	if st := testenv.Do(t, "GET", base+"/payment-requests/status/"+strconv.FormatInt(prID, 10), key, nil).JSON(t); st["paymentRequestStatusId"] != 2.0 {
		t.Fatalf("request after unbound events: %v, want unpaid", st)
	}
	// Raced: 30 deliveries at once, half for another intent and half the
	// bound event (Stripe retries, redeliveries): exactly one changes the
	// transaction, and only a bound one.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changed []string
	)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pi := mine
			if i%2 == 0 {
				pi = "pi_other"
			}
			event, _ := json.Marshal(map[string]any{
				"id": "evt_race_" + strconv.Itoa(i), "object": "event", "type": "payment_intent.succeeded", "api_version": "2025-01-27.acacia",
				"created": time.Now().Unix(), "livemode": false,
				"data": map[string]any{"object": map[string]any{
					"id": pi, "object": "payment_intent", "status": "succeeded", "amount": 10000, "currency": "eur", "metadata": meta(nil)}},
			})
			signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: whsec, Timestamp: time.Now()})
			req, _ := http.NewRequest("POST", base+"/callbacks/svcwh", bytes.NewReader(event))
			req.Header.Set("Stripe-Signature", signed.Header)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var ack map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&ack)
			if resp.StatusCode != 200 {
				t.Errorf("raced event %d: %d %v", i, resp.StatusCode, ack)
			}
			if ack["changed"] == true {
				mu.Lock()
				changed = append(changed, pi)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(changed) != 1 || changed[0] != mine {
		t.Fatalf("30 raced events changed the transaction %d times (%v), want once, by its own intent", len(changed), changed)
	}
	cur, err := stack.Store.Transaction(ctx, txID)
	if err != nil || cur.Status != payment.TxApproved || cur.ProviderRef != mine {
		t.Fatalf("after the bound event: %+v %v", cur, err)
	}
}
