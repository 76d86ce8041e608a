package stripe_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/testenv"
)

// piEvent is a payment_intent event about the kept intent id.
func (e *afterEnv) piEvent(t *testing.T, typ, id string) []byte {
	t.Helper()
	pi := e.front.Intent(id)
	if pi == nil {
		t.Fatalf("no intent %s", id)
	}
	return e.front.Event(typ, pi)
}

// TestLateSuccessIsVoided: Stripe reports a charge succeeded for a
// transaction already declined (the merchant was told "declined"). The
// success is never booked: the charge is refunded at once (one refund at
// Stripe, under the key of the charge's reference, however often the event
// arrives: 30 deliveries at once), the transaction stays declined, the
// request unpaid, and GET /transactions/{id} reports the voided late charge
// (also logged and counted: LateChargesVoided). Before, the success was
// acknowledged as a duplicate and the money kept.
func TestLateSuccessIsVoided(t *testing.T) {
	e := startAfter(t)
	e.front.ModifyIntents(func(form url.Values, pi map[string]any) {
		if form.Get("amount") == "1313" {
			pi["status"] = "requires_payment_method"
			pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "generic_decline"}
		}
	})
	id := e.request(t, "13.13", "EUR")
	r := e.payCard(t, e.session(t, id))
	if r.JSON(t)["transactionStatusId"] != 2.0 {
		t.Fatalf("payment: %s (want declined)", r.Body)
	}
	tx := e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
	// Later the intent succeeds at Stripe (the payer completed it with
	// another payment method on Stripe's hosted instructions, say).
	e.front.SetIntentStatus(tx.ProviderRef, "succeeded")
	body := e.piEvent(t, "payment_intent.succeeded", tx.ProviderRef)
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.front.Post(body)
			if err != nil || a.Status != 200 || ack(t, a)["ignored"] == true {
				t.Errorf("late success: %v %d %s", err, a.Status, a.Body)
			}
		}()
	}
	wg.Wait()
	refunds := e.front.RefundsOf(tx.ProviderRef)
	if len(refunds) != 1 || refunds[0]["amount"] != 1313.0 {
		t.Fatalf("refunds of the late charge at Stripe: %v, want one of 1313", refunds)
	}
	v := e.view(t, tx.ID)
	lc, _ := v["lateCharge"].(map[string]any)
	if v["transactionStatusId"] != 2.0 || lc == nil || lc["status"] != "voided" || lc["providerRef"] != tx.ProviderRef || lc["refundRef"] != refunds[0]["id"] {
		t.Fatalf("transaction after its late success: status %v, lateCharge %v", v["transactionStatusId"], lc)
	}
	st := testenv.Do(t, "GET", e.base+"/payment-requests/status/"+strconv.FormatInt(id, 10), e.key, nil).JSON(t)
	if st["paymentRequestStatusId"] != 2.0 {
		t.Fatalf("request after a voided late charge: %v (want unpaid)", st["paymentRequestStatusId"])
	}
}

// TestEventBeforeTheAnswerIsRetried: an event that arrives while its
// transaction has no intent id yet (Stripe answered the confirmation, the
// answer is not stored yet) is answered 503 and not recorded as processed,
// so Stripe sends it again (it retries for up to 3 days); once the answer
// is stored the same event binds. Before, it was answered
// {"ignored":true}, recorded, and never sent again.
func TestEventBeforeTheAnswerIsRetried(t *testing.T) {
	e := startAfter(t)
	held, release := make(chan map[string]any, 1), make(chan struct{})
	e.front.ModifyIntents(func(form url.Values, pi map[string]any) {
		if form.Get("amount") == "1717" {
			held <- pi
			<-release // Stripe's answer is on its way
		}
	})
	id := e.request(t, "17.17", "EUR")
	tok := e.session(t, id)
	done := make(chan testenv.Response, 1)
	go func() { done <- e.payCard(t, tok) }()
	pi := <-held
	pi["status"] = "succeeded"
	body := e.front.Event("payment_intent.succeeded", pi)
	for i := range 2 {
		a, err := e.front.Post(body)
		if err != nil || a.Status != 503 {
			close(release)
			t.Fatalf("delivery %d of an event before its answer: %v %d %s (want 503, not recorded)", i+1, err, a.Status, a.Body)
		}
	}
	close(release)
	r := <-done
	if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
		t.Fatalf("payment: %d %s", r.Status, r.Body)
	}
	a, err := e.front.Post(body) // Stripe's retry
	if err != nil || a.Status != 200 || ack(t, a)["ignored"] == true {
		t.Fatalf("the retried event after the answer: %v %d %s (want bound)", err, a.Status, a.Body)
	}
}

