package adyen_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/adyen"
	"github.com/payreq/payreq/internal/testing/needs"
)

// These tests run the connector against Adyen's own contract: Prism serves
// Adyen's Checkout v71 description in proxy mode with --errors before the
// front that plays Adyen's test platform (internal/devstack/adyenmock). A
// request of the connector that broke the description would come back as
// Prism's 422 problem, which the connector reports as an error, so each
// test here also proves its requests are Adyen's.

const (
	testAPIKey  = "AQE_test_key_not_secret"
	testHMACKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	testAccount = "PayreqECOM"
)

var (
	mockOnce sync.Once
	mock     *adyenmock.Mock
	mockDir  string
	mockErr  error
	refSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if mock != nil {
		mock.Stop()
	}
	stopEmulators()
	if mockDir != "" {
		os.RemoveAll(mockDir)
	}
	os.Exit(code)
}

// startMock starts Prism and the front once for the package.
func startMock(t *testing.T) *adyenmock.Mock {
	t.Helper()
	needs.External(t, "Prism (infra/local node_modules)")
	mockOnce.Do(func() {
		var infra string
		if infra, mockErr = devstack.InfraDir(); mockErr != nil {
			return
		}
		if mockErr = devstack.EnsureNodeModules(infra, io.Discard); mockErr != nil {
			return
		}
		if mockDir, mockErr = os.MkdirTemp("", "payreq-adyen-"); mockErr != nil {
			return
		}
		mock, mockErr = adyenmock.Run(context.Background(), infra, mockDir, testAPIKey, testHMACKey)
	})
	if mockErr != nil {
		t.Fatalf("start Prism and the Adyen front: %v", mockErr)
	}
	return mock
}

