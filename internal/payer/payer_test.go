package payer

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

func ptr[T any](v T) *T { return &v }

func validData() Data {
	return Data{
		Name:        "Asha Verma",
		Email:       "asha@example.com",
		PhoneNumber: "919876543210",
		Address:     "12 MG Road",
		City:        "Bengaluru",
		State:       "KA",
		PostalCode:  "560001",
		Country:     "IN",
	}
}

type fieldCode struct {
	Field string
	Code  codes.Code
}

func fieldCodes(errs []errkind.FieldError) []fieldCode {
	var out []fieldCode
	for _, e := range errs {
		out = append(out, fieldCode{e.Field, e.Code})
	}
	return out
}

func TestValidate(t *testing.T) {
	with := func(f func(*Data)) Data { d := validData(); f(&d); return d }
	withToken := func(f func(*Data)) Data { return with(func(d *Data) { d.Token = ptr("tok_success"); f(d) }) }

	tests := []struct {
		name string
		kind Kind
		data Data
		want []fieldCode
	}{
		{"valid wallet", Wallet, withToken(func(*Data) {}), nil},
		{"valid wallet with browserInfo", Wallet, withToken(func(d *Data) { d.BrowserInfo = &BrowserInfo{Language: "en"} }), nil},
		{"valid QR", QR, validData(), nil},
		{"valid UPI", UPI, with(func(d *Data) { d.UPIID = "asha.verma@okbank" }), nil},
		{"valid other", Other, validData(), nil},
		{"other ignores token", Other, withToken(func(*Data) {}), nil},
		{"UPI ignores token", UPI, withToken(func(d *Data) { d.UPIID = "asha@upi" }), nil},
		{"optional flags", QR, with(func(d *Data) { d.Is3DS = ptr(true); d.IsSandbox = ptr(false); d.IPAddress = ptr("203.0.113.9") }), nil},
		{"limits in runes", QR, with(func(d *Data) {
			d.Name = strings.Repeat("ä", 100)
			d.Address = strings.Repeat("日", 100)
			d.City = strings.Repeat("ß", 50)
		}), nil},

		{"missing name", QR, with(func(d *Data) { d.Name = "" }), []fieldCode{{"name", codes.InvalidName}}},
		{"blank name", QR, with(func(d *Data) { d.Name = " \t " }), []fieldCode{{"name", codes.InvalidName}}},
		{"name 101", QR, with(func(d *Data) { d.Name = strings.Repeat("ä", 101) }), []fieldCode{{"name", codes.InvalidName}}},
		{"name with newline", QR, with(func(d *Data) { d.Name = "A\nB" }), []fieldCode{{"name", codes.InvalidName}}},
		{"name invalid utf-8", QR, with(func(d *Data) { d.Name = "A\xffB" }), []fieldCode{{"name", codes.InvalidName}}},
		{"missing email", QR, with(func(d *Data) { d.Email = "" }), []fieldCode{{"email", codes.InvalidEmail}}},
		{"bad email", QR, with(func(d *Data) { d.Email = "asha.example.com" }), []fieldCode{{"email", codes.InvalidEmail}}},
		{"email 101", QR, with(func(d *Data) { d.Email = strings.Repeat("a", 89) + "@example.com" }), []fieldCode{{"email", codes.InvalidEmail}}},
		{"phone short", QR, with(func(d *Data) { d.PhoneNumber = "123456789" }), []fieldCode{{"phoneNumber", codes.InvalidPhone}}},
		{"phone missing", QR, with(func(d *Data) { d.PhoneNumber = "" }), []fieldCode{{"phoneNumber", codes.InvalidPhone}}},
		{"address missing", QR, with(func(d *Data) { d.Address = "" }), []fieldCode{{"address", codes.InvalidAddress}}},
		{"address 101", QR, with(func(d *Data) { d.Address = strings.Repeat("a", 101) }), []fieldCode{{"address", codes.InvalidAddress}}},
		{"city missing", QR, with(func(d *Data) { d.City = "" }), []fieldCode{{"city", codes.InvalidCity}}},
		{"city 51", QR, with(func(d *Data) { d.City = strings.Repeat("ß", 51) }), []fieldCode{{"city", codes.InvalidCity}}},
		{"state missing", QR, with(func(d *Data) { d.State = "" }), []fieldCode{{"state", codes.InvalidState}}},
		{"state long is fine", QR, with(func(d *Data) { d.State = strings.Repeat("s", 500) }), nil},
		{"postal missing", QR, with(func(d *Data) { d.PostalCode = "" }), []fieldCode{{"postalCode", codes.InvalidPostalCode}}},
		{"postal 11", QR, with(func(d *Data) { d.PostalCode = "12345678901" }), []fieldCode{{"postalCode", codes.InvalidPostalCode}}},
		{"country lower", QR, with(func(d *Data) { d.Country = "in" }), []fieldCode{{"country", codes.InvalidCountry}}},
		{"country unassigned", QR, with(func(d *Data) { d.Country = "ZZ" }), []fieldCode{{"country", codes.InvalidCountry}}},
		{"country alpha-3", QR, with(func(d *Data) { d.Country = "IND" }), []fieldCode{{"country", codes.InvalidCountry}}},
		{"country missing", QR, with(func(d *Data) { d.Country = "" }), []fieldCode{{"country", codes.InvalidCountry}}},

		{"wallet without token", Wallet, validData(), []fieldCode{{"token", codes.InvalidToken}}},
		{"wallet empty token", Wallet, with(func(d *Data) { d.Token = ptr("") }), []fieldCode{{"token", codes.InvalidToken}}},
		{"QR with token", QR, withToken(func(*Data) {}), []fieldCode{{"token", codes.InvalidToken}}},
		{"QR with empty token", QR, with(func(d *Data) { d.Token = ptr("") }), []fieldCode{{"token", codes.InvalidToken}}},
		{"QR with browserInfo", QR, with(func(d *Data) { d.BrowserInfo = &BrowserInfo{} }), []fieldCode{{"browserInfo", ""}}},
		{"UPI with browserInfo", UPI, with(func(d *Data) { d.UPIID = "ab@upi"; d.BrowserInfo = &BrowserInfo{} }), []fieldCode{{"browserInfo", ""}}},
		{"other with browserInfo", Other, with(func(d *Data) { d.BrowserInfo = &BrowserInfo{} }), []fieldCode{{"browserInfo", ""}}},
		{"UPI without upiId", UPI, validData(), []fieldCode{{"upiId", codes.InvalidUPI}}},
		{"UPI bad upiId", UPI, with(func(d *Data) { d.UPIID = "not a vpa" }), []fieldCode{{"upiId", codes.InvalidUPI}}},
		{"wallet ignores upiId", Wallet, withToken(func(d *Data) { d.UPIID = "not a vpa" }), nil},

		{"all wrong, spec table order", QR, Data{Token: ptr("x"), BrowserInfo: &BrowserInfo{}}, []fieldCode{
			{"name", codes.InvalidName},
			{"email", codes.InvalidEmail},
			{"phoneNumber", codes.InvalidPhone},
			{"address", codes.InvalidAddress},
			{"city", codes.InvalidCity},
			{"state", codes.InvalidState},
			{"postalCode", codes.InvalidPostalCode},
			{"country", codes.InvalidCountry},
			{"token", codes.InvalidToken},
			{"browserInfo", ""},
		}},
		{"UPI all wrong", UPI, Data{}, []fieldCode{
			{"name", codes.InvalidName},
			{"email", codes.InvalidEmail},
			{"phoneNumber", codes.InvalidPhone},
			{"address", codes.InvalidAddress},
			{"city", codes.InvalidCity},
			{"state", codes.InvalidState},
			{"postalCode", codes.InvalidPostalCode},
			{"country", codes.InvalidCountry},
			{"upiId", codes.InvalidUPI},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.data.Validate(tt.kind)
			if got := fieldCodes(errs); !slices.Equal(got, tt.want) {
				t.Fatalf("Validate(%s) = %+v, want %+v", tt.kind, errs, tt.want)
			}
			for _, e := range errs {
				if e.Detail == "" {
					t.Errorf("%s: empty detail", e.Field)
				}
			}
		})
	}
}

