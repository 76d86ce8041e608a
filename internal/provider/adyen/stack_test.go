package adyen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider/adyen"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

// The service-level tests: the whole local stack in the production stage,
// configured for Adyen (the LocalAdyen* template parameters), its connector
// talking to Prism serving Adyen's Checkout description before the front
// that plays Adyen's test platform, and Adyen's signed webhooks delivered
// to the callbacks function's /callbacks/adyen. As the Stripe connector's
// stack tests do, the stacks run on one pair of emulators per package, each
// under a stack name of its own.

var (
	emuOnce sync.Once
	emu     *devstack.Emulators
	emuDir  string
	emuErr  error
	stacks  atomic.Int64
)

func stopEmulators() {
	if emu != nil {
		emu.Stop()
	}
	if emuDir != "" {
		os.RemoveAll(emuDir)
	}
}

// startAdyenStack starts a production stack whose connector is Adyen on m
// (with extra template parameters: more connectors).
func startAdyenStack(t *testing.T, m *adyenmock.Mock, extra ...map[string]string) *devstack.Stack {
	t.Helper()
	needs.External(t, "the local emulators")
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		emuOnce.Do(func() {
			var infra string
			if emuDir, emuErr = os.MkdirTemp("", "payreq-adyen-emu-"); emuErr != nil {
				return
			}
			if infra, emuErr = devstack.InfraDir(); emuErr != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if emu, emuErr = devstack.StartEmulators(ctx, infra, filepath.Join(emuDir, "logs"), 0, 0); emuErr != nil {
				return
			}
			devstack.UseEndpoints(devstack.Endpoints{DynamoDB: emu.DynamoDB, SQS: emu.SQS, S3: emu.S3})
		})
		if emuErr != nil {
			t.Fatalf("start emulators: %v", emuErr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	params := map[string]string{"LocalAdyenApiKey": testAPIKey, "LocalAdyenApiBase": m.URL,
		"LocalAdyenHmacKeys": testHMACKey, "AdyenMerchantAccount": testAccount}
	for _, x := range extra {
		maps.Copy(params, x)
	}
	stack, err := devstack.Start(ctx, devstack.Options{StateDir: t.TempDir(),
		StackName: fmt.Sprintf("adyen%d-%d", os.Getpid(), stacks.Add(1)), Stage: "production", Params: params})
	if err != nil {
		t.Fatalf("start production stack: %v", err)
	}
	t.Cleanup(stack.Close)
	return stack
}

// adyenEnv is one production stack on Adyen and what its tests share.
type adyenEnv struct {
	m     *adyenmock.Mock
	stack *devstack.Stack
	base  string
	key   string
}

var noRedirects = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// pay creates a payment request and pays it by card on the hosted page, as
// the payer does; it returns the request id and the transaction.
func (e *adyenEnv) pay(t *testing.T, holder, number, amount string) (int64, *payment.Transaction) {
	t.Helper()
	cr := testenv.Do(t, "POST", e.base+"/payment-requests", e.key,
		`{"amount":`+amount+`,"unit":"EUR","referenceId":"order-`+strconv.FormatInt(time.Now().UnixNano(), 10)+`","notifyUrl":"https://shop.example/notify","successUrl":"https://shop.example/ok","failureUrl":"https://shop.example/failed"}`)
	if cr.Status != 201 {
		t.Fatalf("create: %d %s", cr.Status, cr.Body)
	}
	prID := int64(cr.JSON(t)["id"].(float64))
	s := testenv.Do(t, "POST", e.base+"/payment-requests/"+strconv.FormatInt(prID, 10)+"/checkout-session", e.key, nil)
	if s.Status != 201 && s.Status != 200 {
		t.Fatalf("checkout session: %d %s", s.Status, s.Body)
	}
	tok := s.JSON(t)["token"].(string)
	pay := testenv.Do(t, "POST", e.base+"/checkout/api/pay/card", "",
		`{"holderName":"`+holder+`","number":"`+number+`","expiry":"03/30","cvc":"737"}`, "X-Checkout-Token", tok)
	if pay.Status != 200 {
		t.Fatalf("pay: %d %s", pay.Status, pay.Body)
	}
	return prID, e.tx(t, int64(pay.JSON(t)["transactionId"].(float64)))
}

func (e *adyenEnv) tx(t *testing.T, id int64) *payment.Transaction {
	t.Helper()
	tx, err := e.stack.Store.Transaction(context.Background(), id)
	if err != nil {
		t.Fatalf("transaction %d: %v", id, err)
	}
	return tx
}

// post delivers an Adyen webhook body to the callbacks function.
func (e *adyenEnv) post(t *testing.T, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(e.base+"/callbacks/adyen", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// firstAttempts counts the first delivery attempts of notification eventID
// of request prID (one per queued message).
func (e *adyenEnv) firstAttempts(t *testing.T, prID int64, eventID string) int {
	t.Helper()
	ds, err := e.stack.Store.Deliveries(context.Background(), prID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ds {
		if d.EventID == eventID && d.Attempt == 1 {
			n++
		}
	}
	return n
}

// notified waits until notification eventID of request prID was attempted
// (shop.example does not resolve offline: the attempt is what counts).
func (e *adyenEnv) notified(t *testing.T, prID int64, eventID string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); e.firstAttempts(t, prID, eventID) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("notification %s of request %d never attempted", eventID, prID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// items takes the front's queued webhooks for merchant reference ref (and
// drops the others).
func items(m *adyenmock.Mock, ref, event string) []adyenmock.Item {
	var out []adyenmock.Item
	for _, it := range m.Front.Webhooks() {
		if it.MerchantReference == ref && it.EventCode == event || event == "REFUND" && it.EventCode == event {
			out = append(out, it)
		}
	}
	return out
}

// deliver30 posts body 30 times at once, then once more for each delivery
// that was not accepted (Adyen keeps those in its retry queue), and
// reports how many were refused along the way.
func (e *adyenEnv) deliver30(t *testing.T, body []byte) (retried int) {
	t.Helper()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		bad []string
	)
	deliver := func() bool {
		st, b := e.post(t, body)
		if st == 200 && b == "[accepted]" {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if st != 503 && st != 500 {
			bad = append(bad, fmt.Sprintf("%d %s", st, b))
		}
		retried++
		return false
	}
	for range 30 {
		wg.Add(1)
		go func() { defer wg.Done(); deliver() }()
	}
	wg.Wait()
	for i := retried; i > 0; i-- {
		for try := 0; !deliver() && try < 5; try++ {
			time.Sleep(time.Second)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("deliveries refused: %v", bad)
	}
	return retried
}

// lateCharge pays a pending payment, declines it by a refusal of its
// AUTHORISATION (signed as Adyen signs), then delivers Adyen's
// AUTHORISATION success for it: a late charge, which the service voids by
// a reversal at Adyen. It checks the reversal (one, through Prism, the
// payment no longer holding money, nothing refunded) and returns the
// request, the transaction and the front's CANCEL_OR_REFUND item.
func (e *adyenEnv) lateCharge(t *testing.T, amount string) (int64, *payment.Transaction, adyenmock.Item) {
	t.Helper()
	prID, tx := e.pay(t, adyenmock.PendingHolder, "4111111111111111", amount)
	e.m.Front.Webhooks()
	if err := e.m.Front.Settle(tx.Reference, true); err != nil {
		t.Fatal(err)
	}
	auth := items(e.m, tx.Reference, "AUTHORISATION")
	if len(auth) != 1 {
		t.Fatalf("AUTHORISATION items: %+v", auth)
	}
	refused := auth[0]
	refused.AdditionalData = maps.Clone(auth[0].AdditionalData)
	refused.Success, refused.Reason = "false", "Refused"
	if st, b := e.post(t, adyenmock.Body([]adyenmock.Item{resign(t, refused)})); st != 200 || b != "[accepted]" {
		t.Fatalf("refusal: %d %q", st, b)
	}
	if got := e.tx(t, tx.ID); got.Status != payment.TxDeclined {
		t.Fatalf("after the refusal: %v, want declined", got.Status)
	}
	if st, b := e.post(t, adyenmock.Body(auth)); st != 200 || b != "[accepted]" {
		t.Fatalf("late AUTHORISATION: %d %q", st, b)
	}
	got := e.tx(t, tx.ID)
	if got.Status != payment.TxDeclined || got.After == nil || got.After.LateCharge == nil || got.After.LateCharge.Status != payment.LateVoided {
		t.Fatalf("after the late AUTHORISATION: %+v; want declined, the late charge voided", got)
	}
	if n, live, refunded := e.m.Front.Reversals(tx.Reference), e.m.Front.Live(tx.Reference), e.m.Front.Refunded(tx.ProviderRef); n != 1 || live != 0 || refunded != 0 {
		t.Fatalf("at Adyen: %d reversals, %d live, %d refunded; want reversed once, holding nothing, no refund", n, live, refunded)
	}
	var reversal []adyenmock.Item
	for _, it := range e.m.Front.Webhooks() {
		if it.EventCode == "CANCEL_OR_REFUND" && it.OriginalReference == tx.ProviderRef {
			reversal = append(reversal, it)
		}
	}
	if len(reversal) != 1 || reversal[0].PSPReference != got.After.LateCharge.RefundRef {
		t.Fatalf("CANCEL_OR_REFUND items %+v; want one, of the reversal the service recorded", reversal)
	}
	return prID, got, reversal[0]
}

// resign signs an edited item with the stack's HMAC key, as Adyen signs.
func resign(t *testing.T, it adyenmock.Item) adyenmock.Item {
	t.Helper()
	b, _ := json.Marshal(it)
	var ni adyen.NotificationItem
	if err := json.Unmarshal(b, &ni); err != nil {
		t.Fatal(err)
	}
	sig, err := adyen.Sign(ni, testHMACKey)
	if err != nil {
		t.Fatal(err)
	}
	it.AdditionalData = maps.Clone(it.AdditionalData)
	if it.AdditionalData == nil {
		it.AdditionalData = map[string]string{}
	}
	it.AdditionalData["hmacSignature"] = sig
	return it
}

// TestAdyenProductionStack drives the real service, configured for Adyen on
// a local production stack, through the public HTTP API against Adyen's
// contract (Prism) and Adyen's test platform (the front):
//
//   - the outcome matrix: approved; each decline class of Adyen's test
//     holder names, with the spec's code; the 3-D Secure redirect passed and
//     failed, the payer's return with Adyen's redirectResult completed by
//     /payments/details; a pending payment (resultCode Received);
//   - the pending payment settled by its signed AUTHORISATION webhook on
//     /callbacks/adyen, delivered 30 times at once: one change, one
//     notification;
//   - a late charge (authorised after its attempt was declined) voided by
//     a reversal, its CANCEL_OR_REFUND webhook delivered 30 times at once:
//     confirmed once; a failed reversal left for an operator;
//   - a refund acknowledged by Adyen and settled by its signed REFUND
//     webhook;
//   - a webhook with a bad HMAC signature refused (401), changing nothing.
func TestAdyenProductionStack(t *testing.T) {
	m := startMock(t)
	stack := startAdyenStack(t, m)
	e := &adyenEnv{m: m, stack: stack, base: stack.Info.APIBase, key: stack.Info.Merchant.APIKey}

	t.Run("approve", func(t *testing.T) {
		_, tx := e.pay(t, "Ann Lee", "4111111111111111", "19.99")
		if tx.Status != payment.TxApproved || !strings.HasPrefix(tx.ProviderRef, "99") {
			t.Fatalf("approved card: %+v (want approved with Adyen's PSP reference)", tx)
		}
		if n := m.Front.Authorisations(tx.Reference); n != 1 {
			t.Fatalf("authorisations = %d, want 1", n)
		}
	})

	// Each decline class of Adyen's "Values for testing refusal reasons",
	// through the one table (outcome.go), as the merchant sees it.
	declines := map[string]codes.Code{
		"DECLINED": codes.DeclinedContactIssuer, "BLOCK_CARD": codes.CardRestricted, "CARD_EXPIRED": codes.InvalidOrExpiredCard,
		"INVALID_AMOUNT": codes.InvalidAmount, "NOT_SUPPORTED": codes.UnsupportedCardType,
		"NOT_3D_AUTHENTICATED": codes.ThreeDSDecline, "NOT_ENOUGH_BALANCE": codes.InsufficientFunds,
		"ACQUIRER_FRAUD": codes.RiskBlocked, "CANCELLED": codes.TransactionCancelled, "ISSUER_UNAVAILABLE": codes.BankSystemError,
		"UNKNOWN": codes.BankSystemError,
	}
	for holder, code := range declines {
		t.Run("decline "+holder, func(t *testing.T) {
			_, tx := e.pay(t, holder, "4111111111111111", "10.00")
			if tx.Status != payment.TxDeclined || tx.Code != code {
				t.Fatalf("holder %s: status %v code %q, want declined %s", holder, tx.Status, tx.Code, code)
			}
			view := testenv.Do(t, "GET", e.base+"/transactions/"+strconv.FormatInt(tx.ID, 10), e.key, nil).JSON(t)
			if ll, _ := view["lastLog"].(map[string]any); view["transactionStatusId"] != 2.0 || ll["code"] != string(code) {
				t.Fatalf("holder %s: the merchant sees %v", holder, view)
			}
		})
	}

	for _, passed := range []bool{true, false} {
		t.Run(fmt.Sprintf("3-D Secure passed=%v", passed), func(t *testing.T) {
			_, tx := e.pay(t, "Ann Lee", adyenmock.ThreeDSCard, "25.00")
			if tx.Status != payment.TxPending || tx.ThreeDS != payment.ThreeDSChallenge {
				t.Fatalf("3-D Secure card: %+v, want pending with a challenge", tx)
			}
			// The payer's browser opens the signed challenge address the
			// merchant API gives, and is sent to the issuer's page.
			view := testenv.Do(t, "GET", e.base+"/transactions/"+strconv.FormatInt(tx.ID, 10), e.key, nil).JSON(t)
			na, _ := view["nextAction"].(map[string]any)
			link, _ := na["url"].(string)
			resp, err := noRedirects.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			issuer := resp.Header.Get("Location")
			if resp.StatusCode != 303 || !strings.HasPrefix(issuer, m.FrontURL+"/threeds?") {
				t.Fatalf("challenge address %s: %d to %q, want 303 to Adyen's redirect", link, resp.StatusCode, issuer)
			}
			// The issuer's page sends the payer back to the returnUrl (the
			// service's page) with Adyen's redirectResult.
			back := followChallenge(t, issuer, passed)
			if u, _ := url.Parse(back); !strings.HasPrefix(back, e.base+"/payments/threeds/redirect/") || u.Query().Get("redirectResult") == "" {
				t.Fatalf("issuer returned to %q, want the service's page with redirectResult", back)
			}
			resp, err = noRedirects.Get(back)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want, code := payment.TxApproved, codes.Code("")
			if !passed {
				want, code = payment.TxDeclined, codes.ThreeDSDecline
			}
			// The attempt was the hosted page's: the payer goes back to it,
			// with the outcome.
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != 303 || loc.Path != "/checkout" || loc.Query().Get("transactionStatusId") != strconv.Itoa(int(want)) {
				t.Fatalf("return: %d to %q, want 303 to the hosted page with status %d", resp.StatusCode, loc, want)
			}
			got := e.tx(t, tx.ID)
			if got.Status != want || got.Code != code || got.ProviderRef == "" {
				t.Fatalf("after the return: %+v, want %v %q with Adyen's PSP reference", got, want, code)
			}
			if n := m.Front.Authorisations(tx.Reference); passed && n != 1 || !passed && n != 0 {
				t.Fatalf("authorisations = %d", n)
			}
		})
	}

	t.Run("pending settled by its webhook, 30 at once", func(t *testing.T) {
		prID, tx := e.pay(t, adyenmock.PendingHolder, "4111111111111111", "40.00")
		if tx.Status != payment.TxPending || tx.ProviderRef == "" {
			t.Fatalf("pending holder: %+v, want pending with its PSP reference", tx)
		}
		m.Front.Webhooks() // earlier payments' items
		if err := m.Front.Settle(tx.Reference, true); err != nil {
			t.Fatal(err)
		}
		its := items(m, tx.Reference, "AUTHORISATION")
		if len(its) != 1 {
			t.Fatalf("AUTHORISATION items: %v", its)
		}
		// A bad HMAC (the signature of another key) is refused: 401, and
		// the payment stays pending.
		forged := its[0]
		forged.AdditionalData = map[string]string{}
		for k, v := range its[0].AdditionalData {
			forged.AdditionalData[k] = v
		}
		forged.AdditionalData["hmacSignature"] = "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="
		if st, b := e.post(t, adyenmock.Body([]adyenmock.Item{forged})); st != 401 {
			t.Fatalf("bad HMAC: %d %s", st, b)
		}
		if got := e.tx(t, tx.ID); got.Status != payment.TxPending {
			t.Fatalf("after a forged webhook: %v, want still pending", got.Status)
		}
		retried := e.deliver30(t, adyenmock.Body(its))
		if got := e.tx(t, tx.ID); got.Status != payment.TxApproved {
			t.Fatalf("after 30 deliveries: %v, want approved", got.Status)
		}
		ev := fmt.Sprintf("evt_%d_%d", tx.ID, payment.TxApproved)
		e.notified(t, prID, ev)
		time.Sleep(2 * time.Second) // a second message, if any, would be attempted by now
		if n := e.firstAttempts(t, prID, ev); n != 1 {
			t.Fatalf("approval notified %d times (%d deliveries retried), want once", n, retried)
		}
	})

	// A late charge: a pending payment refused by its AUTHORISATION webhook
	// (the attempt declined), then authorised after all (its AUTHORISATION
	// success). The service returns the money by a reversal, never a
	// refund: Adyen cancels the authorisation it has not captured, and its
	// CANCEL_OR_REFUND webhook, delivered 30 times at once, confirms the
	// void once.
	t.Run("late charge reversed, CANCEL_OR_REFUND 30 at once", func(t *testing.T) {
		prID, tx, reversal := e.lateCharge(t, "31.00")
		if reversal.Success != "true" || reversal.AdditionalData["modification.action"] != "cancel" {
			t.Fatalf("CANCEL_OR_REFUND item %+v; want success, cancelled", reversal)
		}
		rev := e.tx(t, tx.ID).After.Rev
		e.deliver30(t, adyenmock.Body([]adyenmock.Item{reversal}))
		got := e.tx(t, tx.ID)
		l := got.After.LateCharge
		if got.Status != payment.TxDeclined || l.Status != payment.LateVoided || l.ConfirmedAt == nil || l.Action != "cancel" ||
			l.RefundRef != reversal.PSPReference || got.After.Rev != rev+1 {
			t.Fatalf("after 30 CANCEL_OR_REFUND deliveries: status %d, late charge %+v, rev %d (was %d); want declined, the void confirmed once",
				got.Status, l, got.After.Rev, rev)
		}
		view := testenv.Do(t, "GET", e.base+"/transactions/"+strconv.FormatInt(tx.ID, 10), e.key, nil).JSON(t)
		if lc, _ := view["lateCharge"].(map[string]any); lc["status"] != "voided" || lc["action"] != "cancel" || lc["confirmedAt"] == nil {
			t.Fatalf("the merchant sees %v", view["lateCharge"])
		}
		ds, err := e.stack.Store.Deliveries(context.Background(), prID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if strings.Contains(d.EventID, "_rf_") {
				t.Fatalf("notification %s: a void is not the merchant's refund", d.EventID)
			}
		}
	})

	t.Run("late charge whose reversal fails", func(t *testing.T) {
		_, tx, reversal := e.lateCharge(t, "32.00")
		failed := reversal
		failed.AdditionalData = map[string]string{}
		failed.Success, failed.Reason = "false", "Nothing to reverse"
		failed = resign(t, failed)
		for i := 0; i < 2; i++ {
			if st, b := e.post(t, adyenmock.Body([]adyenmock.Item{failed})); st != 200 || b != "[accepted]" {
				t.Fatalf("CANCEL_OR_REFUND failure delivery %d: %d %q", i, st, b)
			}
		}
		got := e.tx(t, tx.ID)
		if l := got.After.LateCharge; l.Status != payment.LateFailed || l.ConfirmedAt != nil || got.Status != payment.TxDeclined {
			t.Fatalf("after the reversal's failure: %+v; want failed, for an operator", l)
		}
	})

	t.Run("refund settled by its webhook", func(t *testing.T) {
		prID, tx := e.pay(t, "Ann Lee", "4111111111111111", "22.00")
		m.Front.Webhooks()
		rf := testenv.Do(t, "GET", e.base+"/payments/h2h/refund/"+strconv.FormatInt(tx.ID, 10), e.key, nil)
		if rf.Status != 200 {
			t.Fatalf("refund: %d %s", rf.Status, rf.Body)
		}
		got := e.tx(t, tx.ID)
		if got.Refund == nil || got.Refund.Status == payment.RefundRefunded || m.Front.Refunded(tx.ProviderRef) != 2200 {
			t.Fatalf("refund acknowledged by Adyen: %+v (refunded at Adyen %d), want pending until its webhook", got.Refund, m.Front.Refunded(tx.ProviderRef))
		}
		its := items(m, tx.Reference, "REFUND")
		if len(its) != 1 || its[0].OriginalReference != tx.ProviderRef {
			t.Fatalf("REFUND items: %+v", its)
		}
		if st, b := e.post(t, adyenmock.Body(its)); st != 200 || b != "[accepted]" {
			t.Fatalf("REFUND webhook: %d %q", st, b)
		}
		got = e.tx(t, tx.ID)
		if got.Refund.Status != payment.RefundRefunded {
			t.Fatalf("after the REFUND webhook: %+v", got.Refund)
		}
		e.notified(t, prID, fmt.Sprintf("evt_%d_rf_%s_refunded", tx.ID, got.Refund.ID))
	})
}
