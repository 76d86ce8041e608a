package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

const txID = 4242

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testSandbox() *Sandbox {
	return New(Options{
		ChallengeURL:     func(id int64) string { return "https://sbx.test/3ds/" + strconv.FormatInt(id, 10) },
		QRDelay:          3 * time.Millisecond,
		UPIDelay:         2 * time.Millisecond,
		UPICollectWindow: 7 * time.Millisecond,
	})
}

func cardRequest(t *testing.T, number string) provider.ChargeRequest {
	t.Helper()
	cvv := "123"
	if card.DetectBrand(card.Normalize(number)) == card.Amex {
		cvv = "1234"
	}
	d, errs := card.Input{Holder: "Test", Number: number, Expiry: "12/30", CVV: cvv}.Validate(now)
	if errs != nil {
		t.Fatalf("test card %s is not valid: %+v", number, errs)
	}
	// Keep the spaces: the sandbox must find the number either way.
	d.Digits = number
	r := baseRequest(provider.MethodCard)
	r.Card, r.CVV = &d, cvv
	return r
}

var refs atomic.Int64

// baseRequest has a fresh reference: every test charge is a new attempt.
func baseRequest(m provider.Method) provider.ChargeRequest {
	return provider.ChargeRequest{
		Reference:     "ptx_test_" + strconv.FormatInt(refs.Add(1), 10),
		TransactionID: txID, PaymentRequestID: 1, Amount: decimal.RequireFromString("12.34"), Unit: "INR",
		Method: m, CardholderPresent: true, Email: "payer@example.com",
	}
}

// requestFor builds the charge a TestCase describes.
func requestFor(t *testing.T, tc TestCase) provider.ChargeRequest {
	t.Helper()
	var r provider.ChargeRequest
	switch tc.Method {
	case provider.MethodCard:
		r = cardRequest(t, tc.Input)
	case provider.MethodWallet:
		r = baseRequest(tc.Method)
		r.WalletToken = tc.Input
	case provider.MethodUPI:
		r = baseRequest(tc.Method)
		r.UPIID = tc.Input
	default:
		r = baseRequest(tc.Method)
		r.Email = tc.Input
	}
	r.CardholderPresent = !tc.Batch
	return r
}

func charge(t *testing.T, s *Sandbox, r provider.ChargeRequest) provider.Outcome {
	t.Helper()
	o, err := s.Charge(context.Background(), r)
	if err != nil {
		t.Fatalf("Charge(%v): %v", r, err)
	}
	return o
}