func TestValidateDetails(t *testing.T) {
	d := validData()
	d.Token = ptr("tok")
	errs := d.Validate(QR)
	if len(errs) != 1 || errs[0].Detail != "token is not accepted by the QR operation" {
		t.Errorf("QR token error = %+v", errs)
	}
}

// The spec example: a call with a missing name is a 400 naming "name".
func TestMissingNameFromJSON(t *testing.T) {
	var d Data
	body := `{"email":"a@example.com","phoneNumber":"1234567890","address":"x","city":"y","state":"z","postalCode":"1","country":"US","token":"t"}`
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	errs := d.Validate(Wallet)
	if len(errs) != 1 || errs[0].Field != "name" || errs[0].Code != codes.InvalidName {
		t.Errorf("errors = %+v", errs)
	}
}

func TestJSONNames(t *testing.T) {
	body := `{"name":"n","email":"e","phoneNumber":"p","address":"a","city":"c","state":"s","postalCode":"pc",
	"country":"US","token":"t","is3ds":true,"isSandbox":false,"ipAddress":null,"upiId":"u@upi",
	"browserInfo":{"acceptHeader":"ah","colorDepth":"24","ip":"1.2.3.4","javaEnabled":false,
	"javascriptEnabled":true,"language":"en","screenHeight":"900","screenWidth":"1440",
	"timezone":"-60","userAgent":"ua"}}`
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var d Data
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	want := Data{
		Name: "n", Email: "e", PhoneNumber: "p", Address: "a", City: "c", State: "s", PostalCode: "pc",
		Country: "US", Token: ptr("t"), Is3DS: ptr(true), IsSandbox: ptr(false), UPIID: "u@upi",
		BrowserInfo: &BrowserInfo{
			AcceptHeader: "ah", ColorDepth: "24", IP: "1.2.3.4", JavaEnabled: ptr(false),
			JavascriptEnabled: ptr(true), Language: "en", ScreenHeight: "900", ScreenWidth: "1440",
			Timezone: "-60", UserAgent: "ua",
		},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("decoded %+v\nwant    %+v", d, want)
	}

	// Absent token stays absent when re-encoded (the QR body has none).
	b, _ := json.Marshal(validData())
	if strings.Contains(string(b), "token") || strings.Contains(string(b), "browserInfo") {
		t.Errorf("QR body carries token or browserInfo: %s", b)
	}
}