func newProvider(t *testing.T, m *adyenmock.Mock, tune func(*adyen.Options)) *adyen.Provider {
	t.Helper()
	o := adyen.Options{APIKey: testAPIKey, MerchantAccount: testAccount, BaseURL: m.URL, Timeout: 20 * time.Second,
		RetryBase: 50 * time.Millisecond}
	if tune != nil {
		tune(&o)
	}
	p, err := adyen.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func nextRef() (string, int64) {
	id := 7_000_000 + refSeq.Add(1)
	return payment.ChargeReference(id), id
}

func chargeReq(number string, amount, unit string) provider.ChargeRequest {
	ref, tx := nextRef()
	return provider.ChargeRequest{Reference: ref, TransactionID: tx, PaymentRequestID: tx + 1,
		Amount: decimal.RequireFromString(amount), Unit: unit, Method: provider.MethodCard,
		Card: &card.Details{Digits: number, Expiry: card.Expiry{Month: 3, Year: 2030}}, CVV: "737",
		CardholderPresent: true, ReturnURL: "https://pay.example/return/" + ref}
}

// TestOutcomeMatrix: the sandbox's outcome matrix through the connector,
// with Adyen's test card and test holder names: approve, each decline
// class, the 3-D Secure challenge passed and failed through
// /payments/details, and a pending payment settled by its webhook.
func TestOutcomeMatrix(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	ctx := context.Background()

	t.Run("approve", func(t *testing.T) {
		req := chargeReq("4111111111111111", "10.00", "EUR")
		out, err := p.Charge(ctx, req)
		if err != nil || out.Status != provider.Approved || out.ProviderRef == "" {
			t.Fatalf("Charge = %+v, %v; want approved with a PSP reference", out, err)
		}
		if n := m.Front.Authorisations(req.Reference); n != 1 {
			t.Fatalf("authorisations = %d, want 1", n)
		}
	})

	declines := []struct {
		holder string
		status provider.Status
		code   codes.Code
	}{
		{"DECLINED", provider.Declined, codes.DeclinedContactIssuer},
		{"REFERRAL", provider.Declined, codes.DeclinedContactIssuer},
		{"ERROR", provider.Declined, codes.BankSystemError},
		{"BLOCK_CARD", provider.Declined, codes.CardRestricted},
		{"CARD_EXPIRED", provider.Declined, codes.InvalidOrExpiredCard},
		{"INVALID_AMOUNT", provider.Declined, codes.InvalidAmount},
		{"NOT_SUPPORTED", provider.Declined, codes.UnsupportedCardType},
		{"NOT_ENOUGH_BALANCE", provider.Declined, codes.InsufficientFunds},
		{"UNKNOWN", provider.Declined, codes.BankSystemError},
		{"INVALID_CARD_NUMBER", provider.Declined, codes.InvalidOrExpiredCard},
		{"ISSUER_UNAVAILABLE", provider.Declined, codes.BankSystemError},
		{"NOT_3D_AUTHENTICATED", provider.Declined, codes.ThreeDSDecline},
		{"ACQUIRER_FRAUD", provider.Declined, codes.RiskBlocked},
		{"CANCELLED", provider.Declined, codes.TransactionCancelled}, // Refused 15 on Adyen's table
		{"SHOPPER_CANCELLED", provider.Declined, codes.TransactionCancelled},
	}
	for _, d := range declines {
		t.Run("decline "+d.holder, func(t *testing.T) {
			req := chargeReq("4111111111111111", "10.00", "EUR")
			req.HolderName = d.holder
			out, err := p.Charge(ctx, req)
			if err != nil || out.Status != d.status || out.Code != d.code {
				t.Fatalf("Charge(%s) = %+v, %v; want %v %s", d.holder, out, err, d.status, d.code)
			}
			if n := m.Front.Authorisations(req.Reference); n != 0 {
				t.Fatalf("authorisations = %d, want 0", n)
			}
		})
	}

	for _, passed := range []bool{true, false} {
		name := map[bool]string{true: "3-D Secure passed", false: "3-D Secure failed"}[passed]
		t.Run(name, func(t *testing.T) {
			req := chargeReq(adyenmock.ThreeDSCard, "25.00", "EUR")
			out, err := p.Charge(ctx, req)
			if err != nil || out.Status != provider.Pending || out.NextAction == nil ||
				out.NextAction.Type != provider.ActionThreeDSRedirect || !out.Closable {
				t.Fatalf("Charge = %+v, %v; want pending with a 3-D Secure redirect", out, err)
			}
			// The payer opens the issuer's page and comes back with redirectResult.
			back := followChallenge(t, out.NextAction.URL, passed)
			if !strings.HasPrefix(back, req.ReturnURL) {
				t.Fatalf("challenge returned to %q, want the returnUrl %q", back, req.ReturnURL)
			}
			rr := back[strings.Index(back, "redirectResult=")+len("redirectResult="):]
			// The port hands Adyen's redirectResult through unread.
			back2 := provider.ChallengeResult{Reference: req.Reference, TransactionID: req.TransactionID,
				Details: map[string]string{"redirectResult": rr}}
			done, err := p.CompleteChallenge(ctx, back2)
			if err != nil {
				t.Fatal(err)
			}
			// The payer reloading the return page asks again under the same
			// key: the same answer, authorised once.
			if again, err := p.CompleteChallenge(ctx, back2); err != nil || again.Status != done.Status {
				t.Fatalf("repeated completion = %+v, %v; want %v", again, err, done.Status)
			}
			if n := m.Front.Authorisations(req.Reference); passed && n != 1 {
				t.Fatalf("authorisations = %d, want 1", n)
			}
			want, code := provider.Approved, codes.Code("")
			if !passed {
				want, code = provider.Declined, codes.ThreeDSDecline
			}
			if done.Status != want || done.Code != code || done.ProviderRef == "" {
				t.Fatalf("SubmitDetails = %+v; want %v %q", done, want, code)
			}
			if _, err := p.CompleteChallenge(ctx, provider.ChallengeResult{Reference: req.Reference, Approved: true}); !errors.Is(err, adyen.ErrNeedsDetails) {
				t.Fatalf("CompleteChallenge without Adyen's result = %v, want ErrNeedsDetails", err)
			}
		})
	}

	t.Run("3-D Secure native ChallengeShopper", func(t *testing.T) {
		native := newProvider(t, m, func(o *adyen.Options) { o.NativeThreeDS = true })
		out, err := native.Charge(ctx, chargeReq(adyenmock.ThreeDSCard, "25.00", "EUR"))
		if err != nil || out.Status != provider.Pending || out.NextAction != nil || !out.Closable {
			t.Fatalf("Charge = %+v, %v; want pending, closable, no next action the hosted page could show", out, err)
		}
	})

	t.Run("3-D Secure card without a cardholder", func(t *testing.T) {
		req := chargeReq(adyenmock.ThreeDSCard, "25.00", "EUR")
		req.CardholderPresent = false
		out, err := p.Charge(ctx, req)
		if err != nil || out.Status != provider.Approved {
			t.Fatalf("MOTO Charge = %+v, %v; want approved without a challenge (attemptAuthentication never)", out, err)
		}
	})

	t.Run("pending then webhook", func(t *testing.T) {
		req := chargeReq("4111111111111111", "40.00", "USD")
		req.HolderName = adyenmock.PendingHolder
		out, err := p.Charge(ctx, req)
		if err != nil || out.Status != provider.Pending || out.Closable {
			t.Fatalf("Charge = %+v, %v; want pending, waiting for the network", out, err)
		}
		m.Front.Webhooks() // drop earlier subtests' items
		if err := m.Front.Settle(req.Reference, true); err != nil {
			t.Fatal(err)
		}
		evs := readWebhooks(t, m)
		if len(evs) != 1 || evs[0].Payment == nil {
			t.Fatalf("events = %+v; want one payment result", evs)
		}
		r := evs[0].Payment
		if r.Status != provider.Approved || r.TransactionID != req.TransactionID || r.ProviderRef != out.ProviderRef ||
			r.Facts == nil || r.Facts.Reference != req.Reference || r.Facts.PaymentRequestID != req.PaymentRequestID ||
			!r.Facts.Amount.Equal(req.Amount) || r.Facts.Unit != "USD" {
			t.Fatalf("AUTHORISATION result = %+v (facts %+v); want approved, bound to the charge", r, r.Facts)
		}
	})
}

// followChallenge opens the issuer page and returns the link the payer
// follows back (pass or fail).
func followChallenge(t *testing.T, pageURL string, pass bool) string {
	t.Helper()
	resp, err := http.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	id := `id="fail" href="`
	if pass {
		id = `id="pass" href="`
	}
	s := string(b)
	i := strings.Index(s, id)
	if i < 0 {
		t.Fatalf("challenge page without %s: %s", id, s)
	}
	s = s[i+len(id):]
	return strings.ReplaceAll(s[:strings.IndexByte(s, '"')], "&amp;", "&")
}

// readWebhooks delivers the front's queued webhooks to a receiver that
// reads them with the connector's Webhook, as the callbacks function would.
func readWebhooks(t *testing.T, m *adyenmock.Mock) []paycore.Event {
	t.Helper()
	var got []paycore.Event
	var readErr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, readErr = adyen.Webhook{HMACKeys: []string{testHMACKey}, MerchantAccount: testAccount}.Read(body)
		if readErr != nil {
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "[accepted]")
	}))
	defer srv.Close()
	if err := m.Front.Deliver(context.Background(), srv.URL); err != nil {
		t.Fatalf("deliver: %v (read: %v)", err, readErr)
	}
	return got
}

