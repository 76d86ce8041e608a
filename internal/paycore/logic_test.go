package paycore

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

func dec(s string) *decimal.Decimal { d := decimal.RequireFromString(s); return &d }

func TestStaticLimitCode(t *testing.T) {
	l := merchant.Limits{MinAmount: dec("5"), MaxAmount: dec("100"), Currencies: []string{"EUR"}, Countries: []string{"DE"}}
	for _, c := range []struct {
		amount, unit, country string
		want                  codes.Code
	}{
		{"10", "EUR", "DE", ""},
		{"10", "EUR", "", ""}, // no payer country: not checked
		{"5", "EUR", "DE", ""},
		{"100", "EUR", "DE", ""},
		{"4.99", "EUR", "DE", codes.AmountBelowMinimum},
		{"100.01", "EUR", "DE", codes.AmountAboveMaximum},
		{"10", "USD", "DE", codes.CurrencyNotAllowed},
		{"10", "EUR", "FR", codes.CountryNotAllowed},
		{"1000", "USD", "FR", codes.CurrencyNotAllowed}, // currency first
	} {
		if got := StaticLimitCode(l, decimal.RequireFromString(c.amount), c.unit, c.country); got != c.want {
			t.Errorf("%+v: %q, want %q", c, got, c.want)
		}
	}
	zero := merchant.Limits{MinAmount: dec("0"), MaxAmount: dec("0")}
	if got := StaticLimitCode(zero, decimal.RequireFromString("1e9"), "BTC", "US"); got != "" {
		t.Errorf("zero limits mean none: %q", got)
	}
}

func TestExceededCode(t *testing.T) {
	caps := payment.LimitCaps{DailyCount: 3, MonthlyCount: 10, DailyAmount: dec("100"), MonthlyAmount: dec("500")}
	ten := decimal.RequireFromString("10")
	for _, c := range []struct {
		u    payment.LimitUsage
		want codes.Code
	}{
		{payment.LimitUsage{}, ""},
		{payment.LimitUsage{DailyCount: 2, MonthlyCount: 9, DailyAmount: decimal.RequireFromString("90"), MonthlyAmount: decimal.RequireFromString("490")}, ""},
		{payment.LimitUsage{DailyCount: 3}, codes.DailyCountExceeded},
		{payment.LimitUsage{MonthlyCount: 10}, codes.MonthlyCountExceeded},
		{payment.LimitUsage{DailyAmount: decimal.RequireFromString("90.01")}, codes.DailyAmountExceeded},
		{payment.LimitUsage{MonthlyAmount: decimal.RequireFromString("490.01")}, codes.MonthlyAmountExceeded},
		{payment.LimitUsage{DailyCount: 3, MonthlyAmount: decimal.RequireFromString("500")}, codes.DailyCountExceeded},
	} {
		if got := ExceededCode(c.u, caps, ten); got != c.want {
			t.Errorf("%+v: %q, want %q", c.u, got, c.want)
		}
	}
	if got := Caps(merchant.Limits{DailyAmount: dec("0")}); got.Any() {
		t.Errorf("zero amount cap must mean none: %+v", got)
	}
}

func TestMethodOf(t *testing.T) {
	for _, c := range []struct {
		n    int
		card bool
		want provider.Method
		ok   bool
	}{
		{1, true, provider.MethodCard, true}, {1, false, provider.MethodAlternative, true},
		{44, false, provider.MethodWallet, true}, {55, false, provider.MethodWallet, true},
		{48, false, provider.MethodWallet, true}, {59, false, provider.MethodWallet, true},
		{30, false, provider.MethodUPI, true}, {31, false, provider.MethodUPI, true},
		{27, false, provider.MethodAlternative, true}, {43, false, provider.MethodAlternative, true},
		{2, false, "", false}, {60, false, "", false}, {0, false, "", false},
	} {
		m, ok := MethodOf(c.n, c.card)
		if m != c.want || ok != c.ok {
			t.Errorf("MethodOf(%d, %v) = %q %v", c.n, c.card, m, ok)
		}
	}
	s := New(Deps{Sandbox: true})
	sbx := &merchant.Merchant{Sandbox: true, Methods: []int{1, 27}}
	live := &merchant.Merchant{Methods: []int{1, 27}}
	if !s.SelectorEnabled(sbx, 1) || s.SelectorEnabled(live, 1) || !s.SelectorEnabled(live, 27) || s.SelectorEnabled(sbx, 30) {
		t.Error("SelectorEnabled")
	}
}

