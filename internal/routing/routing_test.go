package routing_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/routing"
)

func dec(s string) *decimal.Decimal {
	d := decimal.RequireFromString(s)
	return &d
}

func card(brand, unit, amount, country string) routing.Attempt {
	return routing.Attempt{Method: "card", Currency: unit, Amount: decimal.RequireFromString(amount), CardBrand: brand,
		Country: country, Reference: "pr_ref"}
}

func TestPickMatchesEachField(t *testing.T) {
	rules := routing.Rules{Default: "fallback", Rules: []routing.Rule{
		{Name: "upi", Methods: []string{"upi"}, Connector: "m"},
		{Name: "yen", Currencies: []string{"JPY"}, Connector: "c"},
		{Name: "big", MinAmount: dec("1000.00"), Connector: "a-min"},
		{Name: "small", MaxAmount: dec("0.99"), Connector: "a-max"},
		{Name: "amex", CardBrands: []string{"amex"}, Connector: "b"},
		{Name: "fr", Countries: []string{"FR"}, Connector: "n"},
		{Name: "range", MinAmount: dec("10"), MaxAmount: dec("20"), Currencies: []string{"EUR"}, Connector: "r"},
	}}
	upi := card("", "INR", "5", "IN")
	upi.Method = "upi"
	for _, tc := range []struct {
		name string
		a    routing.Attempt
		want string
		rule int
	}{
		{"method", upi, "m", 0},
		{"currency", card("visa", "JPY", "5000", "DE"), "c", 1},
		{"currency case", card("visa", "jpy", "5", "DE"), "c", 1},
		{"min amount inclusive", card("visa", "EUR", "1000.00", "DE"), "a-min", 2},
		{"just below min", card("visa", "EUR", "999.99", "DE"), "fallback", -1},
		{"max amount inclusive", card("visa", "EUR", "0.99", "DE"), "a-max", 3},
		{"just above max", card("visa", "EUR", "1.00", "DE"), "fallback", -1},
		{"brand", card("amex", "EUR", "5", "DE"), "b", 4},
		{"no card never matches a brand list", routing.Attempt{Method: "wallet", Currency: "EUR", Amount: decimal.NewFromInt(5), Country: "DE"}, "fallback", -1},
		{"country", card("visa", "EUR", "5", "FR"), "n", 5},
		{"no country never matches a country list", card("visa", "EUR", "5", ""), "fallback", -1},
		{"all conditions of a rule", card("visa", "EUR", "15.000", "DE"), "r", 6},
		{"one condition fails", card("visa", "USD", "15", "DE"), "fallback", -1},
		{"order: the first match decides", card("amex", "JPY", "5000", "FR"), "c", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rule := rules.Pick(tc.a)
			if got != tc.want || rule != tc.rule {
				t.Fatalf("Pick = %q (rule %d), want %q (rule %d)", got, rule, tc.want, tc.rule)
			}
		})
	}
	if got, rule := (routing.Rules{}).Pick(card("visa", "EUR", "5", "DE")); got != "" || rule != -1 {
		t.Fatalf("empty rules: %q %d, want the stage default", got, rule)
	}
	if got, _ := (routing.Rules{Rules: rules.Rules[:1]}).Pick(card("visa", "EUR", "5", "DE")); got != "" {
		t.Fatalf("no default: %q, want the stage default", got)
	}
}

// A split spreads 10,000 references by its weights (within 2 points) and
// sends every reference to the same connector each time.
func TestSplitByWeight(t *testing.T) {
	rules := routing.Rules{Rules: []routing.Rule{{Split: []routing.Weight{
		{Connector: "stripe", Weight: 70}, {Connector: "adyen", Weight: 20}, {Connector: "other", Weight: 10}}}}}
	const n = 10_000
	counts := map[string]int{}
	for i := range n {
		a := card("visa", "EUR", "10", "DE")
		a.Reference = fmt.Sprintf("tx_%d", 7_300_000_000_000+i*7919)
		got, _ := rules.Pick(a)
		if again, _ := rules.Pick(a); again != got {
			t.Fatalf("reference %s went to %s, then %s", a.Reference, got, again)
		}
		counts[got]++
	}
	for name, want := range map[string]float64{"stripe": 0.7, "adyen": 0.2, "other": 0.1} {
		if share := float64(counts[name]) / n; math.Abs(share-want) > 0.02 {
			t.Errorf("%s got %.3f of the volume, want %.2f ± 0.02 (%v)", name, share, want, counts)
		}
	}
}