// TestLostAnswerChargesOnce: the answer to /payments is lost after Adyen
// authorised; the connector's retry under the same Idempotency-Key gets the
// stored answer, and Lookup (a replay of the key) finds it too: one
// authorisation either way.
func TestLostAnswerChargesOnce(t *testing.T) {
	m := startMock(t)
	ctx := context.Background()

	t.Run("retry in Charge", func(t *testing.T) {
		p := newProvider(t, m, func(o *adyen.Options) { o.Timeout = 3 * time.Second })
		req := chargeReq("4111111111111111", "12.34", "EUR")
		m.Front.LoseNextAnswer("/payments", 8*time.Second)
		out, err := p.Charge(ctx, req)
		if err != nil || out.Status != provider.Approved {
			t.Fatalf("Charge after a lost answer = %+v, %v; want approved", out, err)
		}
		if n := m.Front.Authorisations(req.Reference); n != 1 {
			t.Fatalf("authorisations = %d, want 1", n)
		}
	})

	t.Run("704 while the first request is in flight", func(t *testing.T) {
		// The first send gives up at 1 s while the front works for 3 s; the
		// resends at 1.5 s and 2.5 s meet Adyen's 704, the one at 4.5 s the
		// stored answer. Read as a decline, the 704 would have declined a
		// payment the front then authorised.
		p := newProvider(t, m, func(o *adyen.Options) { o.Timeout = time.Second; o.Retries = 4; o.RetryBase = 500 * time.Millisecond })
		req := chargeReq("4111111111111111", "13.57", "EUR")
		before := m.Front.InProgressAnswers()
		m.Front.SlowNextCall("/payments", 3*time.Second)
		out, err := p.Charge(ctx, req)
		if err != nil || out.Status != provider.Approved {
			t.Fatalf("Charge while in progress = %+v, %v; want approved", out, err)
		}
		if n := m.Front.InProgressAnswers() - before; n == 0 {
			t.Fatal("no 704 was answered: the test did not meet an in-progress key")
		}
		if n := m.Front.Authorisations(req.Reference); n != 1 {
			t.Fatalf("authorisations = %d, want 1", n)
		}
	})

	t.Run("lookup after an unanswered charge", func(t *testing.T) {
		p := newProvider(t, m, func(o *adyen.Options) { o.Timeout = 3 * time.Second; o.Retries = -1 })
		req := chargeReq("4111111111111111", "56.78", "EUR")
		m.Front.LoseNextAnswer("/payments", 8*time.Second)
		if out, err := p.Charge(ctx, req); err == nil {
			t.Fatalf("Charge with its answer lost and no retry = %+v, nil; want an error (outcome unknown)", out)
		}
		out, err := p.Lookup(ctx, req.Reference)
		if err != nil || out.Status != provider.Approved || out.ProviderRef == "" {
			t.Fatalf("Lookup = %+v, %v; want the stored approval", out, err)
		}
		again, err := p.Charge(ctx, req)
		if err != nil || again.ProviderRef != out.ProviderRef {
			t.Fatalf("Charge again = %+v, %v; want the same payment %s", again, err, out.ProviderRef)
		}
		if n := m.Front.Authorisations(req.Reference); n != 1 {
			t.Fatalf("authorisations = %d, want 1", n)
		}
	})

	t.Run("lookup of a reference never charged", func(t *testing.T) {
		p := newProvider(t, m, nil)
		ref, _ := nextRef()
		if out, err := p.Lookup(ctx, ref); !errors.Is(err, adyen.ErrOutcomeUnknown) || errors.Is(err, provider.ErrUnknownReference) {
			t.Fatalf("Lookup(never charged) = %+v, %v; want ErrOutcomeUnknown, never ErrUnknownReference", out, err)
		}
	})

	t.Run("30 at once", func(t *testing.T) {
		p := newProvider(t, m, nil)
		req := chargeReq("4111111111111111", "9.99", "EUR")
		seen := thirtyAtOnce(func() (string, bool) {
			out, err := p.Charge(ctx, req)
			return out.ProviderRef, err == nil && out.Status == provider.Approved
		})
		if n := m.Front.Authorisations(req.Reference); n != 1 || len(seen) != 1 {
			t.Fatalf("30 concurrent charges of one reference: %d authorisations, PSP references %v; want 1 and 1", n, seen)
		}
	})
}