// TestDesignTable checks docs/sandbox.md's tables row by row, written out independently of
// the sandbox's own tables.
func TestDesignTable(t *testing.T) {
	type final struct {
		status provider.Status
		code   codes.Code
	}
	tests := []struct {
		card, upi string
		first     final
		after     *final // async result, nil when final now
		challenge map[bool]final
	}{
		{card: "4111 1111 1111 1111", first: final{1, ""}},
		{card: "4000 0000 0000 0002", first: final{2, "999"}},
		{card: "4000 0000 0000 0119", first: final{2, "001"}},
		{card: "4000 0000 0000 0127", first: final{2, "006"}},
		{card: "4000 0000 0000 0069", first: final{2, "002"}},
		{card: "4000 0000 0000 3220", first: final{3, ""}, challenge: map[bool]final{true: {1, ""}, false: {2, "004"}}},
		{card: "4000 0084 0000 1629", first: final{3, ""}, challenge: map[bool]final{true: {2, "004"}, false: {2, "004"}}},
		{card: "4000 0000 0000 3055", first: final{2, "013"}},
		{upi: "success@upi", first: final{3, ""}, after: &final{1, ""}},
		{upi: "failure@upi", first: final{3, ""}, after: &final{2, "999"}},
		{upi: "insufficient@upi", first: final{3, ""}, after: &final{2, "005"}},
		{upi: "timeout@upi", first: final{3, ""}, after: &final{2, "013"}},
		{upi: "invalid@upi", first: final{2, "038"}},
	}
	s := testSandbox()
	for _, tt := range tests {
		name := tt.card + tt.upi
		t.Run(name, func(t *testing.T) {
			var req provider.ChargeRequest
			if tt.card != "" {
				req = cardRequest(t, tt.card)
			} else {
				req = baseRequest(provider.MethodUPI)
				req.UPIID = tt.upi
			}
			o := charge(t, s, req)
			if (final{o.Status, o.Code}) != tt.first {
				t.Fatalf("first = %v/%q, want %v/%q", o.Status, o.Code, tt.first.status, tt.first.code)
			}
			if o.Message == "" || o.ProviderRef == "" {
				t.Errorf("outcome lacks message or reference: %+v", o)
			}
			switch {
			case tt.after != nil:
				if o.Async == nil || (final{o.Async.Status, o.Async.Code}) != *tt.after {
					t.Fatalf("async = %+v, want %+v", o.Async, *tt.after)
				}
				if o.NextAction == nil || o.NextAction.Type != "upi_collect" || o.NextAction.Reference != o.ProviderRef {
					t.Errorf("next action = %+v", o.NextAction)
				}
			case tt.challenge != nil:
				if o.Async != nil {
					t.Errorf("a challenge must not schedule a callback: %+v", o.Async)
				}
				if o.NextAction == nil || o.NextAction.Type != "threeds_redirect" || o.NextAction.URL != "https://sbx.test/3ds/4242" {
					t.Fatalf("next action = %+v", o.NextAction)
				}
				for _, approve := range []bool{true, false} {
					again := req
					again.Reference += fmt.Sprint(approve) // a new attempt per answer
					charge(t, s, again)
					res, err := s.CompleteChallenge(context.Background(), provider.ChallengeResult{
						Reference: again.Reference, TransactionID: txID, ProviderRef: o.ProviderRef, Approved: approve})
					if err != nil {
						t.Fatal(err)
					}
					if got := (final{res.Status, res.Code}); got != tt.challenge[approve] {
						t.Errorf("challenge approve=%v: %v/%q, want %+v", approve, res.Status, res.Code, tt.challenge[approve])
					}
				}
			default:
				if o.Async != nil || o.NextAction != nil {
					t.Errorf("final outcome with follow-up: %+v", o)
				}
			}
		})
	}
}

// TestTestData drives every published case through the sandbox the way an
// integration test would, so TestData cannot promise what Charge won't do.
func TestTestData(t *testing.T) {
	s := testSandbox()
	seen := map[provider.Method]int{}
	for _, tc := range TestData() {
		seen[tc.Method]++
		t.Run(string(tc.Method)+" "+tc.Input+" "+string(tc.Answer), func(t *testing.T) {
			if tc.Class == "" {
				t.Error("case without outcome class")
			}
			if tc.Status == provider.Approved && tc.Code != "" || tc.Status == provider.Declined && !tc.Code.Known() {
				t.Errorf("final %v with code %q", tc.Status, tc.Code)
			}
			req := requestFor(t, tc)
			o := charge(t, s, req)
			if o.Status != tc.First {
				t.Fatalf("first status = %v, want %v", o.Status, tc.First)
			}
			var got provider.Outcome
			switch tc.Flow {
			case Immediate:
				if o.Async != nil || o.NextAction != nil {
					t.Fatalf("immediate case with follow-up: %+v", o)
				}
				got = o
			case Callback:
				if o.Async == nil {
					t.Fatal("callback case without Async")
				}
				got = provider.Final(o.Async.Status, o.Async.Code, o.ProviderRef)
			case Challenge:
				if tc.Answer != AnswerApprove && tc.Answer != AnswerFail {
					t.Fatalf("challenge case without answer")
				}
				var err error
				got, err = s.CompleteChallenge(context.Background(), provider.ChallengeResult{
					Reference: req.Reference, TransactionID: txID, ProviderRef: o.ProviderRef, Approved: tc.Answer == AnswerApprove})
				if err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("unknown flow %q", tc.Flow)
			}
			if got.Status != tc.Status || got.Code != tc.Code {
				t.Errorf("final = %v/%q, want %v/%q", got.Status, got.Code, tc.Status, tc.Code)
			}
		})
	}
	for _, m := range []provider.Method{provider.MethodCard, provider.MethodWallet, provider.MethodUPI, provider.MethodQR, provider.MethodAlternative} {
		if seen[m] == 0 {
			t.Errorf("TestData has no case for method %s", m)
		}
	}
}

