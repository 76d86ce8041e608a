package payment

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

func TestCreateInputValidate(t *testing.T) {
	long := strings.Repeat("x", 101)
	cases := []struct {
		name  string
		body  string
		field string
		code  codes.Code
	}{
		{"missing amount", `{"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"negative amount", `{"amount":-5,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"zero amount", `{"amount":0,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"exponent beyond currency decimals", `{"amount":1e-3,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"exponent too large", `{"amount":1e16,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"exponent huge", `{"amount":1e999999999,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"exponent in a string", `{"amount":"1e3","unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"too many decimals", `{"amount":10.123,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"JPY decimals", `{"amount":10.5,"unit":"JPY"}`, "amount", codes.InvalidAmount},
		{"bool amount", `{"amount":true,"unit":"EUR"}`, "amount", codes.InvalidAmount},
		{"missing unit", `{"amount":10}`, "unit", codes.InvalidCurrency},
		{"unknown unit", `{"amount":10,"unit":"ABC"}`, "unit", codes.InvalidCurrency},
		{"lower-case unit", `{"amount":10,"unit":"eur"}`, "unit", codes.InvalidCurrency},
		{"long recipient", `{"amount":10,"unit":"EUR","recipientName":"` + long + `"}`, "recipientName", codes.InvalidName},
		{"long reference", `{"amount":10,"unit":"EUR","referenceId":"` + long + `"}`, "referenceId", codes.InvalidReference},
		{"control char reference", `{"amount":10,"unit":"EUR","referenceId":"a\u0007b"}`, "referenceId", codes.InvalidReference},
		{"notify url", `{"amount":10,"unit":"EUR","notifyUrl":"ftp://x.example"}`, "notifyUrl", codes.InvalidNotifyURL},
		{"success url relative", `{"amount":10,"unit":"EUR","successUrl":"/ok"}`, "successUrl", codes.InvalidSuccessURL},
		{"failure url creds", `{"amount":10,"unit":"EUR","failureUrl":"https://u:p@x.example/"}`, "failureUrl", codes.InvalidFailureURL},
		{"client email", `{"amount":10,"unit":"EUR","client":{"email":"nope"}}`, "client.email", codes.InvalidEmail},
		{"client phone", `{"amount":10,"unit":"EUR","client":{"phone":"12345"}}`, "client.phone", codes.InvalidPhone},
		{"client name", `{"amount":10,"unit":"EUR","client":{"name":"` + long + `"}}`, "client.name", codes.InvalidName},
		{"client id", `{"amount":10,"unit":"EUR","client":{"id":"` + long + `"}}`, "client.id", codes.InvalidCustomer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in CreateInput
			if err := json.Unmarshal([]byte(c.body), &in); err != nil {
				t.Fatal(err)
			}
			_, errs := in.Validate(CreateRules{DefaultRecipient: "Shop"})
			if len(errs) == 0 {
				t.Fatalf("no error, want %s on %s", c.code, c.field)
			}
			if errs[0].Field != c.field || errs[0].Code != c.code {
				t.Fatalf("got %+v, want field %s code %s", errs, c.field, c.code)
			}
		})
	}
}

// JSON numbers in exponent form (JavaScript writes 0.0000001 as 1e-7) are
// read exactly when the value fits the currency's decimals.
func TestCreateInputExponentAmounts(t *testing.T) {
	for body, want := range map[string]string{
		`{"amount":1e-7,"unit":"BTC"}`:    "0.0000001",
		`{"amount":1.25E+3,"unit":"EUR"}`: "1250",
		`{"amount":125e-2,"unit":"EUR"}`:  "1.25",
		`{"amount":1e-18,"unit":"ETH"}`:   "0.000000000000000001",
	} {
		var in CreateInput
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatal(err)
		}
		r, errs := in.Validate(CreateRules{DefaultRecipient: "Shop"})
		if len(errs) != 0 || !r.Amount.Equal(decimal.RequireFromString(want)) {
			t.Errorf("%s: %v %+v, want %s", body, r.Amount, errs, want)
		}
	}
}

func TestCreateInputValidAndHTTPRule(t *testing.T) {
	body := `{"amount":"10.50","unit":"EUR","referenceId":"ord-1","notifyUrl":"http://127.0.0.1:9/n",
		"client":{"id":"c1","name":"Ann","email":"ann@example.com","phone":"0123456789"}}`
	var in CreateInput
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	if _, errs := in.Validate(CreateRules{}); len(errs) != 1 || errs[0].Code != codes.InvalidNotifyURL {
		t.Fatalf("production rules must refuse http notify URL, got %+v", errs)
	}
	r, errs := in.Validate(CreateRules{AllowHTTP: true, DefaultRecipient: "Shop"})
	if len(errs) != 0 {
		t.Fatalf("unexpected errors %+v", errs)
	}
	if r.Amount.String() != "10.5" || r.Unit != "EUR" || r.RecipientName != "Shop" || r.Status != RequestUnpaid || r.Client.Email != "ann@example.com" {
		t.Fatalf("unexpected request %+v", r)
	}
}

func TestAmountJSONIsExact(t *testing.T) {
	var in CreateInput
	_ = json.Unmarshal([]byte(`{"amount":0.000000000000000001,"unit":"ETH"}`), &in)
	r, errs := in.Validate(CreateRules{DefaultRecipient: "x"})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	b, _ := json.Marshal(DisplayAmount(r.Amount, r.Unit))
	if string(b) != "0.000000000000000001" {
		t.Fatalf("amount rendered %s", b)
	}
	if b, _ := json.Marshal(DisplayAmount(r.Amount.Mul(decimal.NewFromInt(0)).Add(decimal.RequireFromString("25")), "EUR")); string(b) != "25.00" {
		t.Fatalf("fiat amount rendered %s, want 25.00", b)
	}
}