// TestPrismRefusesWhatBreaksTheDescription: Prism stands before the front
// and answers a request that breaks Adyen's description itself (422), so
// the front never sees it; the connector reports that answer as an error,
// not as a decline.
func TestPrismRefusesWhatBreaksTheDescription(t *testing.T) {
	m := startMock(t)
	before := m.Front.Requests()
	body := `{"amount":{"currency":"EUR","value":"10.00"},"merchantAccount":"M","reference":"ptx_1","paymentMethod":{"type":"scheme","number":"4111111111111111"}}`
	req, _ := http.NewRequest(http.MethodPost, m.URL+"/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "returnUrl") {
		t.Fatalf("Prism answered %d %s; want 422 naming the missing returnUrl", resp.StatusCode, b)
	}
	if m.Front.Requests() != before {
		t.Fatal("the front saw a request that breaks the description")
	}

	// A reversal is held to its description too: no amount (Adyen always
	// reverses the whole payment; PaymentReversalRequest allows no other
	// field) and a merchant account.
	for _, body := range []string{`{"merchantAccount":"M","amount":{"currency":"EUR","value":1000}}`, `{"reference":"void_ptx_1.1"}`} {
		req, _ := http.NewRequest(http.MethodPost, m.URL+"/payments/9900000000000001/reversals", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", testAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || m.Front.Requests() != before {
			t.Fatalf("reversal %s: Prism answered %d %s; want 422, the front never asked", body, resp.StatusCode, b)
		}
	}

	// The connector's own request breaking it (returnUrl has maxLength
	// 8000): Prism's 422 is an error, never read as Adyen's decline.
	cr := chargeReq("4111111111111111", "1.00", "EUR")
	cr.ReturnURL = "https://pay.example/" + strings.Repeat("a", 8000)
	out, err := newProvider(t, m, nil).Charge(context.Background(), cr)
	if err == nil || !strings.Contains(err.Error(), "422") {
		t.Fatalf("Charge with a returnUrl over the description's limit = %+v, %v; want Prism's 422 as an error", out, err)
	}
	if m.Front.Requests() != before || m.Front.Authorisations(cr.Reference) != 0 {
		t.Fatal("the front saw the connector's invalid request")
	}
}