// Every outcome class of the spec must be reachable (spec "Environments").
func TestEveryOutcomeClassIsPublished(t *testing.T) {
	classes := map[string]bool{}
	for _, tc := range TestData() {
		classes[tc.Class] = true
	}
	for _, c := range []string{
		"success", "declined", "processing error", "incorrect security code", "expired card",
		"3-D Secure required", "3-D Secure failed", "3-D Secure unavailable",
		"UPI success", "UPI failed", "UPI insufficient funds", "UPI timeout", "UPI invalid identifier",
	} {
		if !classes[c] {
			t.Errorf("outcome class %q has no test input", c)
		}
	}
}

func TestCards(t *testing.T) {
	s := testSandbox()
	tests := []struct {
		name   string
		number string
		status provider.Status
		code   codes.Code
	}{
		{"dashes", "4000-0000-0000-0002", provider.Declined, "999"},
		{"no separators", "4000000000000119", provider.Declined, "001"},
		{"other visa approves", "4242 4242 4242 4242", provider.Approved, ""},
		{"amex approves", "3782 822463 10005", provider.Approved, ""},
		{"unknown brand approves", "9999 9999 9999 9995", provider.Approved, ""},
	}
	for _, tt := range tests {
		o := charge(t, s, cardRequest(t, tt.number))
		if o.Status != tt.status || o.Code != tt.code {
			t.Errorf("%s: %v/%q, want %v/%q", tt.name, o.Status, o.Code, tt.status, tt.code)
		}
		if o.Status == provider.Declined && o.Message != tt.code.Message() {
			t.Errorf("%s: message %q, want the spec's %q", tt.name, o.Message, tt.code.Message())
		}
	}
}

func TestNoCardholderDeclinesChallenges(t *testing.T) {
	s := testSandbox()
	for _, in := range []struct {
		m     provider.Method
		input string
	}{
		{provider.MethodCard, "4000 0000 0000 3220"},
		{provider.MethodCard, "4000 0084 0000 1629"},
		{provider.MethodWallet, "tok_3ds_required"},
	} {
		r := requestFor(t, TestCase{Method: in.m, Input: in.input, Batch: true})
		o := charge(t, s, r)
		if o.Status != provider.Declined || o.Code != codes.ThreeDSDecline || o.NextAction != nil || o.Async != nil {
			t.Errorf("%s without cardholder: %+v, want declined 004 with no next action", in.input, o)
		}
	}
	// A card that needs no challenge is unaffected by the missing cardholder.
	r := cardRequest(t, "4111 1111 1111 1111")
	r.CardholderPresent = false
	if o := charge(t, s, r); o.Status != provider.Approved {
		t.Errorf("batch success card: %v", o.Status)
	}
}

func TestCompleteChallengeRejectsForeignReferences(t *testing.T) {
	s := testSandbox()
	req := cardRequest(t, "4000 0000 0000 3220")
	charge(t, s, req)
	plain := cardRequest(t, "4111 1111 1111 1111")
	charge(t, s, plain)
	for _, res := range []provider.ChallengeResult{
		{Reference: req.Reference + "0", TransactionID: txID, Approved: true}, // never charged
		{Reference: plain.Reference, TransactionID: txID, Approved: true},     // not a challenge
		{Reference: "", TransactionID: txID, Approved: true},
	} {
		if _, err := s.CompleteChallenge(context.Background(), res); !errors.Is(err, provider.ErrUnknownChallenge) {
			t.Errorf("CompleteChallenge(%+v) error = %v, want ErrUnknownChallenge", res, err)
		}
	}
}

func TestDefaultChallengeURL(t *testing.T) {
	o := charge(t, New(Options{}), cardRequest(t, "4000 0000 0000 3220"))
	if o.NextAction == nil || o.NextAction.URL != "/payments/threeds/redirect/4242" {
		t.Errorf("next action = %+v", o.NextAction)
	}
}

func TestWallets(t *testing.T) {
	s := testSandbox()
	tests := []struct {
		token  string
		status provider.Status
		code   codes.Code
	}{
		{"tok_success", provider.Approved, ""},
		{" tok_success ", provider.Approved, ""},
		{"tok_declined", provider.Declined, "999"},
		{"tok_insufficient_funds", provider.Declined, "005"},
		{"tok_processing_error", provider.Declined, "001"},
		{"tok_3ds_required", provider.Pending, ""},
		{"tok_3ds_unavailable", provider.Declined, "013"},
		{"TOK_SUCCESS", provider.Declined, "048"}, // tokens are case-sensitive
		{"anything-else", provider.Declined, "048"},
		{"", provider.Declined, "048"},
		// Google Pay's TEST environment: a constant payment token, approved.
		{`{"signature":"MEQCIB…","protocolVersion":"ECv2","signedMessage":"{\"encryptedMessage\":\"…\"}"}`, provider.Approved, ""},
		{`{"protocolVersion":"ECv2"}`, provider.Declined, "048"}, // no signed message
	}
	for _, tt := range tests {
		r := baseRequest(provider.MethodWallet)
		r.WalletToken = tt.token
		o := charge(t, s, r)
		if o.Status != tt.status || o.Code != tt.code {
			t.Errorf("%q: %v/%q, want %v/%q", tt.token, o.Status, o.Code, tt.status, tt.code)
		}
	}
}

