package card

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"4111111111111111", "4111111111111111"},
		{"4111 1111 1111 1111", "4111111111111111"},
		{"4111-1111-1111-1111", "4111111111111111"},
		{" 4111 - 1111 1111-1111 ", "4111111111111111"},
		{"4111\t1111", "4111\t1111"}, // only spaces and dashes are removed
		{"4111.1111", "4111.1111"},
		{"4111\u00a01111", "4111\u00a01111"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLuhn(t *testing.T) {
	tests := []struct {
		digits string
		want   bool
	}{
		{"4111111111111111", true},
		{"4111111111111112", false},
		{"378282246310005", true},       // amex, 15 digits
		{"5555555555554444", true},      // mastercard
		{"6011111111111117", true},      // discover
		{"4000000000000002", true},      // sandbox declined card
		{"4000008400001629", true},      // sandbox 3DS failed card
		{"4222222222222", true},         // 13 digits
		{"000000000000", true},          // 12 digits, sum 0: the lower bound
		{"00000000000", false},          // 11 digits
		{"4242424242424242420", false},  // 19 digits, bad check digit
		{"4000000000000000006", true},   // 19 digits
		{"00000000000000000000", false}, // 20 digits
		{"4111 1111 1111 1111", false},  // not normalized
		{"411111111111111a", false},
		{"", false},
		{"４１１１１１１１１１１１１１１１", false}, // full-width digits
	}
	for _, tt := range tests {
		if got := Luhn(tt.digits); got != tt.want {
			t.Errorf("Luhn(%q) = %v, want %v", tt.digits, got, tt.want)
		}
	}
}

func TestDetectBrand(t *testing.T) {
	tests := []struct {
		digits string
		want   Brand
	}{
		{"4111111111111111", Visa},
		{"4", Visa},
		{"5100000000000000", Mastercard},
		{"5555555555554444", Mastercard},
		{"5500000000000004", Mastercard},
		{"5600000000000000", Maestro},
		{"2221000000000009", Mastercard},
		{"2720990000000000", Mastercard},
		{"2720999999999999", Mastercard},
		{"2220999999999999", Unknown},
		{"2721000000000000", Unknown},
		{"340000000000009", Amex},
		{"378282246310005", Amex},
		{"350000000000000", Unknown},
		{"6011111111111117", Discover},
		{"6221260000000000", Discover},
		{"6229250000000000", Discover},
		{"6440000000000000", Discover},
		{"6500000000000000", Discover},
		{"6221250000000000", UnionPay},
		{"6229260000000000", UnionPay},
		{"6200000000000000", UnionPay},
		{"3528000000000000", JCB},
		{"3589000000000000", JCB},
		{"3527000000000000", Unknown},
		{"30000000000004", Diners},
		{"30500000000000", Diners},
		{"30600000000000", Unknown},
		{"30950000000000", Diners},
		{"36000000000000", Diners},
		{"38000000000000", Diners},
		{"39000000000000", Diners},
		{"5018000000000000", Maestro},
		{"6304000000000000", Maestro},
		{"6390000000000000", Maestro},
		{"6759000000000000", Maestro},
		{"1234567890123456", Unknown},
		{"9999999999999999", Unknown},
		{"", Unknown},
		{"4111 1111", Unknown},
		{"x4111", Unknown},
	}
	for _, tt := range tests {
		if got := DetectBrand(tt.digits); got != tt.want {
			t.Errorf("DetectBrand(%q) = %q, want %q", tt.digits, got, tt.want)
		}
	}
}

func TestParseExpiry(t *testing.T) {
	tests := []struct {
		in      string
		want    Expiry
		wantErr bool
	}{
		{"01/30", Expiry{1, 2030}, false},
		{"12/25", Expiry{12, 2025}, false},
		{"09/00", Expiry{9, 2000}, false},
		{"00/30", Expiry{}, true},
		{"13/30", Expiry{}, true},
		{"1/30", Expiry{}, true},
		{"01/2030", Expiry{}, true},
		{"0130", Expiry{}, true},
		{"01-30", Expiry{}, true},
		{" 01/30", Expiry{}, true},
		{"01/30 ", Expiry{}, true},
		{"ab/cd", Expiry{}, true},
		{"+1/30", Expiry{}, true},
		{"", Expiry{}, true},
	}
	for _, tt := range tests {
		got, err := ParseExpiry(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseExpiry(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestExpiryExpired(t *testing.T) {
	tests := []struct {
		name string
		exp  Expiry
		now  time.Time
		want bool
	}{
		{"first day of month", Expiry{3, 2027}, time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), false},
		{"last instant of month", Expiry{3, 2027}, time.Date(2027, 3, 31, 23, 59, 59, 999999999, time.UTC), false},
		{"first instant of next month", Expiry{3, 2027}, time.Date(2027, 4, 1, 0, 0, 0, 0, time.UTC), true},
		{"earlier year", Expiry{3, 2027}, time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC), false},
		{"later year", Expiry{3, 2027}, time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"december rolls into january", Expiry{12, 2026}, time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), false},
		{"december expired in january", Expiry{12, 2026}, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"february leap year", Expiry{2, 2028}, time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), false},
		// 2027-04-01 01:00 in +02:00 is still 2027-03-31 23:00 UTC.
		{"evaluated in UTC", Expiry{3, 2027}, time.Date(2027, 4, 1, 1, 0, 0, 0, time.FixedZone("CEST", 2*3600)), false},
		{"evaluated in UTC, west", Expiry{3, 2027}, time.Date(2027, 3, 31, 20, 0, 0, 0, time.FixedZone("EDT", -4*3600)), true},
	}
	for _, tt := range tests {
		if got := tt.exp.Expired(tt.now); got != tt.want {
			t.Errorf("%s: %v.Expired(%v) = %v, want %v", tt.name, tt.exp, tt.now, got, tt.want)
		}
	}
}

func TestExpiryString(t *testing.T) {
	if got := (Expiry{Month: 3, Year: 2031}).String(); got != "03/31" {
		t.Errorf("String = %q, want 03/31", got)
	}
}

func TestValidCVV(t *testing.T) {
	tests := []struct {
		cvv   string
		brand Brand
		want  bool
	}{
		{"123", Visa, true},
		{"000", Mastercard, true},
		{"123", Unknown, true},
		{"1234", Visa, false},
		{"12", Visa, false},
		{"1234", Amex, true},
		{"123", Amex, false},
		{"12a", Visa, false},
		{" 123", Visa, false},
		{"", Visa, false},
		{"１２３", Visa, false},
	}
	for _, tt := range tests {
		if got := ValidCVV(tt.cvv, tt.brand); got != tt.want {
			t.Errorf("ValidCVV(%q, %s) = %v, want %v", tt.cvv, tt.brand, got, tt.want)
		}
	}
}

func TestMask(t *testing.T) {
	tests := []struct {
		digits string
		want   Masked
		str    string
	}{
		{"4111111111111111", Masked{Visa, "411111", "1111"}, "visa 411111******1111"},
		{"378282246310005", Masked{Amex, "378282", "0005"}, "amex 378282******0005"},
		{"5555555555554444", Masked{Mastercard, "555555", "4444"}, "mastercard 555555******4444"},
		{"9999999999999995", Masked{Unknown, "999999", "9995"}, "unknown 999999******9995"},
		{"41111111111", Masked{Brand: Unknown}, "unknown"}, // too short to reveal anything
		{"4111 1111 1111 1111", Masked{Brand: Unknown}, "unknown"},
		{"", Masked{Brand: Unknown}, "unknown"},
	}
	for _, tt := range tests {
		got := Mask(tt.digits)
		if got != tt.want {
			t.Errorf("Mask(%q) = %+v, want %+v", tt.digits, got, tt.want)
		}
		if got.String() != tt.str {
			t.Errorf("Mask(%q).String() = %q, want %q", tt.digits, got.String(), tt.str)
		}
	}
}

func TestMaskedJSON(t *testing.T) {
	b, err := json.Marshal(Mask("4111111111111111"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"brand":"visa","bin":"411111","last4":"1111"}`; string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
}

var validNow = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

func TestInputValidate(t *testing.T) {
	valid := Input{Holder: "Jane Doe", Number: "4111 1111 1111 1111", Expiry: "12/30", CVV: "123"}
	with := func(f func(*Input)) Input { in := valid; f(&in); return in }

	tests := []struct {
		name string
		in   Input
		want []errkind.FieldError // only Field and Code are compared
	}{
		{"valid", valid, nil},
		{"dashes", with(func(in *Input) { in.Number = "4111-1111-1111-1111" }), nil},
		{"amex with 4-digit cvc", with(func(in *Input) { in.Number = "3782 822463 10005"; in.CVV = "1234" }), nil},
		{"unknown brand is accepted", with(func(in *Input) { in.Number = "9999999999999995" }), nil},
		{"expires this month", with(func(in *Input) { in.Expiry = "06/26" }), nil},
		{"holder 100 runes", with(func(in *Input) { in.Holder = strings.Repeat("é", 100) }), nil},

		{"holder empty", with(func(in *Input) { in.Holder = "" }), fe("holderName", codes.InvalidName)},
		{"holder blank", with(func(in *Input) { in.Holder = "   " }), fe("holderName", codes.InvalidName)},
		{"holder 101 runes", with(func(in *Input) { in.Holder = strings.Repeat("é", 101) }), fe("holderName", codes.InvalidName)},
		{"number empty", with(func(in *Input) { in.Number = "" }), fe("number", codes.InvalidCardNumber)},
		{"number letters", with(func(in *Input) { in.Number = "4111 1111 1111 111x" }), fe("number", codes.InvalidCardNumber)},
		{"number dots", with(func(in *Input) { in.Number = "4111.1111.1111.1111" }), fe("number", codes.InvalidCardNumber)},
		{"number luhn", with(func(in *Input) { in.Number = "4111111111111112" }), fe("number", codes.InvalidCardNumber)},
		{"number too short", with(func(in *Input) { in.Number = "42424242426" }), fe("number", codes.InvalidCardNumber)},
		{"expiry format", with(func(in *Input) { in.Expiry = "12/2030" }), fe("expiry", codes.InvalidCardExpiration)},
		{"expiry month", with(func(in *Input) { in.Expiry = "13/30" }), fe("expiry", codes.InvalidCardExpiration)},
		{"expired last month", with(func(in *Input) { in.Expiry = "05/26" }), fe("expiry", codes.InvalidCardExpiration)},
		{"cvc missing", with(func(in *Input) { in.CVV = "" }), fe("cvc", codes.InvalidCardCVV)},
		{"cvc 4 digits on visa", with(func(in *Input) { in.CVV = "1234" }), fe("cvc", codes.InvalidCardCVV)},
		{"cvc 3 digits on amex", with(func(in *Input) { in.Number = "378282246310005" }), fe("cvc", codes.InvalidCardCVV)},
		{"cvc letters", with(func(in *Input) { in.CVV = "12a" }), fe("cvc", codes.InvalidCardCVV)},
		// A mistyped number must not also condemn a plausible CVV.
		{"bad number, 4-digit cvc", with(func(in *Input) { in.Number = "4111111111111112"; in.CVV = "1234" }), fe("number", codes.InvalidCardNumber)},
		{"bad number, bad cvc", with(func(in *Input) { in.Number = "1"; in.CVV = "12" }),
			append(fe("number", codes.InvalidCardNumber), fe("cvc", codes.InvalidCardCVV)...)},
		{"everything wrong, in form order", Input{Number: "abc", Expiry: "x", CVV: "x"},
			[]errkind.FieldError{
				{Field: "holderName", Code: codes.InvalidName},
				{Field: "number", Code: codes.InvalidCardNumber},
				{Field: "expiry", Code: codes.InvalidCardExpiration},
				{Field: "cvc", Code: codes.InvalidCardCVV},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, errs := tt.in.Validate(validNow)
			if got := stripDetail(errs); !slices.Equal(got, tt.want) {
				t.Fatalf("errors = %+v, want %+v", errs, tt.want)
			}
			for _, e := range errs {
				if e.Detail == "" {
					t.Errorf("field error %s has no detail", e.Field)
				}
			}
			if len(errs) > 0 && d != (Details{}) {
				t.Errorf("Details must be zero on error, got %+v", d.Masked)
			}
			if len(errs) == 0 && (d.Digits == "" || d.Masked.Last4 == "") {
				t.Errorf("Details not filled: %+v", d.Masked)
			}
		})
	}
}

func TestInputValidateDetails(t *testing.T) {
	d, errs := Input{Holder: "A", Number: "3782-822463-10005", Expiry: "02/29", CVV: "1234"}.Validate(validNow)
	if errs != nil {
		t.Fatal(errs)
	}
	want := Details{
		Digits: "378282246310005",
		Brand:  Amex,
		Expiry: Expiry{2, 2029},
		Masked: Masked{Amex, "378282", "0005"},
	}
	if d != want {
		t.Errorf("Details = %v %v %q %v, want %v %v %q %v",
			d.Masked, d.Expiry, d.Brand, d.Digits == want.Digits, want.Masked, want.Expiry, want.Brand, true)
	}
}

func fe(field string, code codes.Code) []errkind.FieldError {
	return []errkind.FieldError{{Field: field, Code: code}}
}

func stripDetail(errs []errkind.FieldError) []errkind.FieldError {
	if errs == nil {
		return nil
	}
	out := make([]errkind.FieldError, len(errs))
	for i, e := range errs {
		out[i] = errkind.FieldError{Field: e.Field, Code: e.Code}
	}
	return out
}

// Secrets that must never appear in any printed form of Input or Details.
const (
	secretNumber = "4111111111111111"
	secretMiddle = "111111111" // any run that only the full number contains
	secretCVV    = "987"
	secretHolder = "Zelda Quixote"
)

func TestInputNeverPrintsSecrets(t *testing.T) {
	in := Input{Holder: secretHolder, Number: "4111 1111 1111 1111", Expiry: "12/30", CVV: secretCVV}
	d, errs := Input{Holder: secretHolder, Number: secretNumber, Expiry: "12/30", CVV: "123"}.Validate(validNow)
	if errs != nil {
		t.Fatal(errs)
	}
	wrapped := struct {
		Card    Input
		Details *Details
	}{in, &d}

	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		outputs = append(outputs,
			fmt.Sprintf(verb, in), fmt.Sprintf(verb, &in),
			fmt.Sprintf(verb, d), fmt.Sprintf(verb, &d))
	}
	outputs = append(outputs, fmt.Sprintf("%+v", wrapped), fmt.Sprintf("%#v", wrapped),
		fmt.Sprint(in, d), fmt.Sprintln(in, d), in.String(), d.String())

	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("pay", "card", in, "details", d, "ptr", &in)
		log.Info("pay", slog.Any("card", in), slog.Group("g", slog.Any("details", d)))
		outputs = append(outputs, buf.String())
	}

	for _, v := range []any{in, &in, d, &d, wrapped} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(b))
	}

	for _, out := range outputs {
		for _, secret := range []string{secretMiddle, "1111 1111 1111", secretCVV, secretHolder} {
			if strings.Contains(out, secret) {
				t.Errorf("output leaks %q: %s", secret, out)
			}
		}
	}

	// Redaction must still say which card it was.
	if got, want := fmt.Sprint(in), "card.Input{visa 411111******1111 cvv:present}"; got != want {
		t.Errorf("Sprint(in) = %q, want %q", got, want)
	}
	if got, want := fmt.Sprintf("%v", d), "visa 411111******1111"; got != want {
		t.Errorf("Sprintf(d) = %q, want %q", got, want)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "card", in)
	if !strings.Contains(buf.String(), `"card":{"card":{"brand":"visa","bin":"411111","last4":"1111"},"cvvPresent":true}`) {
		t.Errorf("slog JSON = %s", buf.String())
	}
}