// thirtyAtOnce runs call 30 times at once and returns the distinct
// references of the calls that reported ok.
func thirtyAtOnce(call func() (ref string, ok bool)) map[string]bool {
	var wg sync.WaitGroup
	refs := make(chan string, 30)
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ref, ok := call(); ok {
				refs <- ref
			}
		}()
	}
	wg.Wait()
	close(refs)
	seen := map[string]bool{}
	for r := range refs {
		seen[r] = true
	}
	return seen
}

// TestRefundThirtyAtOnce: the same refund sent 30 times at once refunds
// once (one Idempotency-Key, refund id derived).
func TestRefundThirtyAtOnce(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	ctx := context.Background()
	req := chargeReq("4111111111111111", "20.00", "EUR")
	out, err := p.Charge(ctx, req)
	if err != nil || out.Status != provider.Approved {
		t.Fatalf("Charge = %+v, %v", out, err)
	}
	rr := provider.RefundRequest{RefundID: "rf_" + req.Reference, ChargeReference: req.Reference, ProviderRef: out.ProviderRef,
		Amount: decimal.RequireFromString("15.00"), Unit: "EUR"}
	seen := thirtyAtOnce(func() (string, bool) {
		ro, err := p.Refund(ctx, rr)
		return ro.ProviderRef, err == nil && ro.Status == provider.Pending
	})
	if got := m.Front.Refunded(out.ProviderRef); got != 1500 || len(seen) != 1 {
		t.Fatalf("30 concurrent refunds of one id: refunded %d minor units, refund references %v; want 1500 and one", got, seen)
	}
}