// TestPendingAttemptsExpireInProduction: a 3-D Secure challenge and a QR
// code nobody answered expire in production as in the sandbox: once their
// window has passed, the reconciler cancels the intent at Stripe and
// declines the attempt 013 (3-D Secure timed_out); the request is payable
// again. And a new attempt by the payer supersedes an abandoned challenge
// (cancelled at Stripe, 013) once SupersedeGrace has passed. Before, both
// stayed pending: each look cost two Stripe calls, forever.
func TestPendingAttemptsExpireInProduction(t *testing.T) {
	e := startAfter(t)
	e.front.ModifyIntents(func(form url.Values, pi map[string]any) {
		switch form.Get("payment_method_types[0]") {
		case "card":
			pi["status"] = "requires_action"
			pi["next_action"] = map[string]any{"type": "redirect_to_url", "redirect_to_url": map[string]any{
				"url": "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent=" + pi["id"].(string), "return_url": form.Get("return_url")}}
		case "promptpay": // a QR code with no expiry of its own
			pi["status"] = "requires_action"
			pi["next_action"] = map[string]any{"type": "promptpay_display_qr_code", "promptpay_display_qr_code": map[string]any{
				"data": "00020101021230promptpay-test", "hosted_instructions_url": "https://payments.stripe.com/promptpay/instructions/test"}}
		}
	})

	check := func(t *testing.T, tx *payment.Transaction, threeDS string) {
		t.Helper()
		e.due(t, tx.ID)
		e.reconcile(t)
		got := e.tx(t, tx.ID)
		if got.Status != payment.TxDeclined || got.Code != "013" || got.ThreeDS != threeDS {
			t.Fatalf("attempt past its window: status %d code %s 3-D Secure %q, want declined 013 %q", got.Status, got.Code, got.ThreeDS, threeDS)
		}
		if pi := e.front.Intent(tx.ProviderRef); pi["status"] != "canceled" {
			t.Fatalf("its intent at Stripe is %v, want canceled", pi["status"])
		}
	}

	t.Run("3ds", func(t *testing.T) {
		id := e.request(t, "44.00", "EUR")
		tok := e.session(t, id)
		r := e.payCard(t, tok)
		if r.JSON(t)["transactionStatusId"] != 3.0 {
			t.Fatalf("payment: %s (want pending 3-D Secure)", r.Body)
		}
		tx := e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
		check(t, tx, payment.ThreeDSTimedOut)
	})

	t.Run("qr", func(t *testing.T) {
		id := e.request(t, "300", "THB")
		r := testenv.Do(t, "POST", e.base+"/payments/qr/"+strconv.FormatInt(id, 10), e.key,
			`{"name":"Ann Lee","email":"ann@example.com","phoneNumber":"66812345678","address":"1 Main St","city":"Bangkok","state":"BKK","postalCode":"10110","country":"TH"}`)
		if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 3.0 {
			t.Fatalf("QR: %d %s", r.Status, r.Body)
		}
		check(t, e.tx(t, int64(r.JSON(t)["transactionId"].(float64))), "")
	})

	t.Run("superseded", func(t *testing.T) {
		id := e.request(t, "45.00", "EUR")
		tok := e.session(t, id)
		r := e.payCard(t, tok)
		first := e.tx(t, int64(r.JSON(t)["transactionId"].(float64)))
		// The payer left the challenge more than SupersedeGrace (a tenth of
		// the challenge window) ago and pays again.
		e.ageCreated(t, first.ID, 2*time.Minute)
		e.front.ModifyIntents(nil)
		r = e.payCard(t, tok)
		if r.Status != 200 || r.JSON(t)["transactionStatusId"] != 1.0 {
			t.Fatalf("new attempt over an abandoned challenge: %d %s (want approved)", r.Status, r.Body)
		}
		got := e.tx(t, first.ID)
		if got.Status != payment.TxDeclined || got.Code != "013" || got.ThreeDS != payment.ThreeDSTimedOut {
			t.Fatalf("superseded challenge: status %d code %s %q", got.Status, got.Code, got.ThreeDS)
		}
		if pi := e.front.Intent(first.ProviderRef); pi["status"] != "canceled" {
			t.Fatalf("superseded challenge's intent is %v, want canceled", pi["status"])
		}
	})
}