func TestReturnTarget(t *testing.T) {
	req := &payment.Request{SuccessURL: "https://shop.example/ok", FailureURL: "https://shop.example/ko"}
	ok := &payment.Transaction{ID: 7, Status: payment.TxApproved}
	ko := &payment.Transaction{ID: 7, Status: payment.TxDeclined}
	for _, c := range []struct {
		ret  string
		req  *payment.Request
		tx   *payment.Transaction
		want string
	}{
		{"", req, ok, "https://shop.example/ok"},
		{"", req, ko, "https://shop.example/ko"},
		{"", &payment.Request{}, ok, ""},
		{"", nil, ok, ""},
		{"/checkout/done?a=1", req, ok, "/checkout/done?a=1&transactionId=7&transactionStatusId=1"},
		{"https://shop.example/ko", req, ok, "https://shop.example/ko"},
		{"https://evil.example/", req, ok, "https://shop.example/ok"},
		{"//evil.example/x", req, ko, "https://shop.example/ko"},
		{"/\\evil.example", nil, ok, ""},
		{"javascript:alert(1)", nil, ok, ""},
	} {
		if got := ReturnTarget(c.ret, c.req, c.tx); got != c.want {
			t.Errorf("ReturnTarget(%q) = %q, want %q", c.ret, got, c.want)
		}
	}
}

func TestIDsAndNumbers(t *testing.T) {
	seen := map[string]bool{}
	re := regexp.MustCompile(`^TX[A-Z2-7]{16}$`)
	for i := 0; i < 1000; i++ {
		n := NewTransactionNumber()
		if !re.MatchString(n) || seen[n] {
			t.Fatalf("number %q (duplicate %v)", n, seen[n])
		}
		seen[n] = true
	}
	for s, want := range map[string]int64{"3ds_42": 42, "42": 42, "3ds_": 0, "3ds_-1": 0, "3ds_042": 0, "x": 0} {
		if got, _ := ParseThreeDSID(s); got != want {
			t.Errorf("ParseThreeDSID(%q) = %d", s, got)
		}
	}
	if ThreeDSID(42) != "3ds_42" {
		t.Error("ThreeDSID")
	}
}

func TestChallengeURL(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := New(Deps{ThreeDSKey: []byte("k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1k1"), Now: func() time.Time { return now }, ChallengeWindow: time.Minute})
	u := s.ChallengeURL("https://api.example/", 42, "/checkout/x")
	if !strings.HasPrefix(u, "https://api.example/payments/threeds/redirect/42?exp=1800000060&return=%2Fcheckout%2Fx&sig=") {
		t.Fatalf("%s", u)
	}
	sigv := u[strings.LastIndex(u, "=")+1:]
	if err := s.VerifyChallengeURL(42, "1800000060", sigv); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyChallengeURL(43, "1800000060", sigv); err != ErrLinkInvalid {
		t.Errorf("other transaction: %v", err)
	}
	if err := s.VerifyChallengeURL(42, "1800000061", sigv); err != ErrLinkInvalid {
		t.Errorf("extended expiry: %v", err)
	}
	now = now.Add(61 * time.Second)
	if err := s.VerifyChallengeURL(42, "1800000060", sigv); err != ErrLinkExpired {
		t.Errorf("expired: %v", err)
	}
}
