package merchant

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func TestAPIKeys(t *testing.T) {
	k1, k2 := NewAPIKey(true), NewAPIKey(false)
	if !strings.HasPrefix(k1, "prk_test_") || !strings.HasPrefix(k2, "prk_live_") || len(k1) != 49 {
		t.Fatalf("unexpected keys %q %q", k1, k2)
	}
	if k1 == NewAPIKey(true) {
		t.Fatal("keys repeat")
	}
	h := HashAPIKey(k1)
	if strings.Contains(h, k1[9:]) || len(h) != 64 {
		t.Fatal("hash leaks key or has wrong size")
	}
	if !KeyMatches(k1, h) || KeyMatches(k2, h) || KeyMatches(k1+"x", h) {
		t.Fatal("KeyMatches wrong")
	}
}

func TestValidate(t *testing.T) {
	ok := Merchant{Name: "Shop", Sandbox: true, Methods: []int{1, 30, 44}, AllowedOrigins: []string{"http://127.0.0.1:8080"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	neg := decimal.NewFromInt(-1)
	bad := []Merchant{
		{Name: ""},
		{Name: "x", NotifyURL: "http://a.example"}, // http refused in production
		{Name: "x", Methods: []int{2}},
		{Name: "x", Methods: []int{1}}, // sandbox selector in production
		{Name: "x", AllowedOrigins: []string{"https://a.example/path"}},
		{Name: "x", Limits: Limits{Currencies: []string{"ABC"}}},
		{Name: "x", Limits: Limits{MinAmount: &neg}},
		{Name: "x", NotificationFormat: "xml"},
	}
	for i, m := range bad {
		if err := m.Validate(); err == nil {
			t.Errorf("case %d: expected error for %+v", i, m)
		}
	}
	if o, _ := NormalizeOrigin("HTTPS://Shop.Example:8443/", false); o != "https://shop.example:8443" {
		t.Fatalf("NormalizeOrigin = %q", o)
	}
}