// ageCreated moves transaction id's creation back by d.
func (e *afterEnv) ageCreated(t *testing.T, id int64, d time.Duration) {
	t.Helper()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	at := e.tx(t, id).CreatedAt.Add(-d).UTC().Format(time.RFC3339Nano)
	_, err = dynamodb.NewFromConfig(cfg).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(e.stack.Tables().Transactions),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(id, 10)}},
		UpdateExpression:          aws.String("SET createdAt = :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: at}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStuckAttemptsCannotStarveANewCrash: 2,000 attempts stuck at Stripe
// (intents processing for hours, each already looked at once) and one
// attempt a crash just left behind (written ahead, never charged). One
// reconciler pass of the local production stack recovers the new one
// first (the fresh shards are read before the back-off shards); each stuck
// attempt it looks at moves its next look back (bounded back-off: one
// minute, doubling up to an hour), so the next pass looks only at those the
// first did not reach, and the one after at none. Before, the pass read the
// oldest 200 of each shard: 1,600 stuck attempts, two Stripe calls each,
// every pass, and the new crash waited behind them.
func TestStuckAttemptsCannotStarveANewCrash(t *testing.T) {
	e := startAfter(t)
	ctx := context.Background()
	m := e.stack.Info.Merchant.ID
	const stuck = 2000
	now := time.Now().UTC()
	seed := func(i int, status payment.TransactionStatus, due time.Time) *payment.Transaction {
		t.Helper()
		created := now.Add(-3 * time.Hour)
		r := &payment.Request{ID: ids.New(now), MerchantID: m, Status: payment.RequestUnpaid, Amount: decimal.RequireFromString("10.00"),
			Unit: "EUR", CreatedAt: created, UpdatedAt: created}
		tx := &payment.Transaction{ID: ids.New(now), Number: fmt.Sprintf("TXSTUCK%011d", i), PaymentRequestID: r.ID, MerchantID: m,
			Status: status, Method: "card", Amount: r.Amount, Unit: "EUR", CreatedAt: created, UpdatedAt: created,
			Message: "Pending", RecoverAfter: due}
		tx.Reference = payment.ChargeReference(tx.ID)
		if status == payment.TxPending {
			tx.ProviderRef = fmt.Sprintf("pi_stuck%05d", i)
			tx.PendingUntil = now.Add(-2 * time.Hour)
			e.front.PutIntent(map[string]any{"id": tx.ProviderRef, "status": "processing", "amount": 1000, "currency": "eur",
				"created": created.Unix(), "metadata": map[string]any{stripeprov.MetaReference: tx.Reference,
					stripeprov.MetaTransactionID: strconv.FormatInt(tx.ID, 10), stripeprov.MetaPaymentRequestID: strconv.FormatInt(r.ID, 10)}})
		}
		if err := e.stack.Store.CreateLeasedRequestWithTransaction(ctx, r, tx, tx.RecoverAfter); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
		return tx
	}
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				tx := seed(i, payment.TxPending, now.Add(-2*time.Hour))
				// Looked at once already: in its back-off shard, due again,
				// and due longer than the new crash (an oldest-first read
				// of one list would reach it last).
				if err := e.stack.Store.DeferRecovery(ctx, tx.ID, tx.RecoverAfter, now.Add(-time.Hour-time.Duration(i)*time.Millisecond), 1); err != nil {
					t.Errorf("defer %d: %v", i, err)
				}
			}
		}()
	}
	for i := range stuck {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	crashed := seed(stuck, payment.TxWaiting, now.Add(-time.Second))
	t.Logf("seeded %d stuck attempts and one crashed attempt in %v", stuck, time.Since(start).Round(time.Millisecond))

	pass := func() (int64, time.Duration) {
		reads, t0 := e.front.IntentReads.Load(), time.Now()
		e.reconcile(t)
		return e.front.IntentReads.Load() - reads, time.Since(t0)
	}
	first := time.Now()
	looked1, took1 := pass()
	got := e.tx(t, crashed.ID)
	if got.Status != payment.TxDeclined || got.Code != "001" {
		t.Fatalf("the new crash after the first pass: status %d code %s, want closed (declined 001, nothing charged)", got.Status, got.Code)
	}
	if looked1 == 0 {
		t.Fatal("the first pass looked at no stuck attempt")
	}
	// Each pass stops at its time budget, so a loaded machine needs more
	// passes to reach every stuck attempt; none may be looked at twice while
	// its next look is pushed back (2 minutes: its second try). Passes
	// continue until one finds none due; only passes that end inside that
	// window are counted, so the bound holds at any speed.
	window := 2 * paycore.RecoverBackoffBase
	looks, inWindow := []int64{looked1}, looked1
	log := fmt.Sprintf("pass 1: new crash recovered, %d stuck attempts looked at in %v", looked1, took1.Round(time.Millisecond))
	for len(looks) < 12 && looks[len(looks)-1] != 0 && time.Since(first) < window {
		n, took := pass()
		looks = append(looks, n)
		log += fmt.Sprintf("; pass %d: %d in %v", len(looks), n, took.Round(time.Millisecond))
		if time.Since(first) < window {
			inWindow += n
		}
	}
	t.Log(log)
	if inWindow > stuck {
		t.Fatalf("stuck attempts looked at %v times in passes within %v of the first: %d looks of %d attempts; a look must move the next one back",
			looks, window, inWindow, stuck)
	}
	if time.Since(first) < window && looks[len(looks)-1] != 0 {
		t.Fatalf("passes %v never ran out of stuck attempts due", looks)
	}
	// Each one looked at waits at least a minute now, in its back-off shard.
	var backedOff int
	for i := 0; i < 20; i++ {
		tx, err := e.stack.Store.TransactionByNumber(ctx, fmt.Sprintf("TXSTUCK%011d", i))
		if err != nil {
			continue // the index may lag
		}
		if tx.RecoverTries >= 2 && tx.RecoverAfter.After(time.Now().Add(30*time.Second)) {
			backedOff++
		}
	}
	t.Logf("sampled 20 stuck attempts: %d backed off to a later look", backedOff)
}