func TestValidEmail(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"a@example.com", true},
		{"first.last+tag@sub.example.co.uk", true},
		{"o'brien@example.ie", true},
		{"user@bücher.de", true},
		{strings.Repeat("a", 88) + "@example.com", true},  // 100
		{strings.Repeat("a", 89) + "@example.com", false}, // 101
		{"", false},
		{"a", false},
		{"a@", false},
		{"@example.com", false},
		{"a@b", false},
		{"a@example.", false},
		{"a@.example.com", false},
		{"a@-example.com", false},
		{"a@exa_mple.com", false},
		{"a@[192.0.2.1]", false},
		{"a..b@example.com", false},
		{"a b@example.com", false},
		{" a@example.com", false},
		{"a@example.com ", false},
		{"Asha <a@example.com>", false},
		{"<a@example.com>", false},
		{"a@example.com (home)", false},
		{"a@b@example.com", false},
		{`"a b"@example.com`, false},
		{"a@example.com\n", false},
	}
	for _, tt := range tests {
		if got := ValidEmail(tt.in); got != tt.want {
			t.Errorf("ValidEmail(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidPhone(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"1234567890", true},
		{"12345678901234", true},
		{"123456789", false},
		{"123456789012345", false},
		{"+123456789012", false},
		{"123 456 7890", false},
		{"123-456-7890", false},
		{"١٢٣٤٥٦٧٨٩٠", false}, // Arabic-Indic digits
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidPhone(tt.in); got != tt.want {
			t.Errorf("ValidPhone(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidPostalCode(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"560001", true},
		{"SW1A 1AA", true},
		{"12345-6789", true},
		{"1", true},
		{"12345678901", false},
		{"", false},
		{"   ", false},
		{"1234;5", false},
		{"=1+1", false},
		{"12\n34", false},
		{"ÄÖ123", false},
	}
	for _, tt := range tests {
		if got := ValidPostalCode(tt.in); got != tt.want {
			t.Errorf("ValidPostalCode(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidCountry(t *testing.T) {
	if n := len(iso3166); n != 249 {
		t.Errorf("ISO 3166-1 list has %d codes, want 249", n)
	}
	tests := []struct {
		in   string
		want bool
	}{
		{"US", true}, {"IN", true}, {"GB", true}, {"DE", true}, {"AX", true}, {"SS", true},
		{"CW", true}, {"BQ", true}, {"ZW", true}, {"AD", true},
		{"us", false}, {"Us", false}, {"UK", false}, {"EU", false}, {"XK", false},
		{"ZZ", false}, {"AN", false}, {"USA", false}, {"U", false}, {"", false}, {"U1", false},
	}
	for _, tt := range tests {
		if got := ValidCountry(tt.in); got != tt.want {
			t.Errorf("ValidCountry(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidUPI(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"success@upi", true},
		{"asha.verma-1_x@okhdfcbank", true},
		{"9876543210@ybl", true},
		{"ab@up", true},
		{strings.Repeat("a", 256) + "@" + "b" + strings.Repeat("c", 64), true},
		{strings.Repeat("a", 257) + "@upi", false},
		{"ab@b" + strings.Repeat("c", 65), false},
		{"a@upi", false},
		{"ab@u", false},
		{"ab@1upi", false},
		{"ab@up.i", false},
		{"ab@@upi", false},
		{"ab", false},
		{"a b@upi", false},
		{"", false},
		{"ab@upi\n", false},
	}
	for _, tt := range tests {
		if got := ValidUPI(tt.in); got != tt.want {
			t.Errorf("ValidUPI(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if l := len(strings.Repeat("a", 256) + "@" + "b" + strings.Repeat("c", 64)); l != MaxUPILen {
		t.Errorf("MaxUPILen = %d, longest valid UPI id has %d", MaxUPILen, l)
	}
}

func TestTextValidators(t *testing.T) {
	tests := []struct {
		name string
		fn   func(string) bool
		max  int
	}{
		{"name", ValidName, MaxNameLen},
		{"address", ValidAddress, MaxAddressLen},
		{"city", ValidCity, MaxCityLen},
	}
	for _, tt := range tests {
		if !tt.fn(strings.Repeat("é", tt.max)) {
			t.Errorf("%s: %d runes rejected", tt.name, tt.max)
		}
		if tt.fn(strings.Repeat("é", tt.max+1)) {
			t.Errorf("%s: %d runes accepted", tt.name, tt.max+1)
		}
		for _, bad := range []string{"", "  ", "a\tb", "a\x00", "a\u0085b"} {
			if tt.fn(bad) {
				t.Errorf("%s: %q accepted", tt.name, bad)
			}
		}
	}
	if !ValidState("X") || ValidState("") || ValidState(" ") {
		t.Error("ValidState: min length 1")
	}
}
