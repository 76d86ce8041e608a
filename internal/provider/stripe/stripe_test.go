package stripe

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// countingTransport counts the HTTP calls the provider makes to Stripe.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func newProvider(t *testing.T, base string, mod ...func(*Options)) (*Provider, *countingTransport) {
	t.Helper()
	ct := &countingTransport{}
	zero := int64(0)
	o := Options{SecretKey: "sk_test_payreq", APIBase: base, HTTPClient: &http.Client{Timeout: 5 * time.Second, Transport: ct},
		MaxNetworkRetries: &zero, ReturnURL: func(txID int64, returnTo string) string {
			return "https://pay.example/payments/threeds/redirect/1?return=" + returnTo
		}}
	for _, m := range mod {
		m(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p, ct
}

var refN atomic.Int64

func chargeReq(number string, present bool) provider.ChargeRequest {
	n := refN.Add(1) + time.Now().UnixNano()%1e9
	return provider.ChargeRequest{
		Reference: "ptx_" + decimal.NewFromInt(n).String(), TransactionID: n, PaymentRequestID: 7,
		Amount: decimal.RequireFromString("10.50"), Unit: "EUR", Method: provider.MethodCard,
		Card: &card.Details{Digits: number, Expiry: card.Expiry{Month: 12, Year: 2030}}, CVV: "123",
		CardholderPresent: present, ReturnURL: "/checkout/done",
	}
}

// Recorded-fixture tests: Stripe's documented test cards through fakeStripe.
func TestChargeTestCards(t *testing.T) {
	_, base := newFake(t)
	p, _ := newProvider(t, base)
	for _, tc := range []struct {
		number string
		status provider.Status
		code   codes.Code
	}{
		{"4242424242424242", provider.Approved, ""},
		{"4000000000000002", provider.Declined, codes.DeclinedContactIssuer},
		{"4000000000009995", provider.Declined, codes.InsufficientFunds},
		{"4000000000009987", provider.Declined, codes.CardRestricted},
		{"4000000000009979", provider.Declined, codes.CardRestricted},
		{"4000000000000069", provider.Declined, codes.InvalidOrExpiredCard},
		{"4000000000000127", provider.Declined, codes.SecurityCodeIncorrect},
		{"4000000000000119", provider.Declined, codes.BankSystemError},
		{"4100000000000019", provider.Declined, codes.RiskBlocked},
	} {
		out, err := p.Charge(context.Background(), chargeReq(tc.number, true))
		if err != nil {
			t.Fatalf("%s: %v", tc.number, err)
		}
		if out.Status != tc.status || out.Code != tc.code || !strings.HasPrefix(out.ProviderRef, "pi_") {
			t.Errorf("%s: got %v %q ref %q, want %v %q", tc.number, out.Status, out.Code, out.ProviderRef, tc.status, tc.code)
		}
	}
}

func TestChargeTwiceChargesOnce(t *testing.T) {
	f, base := newFake(t)
	p, ct := newProvider(t, base)
	req := chargeReq("4242424242424242", true)
	first, err := p.Charge(context.Background(), req)
	if err != nil || first.Status != provider.Approved {
		t.Fatalf("first charge: %+v %v", first, err)
	}
	if got := ct.n.Load(); got != 2 {
		t.Errorf("Stripe calls per approved payment = %d, want 2 (payment method, confirmed intent)", got)
	}
	second, err := p.Charge(context.Background(), req)
	if err != nil || second.ProviderRef != first.ProviderRef || second.Status != provider.Approved {
		t.Fatalf("second charge: %+v %v, want the first (%s)", second, err, first.ProviderRef)
	}
	if n := f.moneyCharged(req.Reference); n != 1 {
		t.Fatalf("money moved %d times for one reference", n)
	}
	out, err := p.Lookup(context.Background(), req.Reference)
	if err != nil || out.Status != provider.Approved || out.ProviderRef != first.ProviderRef {
		t.Fatalf("lookup: %+v %v", out, err)
	}
	if n := f.moneyCharged(req.Reference); n != 1 {
		t.Fatalf("lookup moved money: %d charges", n)
	}
}

func TestLookupUnknownClosesReference(t *testing.T) {
	f, base := newFake(t)
	p, _ := newProvider(t, base)
	req := chargeReq("4242424242424242", true)
	if _, err := p.Lookup(context.Background(), req.Reference); !errors.Is(err, provider.ErrUnknownReference) {
		t.Fatalf("lookup of a reference never charged: %v, want ErrUnknownReference", err)
	}
	// A charge arriving late (a request that was still in flight) is refused.
	out, err := p.Charge(context.Background(), req)
	if err != nil || out.Status != provider.Declined || out.Code != codes.TransactionCancelled {
		t.Fatalf("late charge: %+v %v, want declined 012", out, err)
	}
	if n := f.moneyCharged(req.Reference); n != 0 {
		t.Fatalf("a closed reference was charged %d times", n)
	}
	if _, err := p.Lookup(context.Background(), req.Reference); !errors.Is(err, provider.ErrUnknownReference) {
		t.Fatalf("second lookup: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, pi := range f.intents {
		if pi["status"] != "canceled" {
			t.Errorf("inert intent %s left %v, want canceled", pi["id"], pi["status"])
		}
	}
}

// TestLookupBeforeSearchCatchesUpListsIt: a charge that search does not
// show yet (or an account without search) is found by listing the intents
// created since the attempt began (lists have no search delay), never
// taken for unknown.
func TestLookupBeforeSearchCatchesUpListsIt(t *testing.T) {
	for _, india := range []bool{false, true} {
		f, base := newFake(t)
		p, _ := newProvider(t, base)
		req := chargeReq("4242424242424242", true)
		req.AttemptStart = time.Now()
		if _, err := p.Charge(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		f.searchLag, f.searchOff = true, india
		out, err := p.LookupCharge(context.Background(), provider.LookupQuery{Reference: req.Reference, Since: req.AttemptStart})
		if err != nil || out.Status != provider.Approved || out.Facts == nil || out.Facts.Reference != req.Reference {
			t.Fatalf("lookup while search lags (search off: %v): %+v %v, want the approved charge", india, out, err)
		}
	}
}

// TestSavedServerErrorIsResolvedByList: Stripe saved a 500 for the charge's
// key (docs.stripe.com/api/idempotent_requests: 500s are replayed), and it
// created no intent. The lookup's close request is refused
// (idempotency_error), search finds nothing, and a complete list of the
// intents created since the attempt began proves nothing was charged: the
// reference is unknown (never "not yet visible" for a day), and the charge
// sent again with the key gets the saved 500, never money.
func TestSavedServerErrorIsResolvedByList(t *testing.T) {
	for _, india := range []bool{false, true} {
		f, base := newFake(t)
		f.searchOff = india
		p, _ := newProvider(t, base)
		req := chargeReq("4242424242424242", true)
		req.AttemptStart = time.Now()
		f.fail500 = 1
		if _, err := p.Charge(context.Background(), req); err == nil {
			t.Fatal("a saved 500 must not be an outcome")
		}
		_, err := p.LookupCharge(context.Background(), provider.LookupQuery{Reference: req.Reference, Since: req.AttemptStart})
		if !errors.Is(err, provider.ErrUnknownReference) {
			t.Fatalf("lookup of a key with a saved 500 and no intent (search off: %v): %v, want ErrUnknownReference", india, err)
		}
		if _, err := p.Charge(context.Background(), req); err == nil {
			t.Fatal("the key's saved 500 must be replayed")
		}
		if n := f.moneyCharged(req.Reference); n != 0 {
			t.Fatalf("charged %d times", n)
		}
		if p.SavedErrorsResolved() != 1 {
			t.Fatalf("saved errors resolved: %d", p.SavedErrorsResolved())
		}
	}
}

func TestThreeDSRedirectAndCompletion(t *testing.T) {
	for _, ok := range []bool{true, false} {
		f, base := newFake(t)
		p, _ := newProvider(t, base)
		req := chargeReq("4000002760003184", true)
		out, err := p.Charge(context.Background(), req)
		if err != nil || out.Status != provider.Pending || out.NextAction == nil ||
			out.NextAction.Type != provider.ActionThreeDSRedirect || !strings.HasPrefix(out.NextAction.URL, "https://hooks.stripe.com/") {
			t.Fatalf("3-D Secure charge: %+v %v", out, err)
		}
		if got := f.params[len(f.params)-1].Get("return_url"); got != "https://pay.example/payments/threeds/redirect/1?return=/checkout/done" {
			t.Errorf("return_url = %q", got)
		}
		res := provider.ChallengeResult{Reference: req.Reference, TransactionID: req.TransactionID, ProviderRef: out.ProviderRef, Approved: true}
		if _, err := p.CompleteChallenge(context.Background(), res); !errors.Is(err, ErrChallengeOpen) {
			t.Fatalf("challenge not answered yet: %v, want ErrChallengeOpen", err)
		}
		f.finishChallenge(out.ProviderRef, ok)
		got, err := p.CompleteChallenge(context.Background(), res)
		want, code := provider.Approved, codes.Code("")
		if !ok {
			want, code = provider.Declined, codes.ThreeDSDecline
		}
		if err != nil || got.Status != want || got.Code != code {
			t.Fatalf("after challenge (ok=%v): %+v %v", ok, got, err)
		}
		// The intent read back reports its own facts, which the service
		// binds to the transaction (payments.Bind).
		if f := got.Facts; f == nil || f.Reference != req.Reference || f.PaymentRequestID != req.PaymentRequestID ||
			!f.Amount.Equal(req.Amount) || f.Unit != req.Unit {
			t.Fatalf("facts after challenge: %+v, want those of %+v", got.Facts, req)
		}
		// An intent whose reference is not the transaction's is no answer.
		other := res
		other.Reference = "ptx_999"
		if _, err := p.CompleteChallenge(context.Background(), other); !errors.Is(err, provider.ErrUnknownChallenge) {
			t.Fatalf("challenge read for another reference: %v, want ErrUnknownChallenge", err)
		}
	}
}

func TestBatchRowIsMOTOAndNeverWaitsForAChallenge(t *testing.T) {
	f, base := newFake(t)
	p, _ := newProvider(t, base)
	out, err := p.Charge(context.Background(), chargeReq("4000002760003184", false))
	if err != nil || out.Status != provider.Declined || out.Code != codes.ThreeDSDecline {
		t.Fatalf("batch 3-D Secure card: %+v %v, want declined 004", out, err)
	}
	last := f.params[len(f.params)-1]
	if last.Get("payment_method_options[card][moto]") != "true" || last.Get("error_on_requires_action") != "true" || last.Get("return_url") != "" {
		t.Fatalf("batch intent parameters: %v", last)
	}
}

func TestRefundIsIdempotentByRefundID(t *testing.T) {
	f, base := newFake(t)
	p, _ := newProvider(t, base)
	req := chargeReq("4242424242424242", true)
	out, err := p.Charge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rr := provider.RefundRequest{RefundID: "rf_1", ChargeReference: req.Reference, TransactionID: req.TransactionID,
		ProviderRef: out.ProviderRef, Amount: decimal.RequireFromString("4.25"), Unit: "EUR"}
	for i := 0; i < 2; i++ {
		ro, err := p.Refund(context.Background(), rr)
		if err != nil || ro.Status != provider.Approved || !strings.HasPrefix(ro.ProviderRef, "re_") {
			t.Fatalf("refund %d: %+v %v", i, ro, err)
		}
	}
	if got := f.refunds[out.ProviderRef]; got != 425 {
		t.Fatalf("refunded %d cents, want 425 once", got)
	}
}

func TestVoidFindsTheChargeByReference(t *testing.T) {
	f, base := newFake(t)
	p, _ := newProvider(t, base)
	req := chargeReq("4242424242424242", true)
	out, err := p.Charge(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := p.Refund(context.Background(), provider.RefundRequest{RefundID: "void_" + req.Reference, ChargeReference: req.Reference,
		Void: true, Amount: req.Amount, Unit: req.Unit})
	if err != nil || ro.Status != provider.Approved || f.refunds[out.ProviderRef] != 1050 {
		t.Fatalf("void without provider ref: %+v %v, refunded %d", ro, err, f.refunds[out.ProviderRef])
	}
}

func TestEveryCallIsBoundedByTheClientTimeout(t *testing.T) {
	f, base := newFake(t)
	f.delay = 500 * time.Millisecond
	p, _ := newProvider(t, base, func(o *Options) { o.HTTPClient.Timeout = 100 * time.Millisecond })
	start := time.Now()
	_, err := p.Charge(context.Background(), chargeReq("4242424242424242", true))
	if err == nil || time.Since(start) > 400*time.Millisecond {
		t.Fatalf("slow Stripe: err %v after %v, want an error within the timeout", err, time.Since(start))
	}
	if _, err := New(Options{SecretKey: "sk"}); err != nil {
		t.Fatal(err)
	}
	if d, _ := New(Options{SecretKey: "sk"}); d.opts.HTTPClient.Timeout != DefaultTimeout {
		t.Fatalf("default client timeout %v", d.opts.HTTPClient.Timeout)
	}
}

func TestRefusesWhatStripeCannotCharge(t *testing.T) {
	p, ct := newProvider(t, "http://127.0.0.1:1")
	for name, req := range map[string]provider.ChargeRequest{
		"crypto":           func() provider.ChargeRequest { r := chargeReq("4242424242424242", true); r.Unit = "BTC"; return r }(),
		"UPI in EUR":       {Reference: "ptx_1", Method: provider.MethodUPI, Amount: decimal.NewFromInt(1), Unit: "EUR"},
		"QR in EUR":        {Reference: "ptx_2", Method: provider.MethodQR, Amount: decimal.NewFromInt(1), Unit: "EUR"},
		"wallet, no token": {Reference: "ptx_3", Method: provider.MethodWallet, Amount: decimal.NewFromInt(1), Unit: "EUR"},
		"1.235 KWD": func() provider.ChargeRequest {
			r := chargeReq("4242424242424242", true)
			r.Unit, r.Amount = "KWD", decimal.RequireFromString("1.235")
			return r
		}(),
		"reference": func() provider.ChargeRequest {
			r := chargeReq("4242424242424242", true)
			r.Reference = "x' OR 1"
			return r
		}(),
	} {
		if _, err := p.Charge(context.Background(), req); !errors.Is(err, provider.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	if ct.n.Load() != 0 {
		t.Fatal("invalid requests reached Stripe")
	}
}