// TestRefundCancelAndDisputeWebhooks: refunds and cancels are acknowledged
// by the API and settled by signed webhooks, which the connector reads into
// the service's refund and dispute results.
func TestRefundCancelAndDisputeWebhooks(t *testing.T) {
	m := startMock(t)
	p := newProvider(t, m, nil)
	ctx := context.Background()
	req := chargeReq("4111111111111111", "100.00", "GBP")
	out, err := p.Charge(ctx, req)
	if err != nil || out.Status != provider.Approved {
		t.Fatalf("Charge = %+v, %v", out, err)
	}
	m.Front.Webhooks()

	ro, err := p.Refund(ctx, provider.RefundRequest{RefundID: "rf_" + req.Reference, ChargeReference: req.Reference,
		TransactionID: req.TransactionID, ProviderRef: out.ProviderRef, Amount: decimal.RequireFromString("30.00"), Unit: "GBP"})
	if err != nil || ro.Status != provider.Pending || ro.ProviderRef == "" {
		t.Fatalf("Refund = %+v, %v; want pending with the refund's PSP reference", ro, err)
	}
	over, err := p.Refund(ctx, provider.RefundRequest{RefundID: "rf2_" + req.Reference, ChargeReference: req.Reference,
		ProviderRef: out.ProviderRef, Amount: decimal.RequireFromString("80.00"), Unit: "GBP"})
	if err != nil || over.Status != provider.Pending {
		t.Fatalf("second Refund = %+v, %v", over, err)
	}
	if err := m.Front.Chargeback(req.Reference); err != nil {
		t.Fatal(err)
	}
	evs := readWebhooks(t, m)
	if len(evs) != 3 || evs[0].Refund == nil || evs[1].Refund == nil || evs[2].Dispute == nil {
		t.Fatalf("events = %+v; want two refund results and a dispute", evs)
	}
	if r := evs[0].Refund; r.Status != "succeeded" || r.RefundRef != ro.ProviderRef || r.ChargeRef != out.ProviderRef ||
		r.RefundID != "rf_"+req.Reference || r.TransactionID != req.TransactionID || !r.Amount.Equal(decimal.RequireFromString("30")) || r.Unit != "GBP" {
		t.Fatalf("REFUND = %+v", r)
	}
	if r := evs[1].Refund; r.Status != "failed" || r.FailureReason == "" {
		t.Fatalf("refund beyond the payment = %+v; want failed with Adyen's reason", r)
	}
	if d := evs[2].Dispute; d.EventType != payment.EventDisputeFundsWithdrawn || d.ChargeRef != out.ProviderRef ||
		d.Status != payment.DisputeNeedsResponse || d.Reason != "10.4" {
		t.Fatalf("CHARGEBACK = %+v", d)
	}

	// Cancel: of the refunded payment it fails, of a fresh one it succeeds.
	fresh := chargeReq("4111111111111111", "5.00", "EUR")
	fo, err := p.Charge(ctx, fresh)
	if err != nil || fo.Status != provider.Approved {
		t.Fatal(out, err)
	}
	m.Front.Webhooks()
	for _, c := range []struct{ ref, psp string }{{req.Reference, out.ProviderRef}, {fresh.Reference, fo.ProviderRef}} {
		if psp, err := p.Cancel(ctx, c.ref, c.psp); err != nil || psp == "" {
			t.Fatalf("Cancel = %q, %v", psp, err)
		}
	}
	items := m.Front.Webhooks()
	if len(items) != 2 || items[0].EventCode != "CANCELLATION" || items[0].Success != "false" || items[1].Success != "true" {
		t.Fatalf("CANCELLATION items = %+v; want refused for the refunded payment, done for the fresh one", items)
	}
	evs, err = adyen.Webhook{HMACKeys: []string{testHMACKey}}.Read(adyenmock.Body(items))
	if err != nil || len(evs) != 2 || evs[0].Ignored || evs[0].Payment != nil {
		t.Fatalf("CANCELLATION events = %+v, %v; want acknowledged, nothing to settle", evs, err)
	}
}