func TestValidate(t *testing.T) {
	var good routing.Rules
	if err := json.Unmarshal([]byte(`{"rules": [
		{"name": "big EUR cards", "methods": ["card"], "currencies": ["EUR"], "minAmount": "500.00", "connector": "adyen"},
		{"cardBrands": ["amex"], "countries": ["US"], "maxAmount": 1000, "split": [{"connector": "stripe", "weight": 3}, {"connector": "adyen", "weight": 1}]}
	], "default": "stripe"}`), &good); err != nil {
		t.Fatal(err)
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid rules: %v", err)
	}
	if !good.Rules[0].MinAmount.Equal(decimal.RequireFromString("500")) || !good.Rules[1].MaxAmount.Equal(decimal.RequireFromString("1000")) {
		t.Fatalf("amounts: %v %v", good.Rules[0].MinAmount, good.Rules[1].MaxAmount)
	}
	bad := routing.Rules{Default: "Bad Name", Rules: []routing.Rule{
		{Methods: []string{"cash"}, Connector: "stripe"},
		{Currencies: []string{"XXX", "eur"}, Connector: "stripe"},
		{MinAmount: dec("20"), MaxAmount: dec("10"), Connector: "stripe"},
		{MinAmount: dec("-1"), Connector: "stripe"},
		{CardBrands: []string{"VISA"}, Connector: "stripe"},
		{Countries: []string{"DEU"}, Connector: "stripe"},
		{},
		{Connector: "stripe", Split: []routing.Weight{{Connector: "a", Weight: 1}, {Connector: "b", Weight: 1}}},
		{Split: []routing.Weight{{Connector: "a", Weight: 1}}},
		{Split: []routing.Weight{{Connector: "a", Weight: 0}, {Connector: "a", Weight: 1}}},
	}}
	err := bad.Validate()
	var ve *routing.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("invalid rules: %v", err)
	}
	for _, want := range []string{"rules[0].methods", "rules[1].currencies: \"XXX\"", "rules[1].currencies: \"eur\"",
		"rules[2].maxAmount", "rules[3].minAmount", "rules[4].cardBrands", "rules[5].countries", "rules[6]: needs",
		"rules[7]: has both", "rules[8].split: needs at least two", "rules[9].split[0].weight", "rules[9].split[1].connector", "default"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in %v", want, err)
		}
	}
}

func TestEqualAndConnectors(t *testing.T) {
	a := routing.Rules{Rules: []routing.Rule{{MinAmount: dec("10.0"), Connector: "adyen"},
		{Split: []routing.Weight{{Connector: "stripe", Weight: 1}, {Connector: "adyen", Weight: 1}}}}, Default: "other"}
	b := routing.Rules{Rules: []routing.Rule{{MinAmount: dec("10"), Connector: "adyen"},
		{Split: []routing.Weight{{Connector: "stripe", Weight: 1}, {Connector: "adyen", Weight: 1}}}}, Default: "other"}
	if !a.Equal(b) {
		t.Fatal("equal rules differ")
	}
	b.Default = ""
	if a.Equal(b) {
		t.Fatal("different rules equal")
	}
	if got := strings.Join(a.Connectors(), ","); got != "adyen,stripe,other" {
		t.Fatalf("connectors %s", got)
	}
}

// The failover list is the deciding route's: the matching rule's, or the
// default route's; lists are validated like connectors, at most
// MaxFailover, none twice, never the route's own connector.
func TestFailover(t *testing.T) {
	var r routing.Rules
	if err := json.Unmarshal([]byte(`{"rules": [
		{"currencies": ["EUR"], "connector": "stripe", "failover": ["adyen", "backup"]},
		{"currencies": ["USD"], "connector": "stripe"}
	], "default": "adyen", "failover": ["stripe"]}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	for cur, want := range map[string]string{"EUR": "adyen,backup", "USD": "", "GBP": "stripe"} {
		if got := strings.Join(r.FailoverOf(routing.Attempt{Method: "card", Currency: cur, Amount: decimal.NewFromInt(5)}), ","); got != want {
			t.Errorf("failover of a %s attempt: %q, want %q", cur, got, want)
		}
	}
	if got := strings.Join(r.Connectors(), ","); got != "stripe,adyen,backup" {
		t.Fatalf("connectors %s", got)
	}
	o := r
	o.Failover = nil
	if r.Equal(o) || o.Empty() {
		t.Fatal("rules differing by their failover are equal")
	}
	bad := routing.Rules{Default: "stripe", Failover: []string{"stripe"}, Rules: []routing.Rule{
		{Connector: "adyen", Failover: []string{"a", "b", "c", "d", "e"}},
		{Connector: "adyen", Failover: []string{"x", "x", "Bad"}},
	}}
	err := bad.Validate()
	for _, want := range []string{`failover[0]: "stripe" is the connector the route picks`, "rules[0].failover: 5 connectors",
		`rules[1].failover[1]: "x" appears twice`, "rules[1].failover[2]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in %v", want, err)
		}
	}
}
