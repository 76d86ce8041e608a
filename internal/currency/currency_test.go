package currency

import (
	"testing"

	"github.com/shopspring/decimal"
)

func TestLookupAndDecimals(t *testing.T) {
	cases := []struct {
		code   string
		ok     bool
		dec    int32
		crypto bool
	}{
		{"EUR", true, 2, false}, {"JPY", true, 0, false}, {"KWD", true, 3, false},
		{"BTC", true, 8, true}, {"ETH", true, 18, true}, {"USDT", true, 6, true},
		{"USDC", true, 6, true}, {"LTC", true, 8, true},
		{"eur", false, 0, false}, {"XXX", false, 0, false}, {"", false, 0, false},
	}
	for _, c := range cases {
		got, ok := Lookup(c.code)
		if ok != c.ok || (ok && (got.Decimals != c.dec || got.Crypto != c.crypto)) {
			t.Errorf("Lookup(%q) = %+v,%v; want dec %d crypto %v ok %v", c.code, got, ok, c.dec, c.crypto, c.ok)
		}
	}
}

func TestValidAmount(t *testing.T) {
	cases := []struct {
		code, amount string
		ok           bool
	}{
		{"EUR", "10.50", true}, {"EUR", "10.5", true}, {"EUR", "10.500", true}, {"EUR", "10.505", false},
		{"EUR", "0", false}, {"EUR", "-1", false}, {"JPY", "100", true}, {"JPY", "100.5", false},
		{"BTC", "0.00000001", true}, {"BTC", "0.000000001", false}, {"KWD", "1.234", true},
	}
	for _, c := range cases {
		cur, _ := Lookup(c.code)
		if got := cur.ValidAmount(decimal.RequireFromString(c.amount)); got != c.ok {
			t.Errorf("%s %s: ValidAmount = %v, want %v", c.amount, c.code, got, c.ok)
		}
	}
	eur, _ := Lookup("EUR")
	if got := eur.Format(decimal.RequireFromString("7.5")); got != "7.50" {
		t.Errorf("Format = %q", got)
	}
}