// TestTechnicalCancel: CancelReference through Prism (the request and
// Adyen's 201 answer held to POST /cancels of Adyen's description) to the
// front. Adyen acknowledges it ("received") whether or not it had a
// payment of that reference; the TECHNICAL_CANCEL webhook says whether it
// cancelled an authorisation, and is acknowledged with nothing to settle.
// A lost answer is sent again under the same Idempotency-Key and Adyen
// processes the cancel once.
func TestTechnicalCancel(t *testing.T) {
	m := startMock(t)
	ctx := context.Background()
	p := newProvider(t, m, nil)

	t.Run("a reference Adyen never got", func(t *testing.T) {
		ref, _ := nextRef()
		if err := p.CancelReference(ctx, ref); err != nil {
			t.Fatalf("CancelReference = %v; want acknowledged", err)
		}
		items := m.Front.Webhooks()
		if n := m.Front.TechnicalCancels(ref); n != 1 || len(items) != 1 || items[0].EventCode != "TECHNICAL_CANCEL" ||
			items[0].Success != "false" || items[0].MerchantReference != ref {
			t.Fatalf("%d technical cancels, items %+v; want one, TECHNICAL_CANCEL success false for %s", n, items, ref)
		}
		evs, err := adyen.Webhook{HMACKeys: []string{testHMACKey}}.Read(adyenmock.Body(items))
		if err != nil || len(evs) != 1 || evs[0].Ignored || evs[0].Payment != nil || evs[0].Refund != nil {
			t.Fatalf("TECHNICAL_CANCEL events = %+v, %v; want acknowledged, nothing to settle", evs, err)
		}
	})

	t.Run("an authorisation whose answer was lost", func(t *testing.T) {
		req := chargeReq("4111111111111111", "21.00", "EUR")
		q := newProvider(t, m, func(o *adyen.Options) { o.Timeout = 3 * time.Second; o.Retries = -1 })
		m.Front.LoseNextAnswer("/payments", 8*time.Second)
		if out, err := q.Charge(ctx, req); err == nil {
			t.Fatalf("Charge with its answer lost = %+v; want an error", out)
		}
		m.Front.Webhooks()
		if err := p.CancelReference(ctx, req.Reference); err != nil {
			t.Fatal(err)
		}
		items := m.Front.Webhooks()
		if len(items) != 1 || items[0].EventCode != "TECHNICAL_CANCEL" || items[0].Success != "true" || items[0].OriginalReference == "" {
			t.Fatalf("items = %+v; want TECHNICAL_CANCEL success true naming the payment", items)
		}
	})

	t.Run("its answer lost", func(t *testing.T) {
		ref, _ := nextRef()
		var keys []string
		var mu sync.Mutex
		// A client that records each send's Idempotency-Key; the front keeps
		// the first answer back past the send's timeout (the connection is
		// dropped after the request was sent and processed).
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			mu.Unlock()
			return http.DefaultTransport.RoundTrip(r)
		})}
		q := newProvider(t, m, func(o *adyen.Options) { o.Timeout = 2 * time.Second; o.HTTPClient = hc })
		m.Front.LoseNextAnswer("/cancels", 6*time.Second)
		if err := q.CancelReference(ctx, ref); err != nil {
			t.Fatalf("CancelReference after a lost answer = %v; want acknowledged", err)
		}
		if len(keys) < 2 || keys[0] == "" || keys[1] != keys[0] {
			t.Fatalf("Idempotency-Keys sent %q; want the lost send repeated under the same key", keys)
		}
		if n := m.Front.TechnicalCancels(ref); n != 1 {
			t.Fatalf("Adyen processed %d technical cancels of %s; want 1", n, ref)
		}
		if items := m.Front.Webhooks(); len(items) != 1 {
			t.Fatalf("items = %+v; want one TECHNICAL_CANCEL", items)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestVoidIsAReversal: a void (a late charge's return) goes to
// /payments/{psp}/reversals through Prism, under its own Idempotency-Key
// (not the refund's), and is acknowledged pending with the reversal's PSP
// reference; a plain refund still goes to /refunds. The front cancels an
// authorisation nothing of which was captured, refunds the rest of a
// captured one, and its signed CANCEL_OR_REFUND webhook reads as the void's
// result either way; a payment with nothing to reverse gets a failed one.
// The same void sent 30 times at once is one reversal.
func TestVoidIsAReversal(t *testing.T) {
	m := startMock(t)
	ctx := context.Background()
	var (
		mu   sync.Mutex
		sent []string // path and Idempotency-Key of each send
	)
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		sent = append(sent, r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
	p := newProvider(t, m, func(o *adyen.Options) { o.HTTPClient = hc })
	charge := func(amount string) (provider.ChargeRequest, provider.Outcome) {
		t.Helper()
		req := chargeReq("4111111111111111", amount, "EUR")
		out, err := p.Charge(ctx, req)
		if err != nil || out.Status != provider.Approved {
			t.Fatalf("Charge = %+v, %v", out, err)
		}
		m.Front.Webhooks()
		return req, out
	}
	void := func(req provider.ChargeRequest, psp, amount string) provider.RefundOutcome {
		t.Helper()
		ro, err := p.Refund(ctx, provider.RefundRequest{RefundID: paycore.VoidPrefix + req.Reference, TransactionID: req.TransactionID,
			ChargeReference: req.Reference, Void: true, ProviderRef: psp, Amount: decimal.RequireFromString(amount), Unit: "EUR"})
		if err != nil || ro.Status != provider.Pending || ro.ProviderRef == "" {
			t.Fatalf("void = %+v, %v; want pending with the reversal's PSP reference (Prism let it through)", ro, err)
		}
		return ro
	}
	result := func(want int) []paycore.Event {
		t.Helper()
		evs := readWebhooks(t, m)
		if len(evs) != want {
			t.Fatalf("events = %+v; want %d", evs, want)
		}
		return evs
	}

	t.Run("an authorisation not captured is cancelled", func(t *testing.T) {
		req, out := charge("30.00")
		mu.Lock()
		sent = nil
		mu.Unlock()
		ro := void(req, out.ProviderRef, "30.00")
		mu.Lock()
		got := append([]string(nil), sent...)
		mu.Unlock()
		if len(got) != 1 || got[0] != "/payments/"+out.ProviderRef+"/reversals payreq:reversal:void_"+req.Reference {
			t.Fatalf("sent %q; want one POST /payments/%s/reversals under payreq:reversal:void_%s", got, out.ProviderRef, req.Reference)
		}
		if m.Front.Reversals(req.Reference) != 1 || m.Front.Live(req.Reference) != 0 || m.Front.Refunded(out.ProviderRef) != 0 {
			t.Fatalf("at Adyen: %d reversals, %d live, %d refunded; want reversed once, cancelled, nothing refunded",
				m.Front.Reversals(req.Reference), m.Front.Live(req.Reference), m.Front.Refunded(out.ProviderRef))
		}
		r := result(1)[0].Refund
		if r == nil || r.Status != "succeeded" || r.Action != "cancel" || r.RefundID != paycore.VoidPrefix+req.Reference ||
			r.TransactionID != req.TransactionID || r.RefundRef != ro.ProviderRef || r.ChargeRef != out.ProviderRef ||
			!r.Amount.Equal(decimal.RequireFromString("30")) || r.Unit != "EUR" {
			t.Fatalf("CANCEL_OR_REFUND = %+v; want the void's success, cancelled", r)
		}
	})

	t.Run("a captured payment is refunded; a plain refund still goes to /refunds", func(t *testing.T) {
		req, out := charge("50.00")
		mu.Lock()
		sent = nil
		mu.Unlock()
		// A merchant's partial refund (the front refunds only what was
		// captured): /refunds under the refund's key.
		if ro, err := p.Refund(ctx, provider.RefundRequest{RefundID: "rf_" + req.Reference, TransactionID: req.TransactionID,
			ChargeReference: req.Reference, ProviderRef: out.ProviderRef, Amount: decimal.RequireFromString("10.00"), Unit: "EUR"}); err != nil || ro.Status != provider.Pending {
			t.Fatalf("refund = %+v, %v", ro, err)
		}
		void(req, out.ProviderRef, "50.00")
		mu.Lock()
		got := append([]string(nil), sent...)
		mu.Unlock()
		if len(got) != 2 || got[0] != "/payments/"+out.ProviderRef+"/refunds payreq:refund:rf_"+req.Reference ||
			got[1] != "/payments/"+out.ProviderRef+"/reversals payreq:reversal:void_"+req.Reference {
			t.Fatalf("sent %q; want the refund to /refunds, the void to /reversals, each under its own key", got)
		}
		if m.Front.Live(req.Reference) != 0 || m.Front.Refunded(out.ProviderRef) != 5000 {
			t.Fatalf("at Adyen: %d live, %d refunded; want refunded in full", m.Front.Live(req.Reference), m.Front.Refunded(out.ProviderRef))
		}
		evs := result(2)
		if r := evs[1].Refund; r == nil || r.Status != "succeeded" || r.Action != "refund" || r.RefundID != paycore.VoidPrefix+req.Reference {
			t.Fatalf("CANCEL_OR_REFUND = %+v; want the void's success, refunded", r)
		}
	})

	t.Run("nothing to reverse", func(t *testing.T) {
		req, out := charge("12.00")
		if _, err := p.Cancel(ctx, req.Reference, out.ProviderRef); err != nil {
			t.Fatal(err)
		}
		m.Front.Webhooks()
		void(req, out.ProviderRef, "12.00")
		if r := result(1)[0].Refund; r == nil || r.Status != "failed" || r.FailureReason == "" || r.RefundID != paycore.VoidPrefix+req.Reference {
			t.Fatalf("CANCEL_OR_REFUND of a cancelled payment = %+v; want the void's failure", r)
		}
	})

	t.Run("30 at once", func(t *testing.T) {
		req, out := charge("8.00")
		seen := thirtyAtOnce(func() (string, bool) {
			ro, err := p.Refund(ctx, provider.RefundRequest{RefundID: paycore.VoidPrefix + req.Reference, TransactionID: req.TransactionID,
				ChargeReference: req.Reference, Void: true, ProviderRef: out.ProviderRef, Amount: decimal.RequireFromString("8.00"), Unit: "EUR"})
			return ro.ProviderRef, err == nil && ro.Status == provider.Pending
		})
		if n := m.Front.Reversals(req.Reference); n != 1 || len(seen) != 1 {
			t.Fatalf("30 concurrent voids: %d reversals at Adyen, reversal references %v; want one", n, seen)
		}
		result(1)
	})
}