func TestUPI(t *testing.T) {
	s := testSandbox()
	tests := []struct {
		id    string
		first provider.Status
		code  codes.Code // first code when declined now, else async code
		async provider.Status
		after time.Duration
	}{
		{"success@upi", provider.Pending, "", provider.Approved, 2 * time.Millisecond},
		{"Success@UPI", provider.Pending, "", provider.Approved, 2 * time.Millisecond},
		{"asha@okbank", provider.Pending, "", provider.Approved, 2 * time.Millisecond},
		{"failure@upi", provider.Pending, "999", provider.Declined, 2 * time.Millisecond},
		{"insufficient@upi", provider.Pending, "005", provider.Declined, 2 * time.Millisecond},
		{"timeout@upi", provider.Pending, "013", provider.Declined, 7 * time.Millisecond},
		{"INVALID@upi", provider.Declined, "038", 0, 0},
		{"not-a-vpa", provider.Declined, "038", 0, 0},
		{"", provider.Declined, "038", 0, 0},
	}
	for _, tt := range tests {
		r := baseRequest(provider.MethodUPI)
		r.UPIID = tt.id
		o := charge(t, s, r)
		if o.Status != tt.first {
			t.Errorf("%q: first %v, want %v", tt.id, o.Status, tt.first)
			continue
		}
		if tt.first == provider.Declined {
			if o.Code != tt.code || o.Async != nil || o.NextAction != nil {
				t.Errorf("%q: %+v, want immediate decline %s", tt.id, o, tt.code)
			}
			continue
		}
		want := provider.AsyncResult{After: tt.after, Status: tt.async, Code: tt.code}
		if o.Code != "" || o.Async == nil || *o.Async != want {
			t.Errorf("%q: code %q async %+v, want %+v", tt.id, o.Code, o.Async, want)
		}
	}
}

func TestQR(t *testing.T) {
	s := testSandbox()
	tests := []struct {
		email  string
		status provider.Status
		code   codes.Code
	}{
		{"payer@example.com", provider.Approved, ""},
		{"decline@example.com", provider.Declined, "999"},
		{" Decline@Example.COM ", provider.Declined, "999"},
		{"declined@example.com", provider.Approved, ""},
	}
	for _, tt := range tests {
		r := baseRequest(provider.MethodQR)
		r.Email = tt.email
		o := charge(t, s, r)
		if o.Status != provider.Pending || o.Code != "" {
			t.Errorf("%q: first %v/%q, want pending", tt.email, o.Status, o.Code)
		}
		want := provider.AsyncResult{After: 3 * time.Millisecond, Status: tt.status, Code: tt.code}
		if o.Async == nil || *o.Async != want {
			t.Errorf("%q: async %+v, want %+v", tt.email, o.Async, want)
		}
		na := o.NextAction
		if na == nil || na.Type != "qr" || na.Reference != o.ProviderRef || na.URL != "" {
			t.Fatalf("%q: next action %+v", tt.email, na)
		}
		u, err := url.Parse(na.QRPayload)
		if err != nil || u.Scheme != "payreq-sandbox" {
			t.Fatalf("payload %q: %v", na.QRPayload, err)
		}
		q := u.Query()
		if q.Get("amount") != "12.34" || q.Get("unit") != "INR" || q.Get("ref") != o.ProviderRef {
			t.Errorf("payload %q lacks amount, unit or reference", na.QRPayload)
		}
	}
}

func TestAlternative(t *testing.T) {
	s := testSandbox()
	for _, sel := range []int{27, 43} {
		r := baseRequest(provider.MethodAlternative)
		r.Selector = sel
		if o := charge(t, s, r); o.Status != provider.Approved || o.Async != nil || o.NextAction != nil {
			t.Errorf("selector %d: %+v, want approved now", sel, o)
		}
		r.Email, r.Reference = "DECLINE@example.com", r.Reference+"-2"
		if o := charge(t, s, r); o.Status != provider.Declined || o.Code != "999" {
			t.Errorf("selector %d decline e-mail: %v/%q", sel, o.Status, o.Code)
		}
	}
}

func TestDefaultDelays(t *testing.T) {
	s := New(Options{})
	r := baseRequest(provider.MethodUPI)
	r.UPIID = "timeout@upi"
	if o := charge(t, s, r); o.Async.After != DefaultUPICollectWindow {
		t.Errorf("collect window = %v", o.Async.After)
	}
	r.UPIID, r.Reference = "success@upi", r.Reference+"-2"
	if o := charge(t, s, r); o.Async.After != DefaultUPIDelay {
		t.Errorf("UPI delay = %v", o.Async.After)
	}
	r = baseRequest(provider.MethodQR)
	if o := charge(t, s, r); o.Async.After != DefaultQRDelay {
		t.Errorf("QR delay = %v", o.Async.After)
	}
}

func TestChargeRejectsMisuse(t *testing.T) {
	s := testSandbox()
	zero := cardRequest(t, "4111 1111 1111 1111")
	zero.Amount = decimal.Zero
	negative := baseRequest(provider.MethodQR)
	negative.Amount = decimal.RequireFromString("-1")
	tests := map[string]provider.ChargeRequest{
		"card without details": baseRequest(provider.MethodCard),
		"unknown method":       baseRequest("cash"),
		"zero amount":          zero,
		"negative amount":      negative,
	}
	for name, r := range tests {
		if _, err := s.Charge(context.Background(), r); !errors.Is(err, provider.ErrInvalidRequest) {
			t.Errorf("%s: error = %v, want ErrInvalidRequest", name, err)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	s := testSandbox()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Charge(ctx, cardRequest(t, "4111 1111 1111 1111")); !errors.Is(err, context.Canceled) {
		t.Errorf("Charge: %v", err)
	}
	if _, err := s.CompleteChallenge(ctx, provider.ChallengeResult{}); !errors.Is(err, context.Canceled) {
		t.Errorf("CompleteChallenge: %v", err)
	}
	if _, err := s.Refund(ctx, provider.RefundRequest{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Refund: %v", err)
	}
}

func TestRefund(t *testing.T) {
	s := testSandbox()
	out, err := s.Refund(context.Background(), provider.RefundRequest{
		RefundID: "rf1", TransactionID: txID, ProviderRef: "sbx_card_4242", Amount: decimal.RequireFromString("1.00"), Unit: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != provider.Approved || out.Code != "" || out.ProviderRef != "sbx_rf_4242_rf1" || out.Message == "" {
		t.Errorf("refund = %+v", out)
	}
	if _, err := s.Refund(context.Background(), provider.RefundRequest{TransactionID: txID}); !errors.Is(err, provider.ErrInvalidRequest) {
		t.Errorf("zero refund: %v", err)
	}
}

// The ledger makes the sandbox behave like an acquirer with idempotency
// keys: a reference is charged once, whatever the calls that follow say.
func TestLedgerChargesAReferenceOnce(t *testing.T) {
	mem := NewMemoryLedger()
	clock := now
	s := New(Options{Ledger: mem, UPIDelay: time.Minute, Now: func() time.Time { return clock }})
	ctx := context.Background()
	r := cardRequest(t, "4111 1111 1111 1111")
	first := charge(t, s, r)
	again := r
	again.Card = cardRequest(t, "4000 0000 0000 0002").Card // a retry cannot change the outcome
	if o := charge(t, s, again); o.Status != first.Status || o.ProviderRef != first.ProviderRef {
		t.Fatalf("second charge of %s = %+v, want the first outcome %+v", r.Reference, o, first)
	}
	if n := len(mem.Entries()); n != 1 {
		t.Fatalf("ledger has %d entries after two charges of one reference, want 1", n)
	}
	if o, err := s.Lookup(ctx, r.Reference); err != nil || o.Status != provider.Approved {
		t.Fatalf("Lookup = %+v, %v", o, err)
	}

	// A reference never charged is closed by Lookup: a late charge moves no money.
	late := cardRequest(t, "4111 1111 1111 1111")
	if _, err := s.Lookup(ctx, late.Reference); !errors.Is(err, provider.ErrUnknownReference) {
		t.Fatalf("Lookup of an unknown reference: %v", err)
	}
	if o := charge(t, s, late); o.Status != provider.Declined || o.Code != codes.TransactionCancelled {
		t.Fatalf("charge after Lookup closed the reference = %v/%q, want declined 012", o.Status, o.Code)
	}

	// An asynchronous result becomes final at the ledger once it is due.
	upi := baseRequest(provider.MethodUPI)
	upi.UPIID = "insufficient@upi"
	if o := charge(t, s, upi); o.Status != provider.Pending {
		t.Fatalf("UPI first = %v", o.Status)
	}
	if o, _ := s.Lookup(ctx, upi.Reference); o.Status != provider.Pending {
		t.Fatalf("UPI before due = %v, want pending", o.Status)
	}
	clock = clock.Add(time.Minute)
	if o, _ := s.Lookup(ctx, upi.Reference); o.Status != provider.Declined || o.Code != codes.InsufficientFunds {
		t.Fatalf("UPI after due = %v/%q, want declined 005", o.Status, o.Code)
	}

	// A refund id refunds once; a void marks its charge.
	rf := provider.RefundRequest{RefundID: "void_" + r.Reference, TransactionID: txID, ChargeReference: r.Reference,
		Void: true, Amount: decimal.RequireFromString("12.34"), Unit: "INR"}
	a, err := s.Refund(ctx, rf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Refund(ctx, rf)
	if err != nil || b.ProviderRef != a.ProviderRef {
		t.Fatalf("second refund = %+v, %v; want the first %+v", b, err, a)
	}
	refunds, voided := 0, false
	for _, e := range mem.Entries() {
		if e.Kind == ledger.KindRefund {
			refunds++
		}
		if e.Reference == r.Reference {
			voided = e.Voided
		}
	}
	if refunds != 1 || !voided {
		t.Fatalf("refund entries = %d, charge voided = %v; want 1, true", refunds, voided)
	}
}

// AbandonChallenge closes an open challenge as declined 013 and books it:
// a later answer gets the booked decline, Lookup agrees, and a challenge
// answered first keeps its answer. Charges without a challenge are refused.
func TestAbandonChallenge(t *testing.T) {
	s := New(Options{})
	ctx := context.Background()
	r := baseRequest(provider.MethodWallet)
	r.WalletToken = "tok_3ds_required"
	if o := charge(t, s, r); o.Status != provider.Pending {
		t.Fatalf("charge: %+v", o)
	}
	o, err := s.AbandonChallenge(ctx, r.Reference)
	if err != nil || o.Status != provider.Declined || o.Code != codes.AuthenticationTimeout {
		t.Fatalf("abandon: %+v %v", o, err)
	}
	late, err := s.CompleteChallenge(ctx, provider.ChallengeResult{Reference: r.Reference, TransactionID: r.TransactionID, Approved: true})
	if err != nil || late.Status != provider.Declined || late.Code != codes.AuthenticationTimeout {
		t.Fatalf("approve after abandon: %+v %v", late, err)
	}
	if l, err := s.Lookup(ctx, r.Reference); err != nil || l.Status != provider.Declined {
		t.Fatalf("lookup after abandon: %+v %v", l, err)
	}

	answered := baseRequest(provider.MethodWallet)
	answered.WalletToken = "tok_3ds_required"
	charge(t, s, answered)
	if _, err := s.CompleteChallenge(ctx, provider.ChallengeResult{Reference: answered.Reference, TransactionID: answered.TransactionID, Approved: true}); err != nil {
		t.Fatal(err)
	}
	if o, err := s.AbandonChallenge(ctx, answered.Reference); err != nil || o.Status != provider.Approved {
		t.Fatalf("abandon after approve: %+v %v", o, err)
	}

	plain := baseRequest(provider.MethodWallet)
	plain.WalletToken = "tok_success"
	charge(t, s, plain)
	if _, err := s.AbandonChallenge(ctx, plain.Reference); !errors.Is(err, provider.ErrUnknownChallenge) {
		t.Fatalf("abandon without a challenge: %v", err)
	}
	if _, err := s.AbandonChallenge(ctx, "ptx_never"); !errors.Is(err, provider.ErrUnknownChallenge) {
		t.Fatalf("abandon of an unknown reference: %v", err)
	}
}
