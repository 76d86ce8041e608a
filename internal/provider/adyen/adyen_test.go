package adyen_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/adyen"
	"github.com/payreq/payreq/internal/testing/adyentest"
)

// adyenSample is the notification item, key and signature of the HMAC test
// in Adyen's own Ruby library (Adyen/adyen-ruby-api-library,
// spec/utils/hmac_validator_spec.rb, and the same values in its Python
// library's tests): the signature is Adyen's, not computed here.
var adyenSample = adyen.NotificationItem{
	PSPReference: "7914073381342284", MerchantAccountCode: "TestMerchant",
	MerchantReference: "TestPayment-1407325143704", EventCode: "AUTHORISATION", Success: "true",
	AdditionalData: map[string]string{"hmacSignature": "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="},
}

const adyenSampleKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

func init() {
	adyenSample.Amount.Currency, adyenSample.Amount.Value = "EUR", 1130
}

func TestHMACAcceptsAdyensSampleAndRefusesTampering(t *testing.T) {
	if got := adyenSample.SigningString(); got != "7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true" {
		t.Fatalf("signing string = %q", got)
	}
	if !adyen.Verify(adyenSample, []string{"00", adyenSampleKey}) {
		t.Fatal("Adyen's own sample refused")
	}
	tampered := []func(*adyen.NotificationItem){
		func(it *adyen.NotificationItem) { it.Amount.Value = 1131 },
		func(it *adyen.NotificationItem) { it.Success = "false" },
		func(it *adyen.NotificationItem) { it.MerchantReference += "x" },
		func(it *adyen.NotificationItem) { it.EventCode = "REFUND" },
		func(it *adyen.NotificationItem) { it.OriginalReference = "1" },
		func(it *adyen.NotificationItem) {
			it.AdditionalData = map[string]string{"hmacSignature": "doqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="}
		},
		func(it *adyen.NotificationItem) { it.AdditionalData = nil },
	}
	for i, change := range tampered {
		it := adyenSample
		change(&it)
		if adyen.Verify(it, []string{adyenSampleKey}) {
			t.Errorf("tampered item %d accepted", i)
		}
	}
	if adyen.Verify(adyenSample, []string{strings.Replace(adyenSampleKey, "4", "5", 1)}) {
		t.Error("another key accepted")
	}
}

// TestHMACAcceptsTheGoLibrarysVector: the second vector, from Adyen's Go
// library (Adyen/adyen-go-api-library, src/hmacvalidator/hmacvalidator_test.go
// at fed7311e): a non-empty originalReference, 1000 EUR, event "EVENT".
func TestHMACAcceptsTheGoLibrarysVector(t *testing.T) {
	it := adyen.NotificationItem{PSPReference: "pspReference", OriginalReference: "originalReference",
		MerchantAccountCode: "merchantAccount", MerchantReference: "reference", EventCode: "EVENT", Success: "true",
		AdditionalData: map[string]string{"hmacSignature": "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="}}
	it.Amount.Currency, it.Amount.Value = "EUR", 1000
	const key = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	if got := it.SigningString(); got != "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true" {
		t.Fatalf("signing string = %q", got)
	}
	if !adyen.Verify(it, []string{key}) {
		t.Fatal("the Go library's vector refused")
	}
	if adyen.Verify(it, []string{adyenSampleKey}) {
		t.Fatal("accepted under another key")
	}
}

func TestWebhookRefusesABatchWithOneForgedItem(t *testing.T) {
	good := adyenSample
	forged := adyenSample
	forged.Amount.Value = 1
	body := `{"live":"false","notificationItems":[` + itemJSON(good) + `,` + itemJSON(forged) + `]}`
	if _, err := (adyen.Webhook{HMACKeys: []string{adyenSampleKey}}).Read([]byte(body)); !errors.Is(err, adyen.ErrSignature) {
		t.Fatalf("Read(batch with a forged item) = %v, want ErrSignature", err)
	}
	evs, err := adyen.Webhook{HMACKeys: []string{adyenSampleKey}}.Read([]byte(`{"live":"false","notificationItems":[` + itemJSON(good) + `]}`))
	if err != nil || len(evs) != 1 || evs[0].Type != "AUTHORISATION" {
		t.Fatalf("Read(Adyen's sample) = %+v, %v", evs, err)
	}
	// Its reference is not one of the service's: acknowledged, bound to nothing.
	if !evs[0].Ignored || evs[0].Payment != nil {
		t.Fatalf("event for a foreign reference = %+v; want ignored", evs[0])
	}
}

func TestWebhookWithoutKeysRefusesEverything(t *testing.T) {
	body := `{"live":"false","notificationItems":[` + itemJSON(adyenSample) + `]}`
	if _, err := (adyen.Webhook{}).Read([]byte(body)); !errors.Is(err, adyen.ErrSignature) {
		t.Fatalf("Read without a key = %v, want ErrSignature", err)
	}
}

// TestErrorsCarryNoCardData: an error of Adyen's that echoes the request
// (its message) is reported by code and PSP reference only, so the card
// number, security code and API key never reach a log.
func TestErrorsCarryNoCardData(t *testing.T) {
	const number, cvc, apiKey = "4111111111111111", "737", "AQE_secret_key"
	for _, status := range []int{http.StatusUnprocessableEntity, http.StatusForbidden, http.StatusInternalServerError} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"status":%d,"errorCode":"999","errorType":"internal","message":%q,"pspReference":"PSP1"}`, status, string(b)+r.Header.Get("X-API-Key"))
		}))
		p, err := adyen.New(adyen.Options{APIKey: apiKey, MerchantAccount: "m", BaseURL: srv.URL, Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Charge(context.Background(), provider.ChargeRequest{Reference: "ptx_1", Amount: decimal.NewFromInt(1), Unit: "EUR",
			Method: provider.MethodCard, Card: &card.Details{Digits: number, Expiry: card.Expiry{Month: 1, Year: 2030}}, CVV: cvc,
			ReturnURL: "https://x.example/"})
		srv.Close()
		if err == nil {
			t.Fatalf("HTTP %d: no error", status)
		}
		if msg := err.Error(); strings.Contains(msg, number) || strings.Contains(msg, `"`+cvc+`"`) || strings.Contains(msg, apiKey) {
			t.Fatalf("HTTP %d: error carries card data or the key: %s", status, msg)
		}
	}
}

func itemJSON(it adyen.NotificationItem) string {
	return `{"NotificationRequestItem":{"additionalData":{"hmacSignature":"` + it.AdditionalData["hmacSignature"] +
		`"},"amount":{"currency":"` + it.Amount.Currency + `","value":` + decimal.NewFromInt(it.Amount.Value).String() +
		`},"eventCode":"` + it.EventCode + `","merchantAccountCode":"` + it.MerchantAccountCode +
		`","merchantReference":"` + it.MerchantReference + `","pspReference":"` + it.PSPReference + `","success":"` + it.Success + `"}}`
}

// TestCurrencyTableExceptions: the currencies where Adyen's minor units are
// not ISO 4217's (its "Currency codes" page marks CLP, CVE, IDR and ISK),
// three-decimal ones, and a currency outside the table.
func TestCurrencyTableExceptions(t *testing.T) {
	cases := []struct {
		amount, unit string
		value        int64
		code         codes.Code // "" when accepted
		isoDecimals  int32      // -1: not compared
	}{
		{"1000", "CLP", 100000, "", 0},   // 2 at Adyen, 0 in ISO 4217
		{"1000.5", "CLP", 100050, "", 0}, // Adyen takes the centavos
		{"500", "ISK", 50000, "", 0},     // 2 at Adyen, 0 in ISO 4217
		{"1250", "CVE", 1250, "", 2},     // 0 at Adyen, 2 in ISO 4217
		{"12.50", "CVE", 0, "026", 2},    // never rounded
		{"15000", "IDR", 15000, "", 2},   // 0 at Adyen, 2 in ISO 4217
		{"15000.01", "IDR", 0, "026", 2}, //
		{"1.234", "BHD", 1234, "", -1},   // three decimals
		{"1.2345", "KWD", 0, "026", -1},  //
		{"100", "JPY", 100, "", -1},      //
		{"10.99", "EUR", 1099, "", -1},   //
		{"0", "EUR", 0, "026", -1},       //
		{"1e13", "EUR", 0, "026", -1},    // above the largest amount sent
		{"10", "BTN", 0, "020", -1},      // not on the table: refused, not guessed
		{"10", "usd", 1000, "", -1},      // case
		{"0.001", "TND", 1, "", -1},      //
		{"10.001", "USD", 0, "026", -1},  //
		{"99.99", "XOF", 0, "026", -1},   //
		{"1", "CNH", 100, "", -1},        // Adyen's offshore yuan
		{"1.10", "ISK", 110, "", 0},      //
		{"999999999", "JPY", 999999999, "", -1},
	}
	for _, c := range cases {
		v, cur, err := adyen.MinorUnits(decimal.RequireFromString(c.amount), c.unit)
		var ae *provider.AmountError
		switch {
		case c.code == "" && (err != nil || v != c.value || cur != strings.ToUpper(c.unit)):
			t.Errorf("MinorUnits(%s %s) = %d %s %v; want %d", c.amount, c.unit, v, cur, err, c.value)
		case c.code != "" && (!errors.As(err, &ae) || ae.Code != c.code):
			t.Errorf("MinorUnits(%s %s) = %d %v; want AmountError %s", c.amount, c.unit, v, err, c.code)
		}
		if c.isoDecimals >= 0 {
			if d, ok := currency.Decimals(c.unit); ok && d != c.isoDecimals {
				t.Errorf("%s: the service's ISO table says %d decimals, the test assumed %d", c.unit, d, c.isoDecimals)
			}
		}
		if c.code == "" {
			back, unit, ok := adyen.FromMinorUnits(v, cur)
			if !ok || !back.Equal(decimal.RequireFromString(c.amount)) || unit != cur {
				t.Errorf("FromMinorUnits(%d %s) = %s %s %v", v, cur, back, unit, ok)
			}
		}
	}
}

// TestResultTable: every resultCode row of outcome.go's table, and a
// refusal row of each decline class.
func TestResultTable(t *testing.T) {
	for _, c := range []struct {
		result, reason string
		status         provider.Status
		code           codes.Code
	}{
		{"Authorised", "", provider.Approved, ""},
		{"Refused", "2", provider.Declined, codes.DeclinedContactIssuer},
		{"Refused", "", provider.Declined, codes.DeclinedContactIssuer},
		{"Error", "", provider.Declined, codes.BankSystemError},
		{"Error", "4", provider.Declined, codes.BankSystemError},
		{"Refused", "5", provider.Declined, codes.CardRestricted},
		{"Refused", "6", provider.Declined, codes.InvalidOrExpiredCard},
		{"Refused", "11", provider.Declined, codes.ThreeDSDecline},
		{"Refused", "12", provider.Declined, codes.InsufficientFunds},
		{"Refused", "24", provider.Declined, codes.SecurityCodeIncorrect},
		{"Refused", "20", provider.Declined, codes.RiskBlocked},
		{"Refused", "10", provider.Declined, codes.UnsupportedCardType},
		{"Refused", "99", provider.Declined, codes.DeclinedContactIssuer},
		{"Cancelled", "", provider.Declined, codes.TransactionCancelled},
		{"RedirectShopper", "", provider.Pending, ""},
		{"ChallengeShopper", "", provider.Pending, ""},
		{"IdentifyShopper", "", provider.Pending, ""},
		{"PresentToShopper", "", provider.Pending, ""},
		{"Pending", "", provider.Pending, ""},
		{"Received", "", provider.Pending, ""},
		{"PartiallyAuthorised", "", provider.Pending, ""},
		{"SomethingNew", "", provider.Pending, ""},
	} {
		out := adyen.OutcomeOfForTest(c.result, c.reason)
		if out.Status != c.status || out.Code != c.code {
			t.Errorf("%s/%s → %v %q; want %v %q", c.result, c.reason, out.Status, out.Code, c.status, c.code)
		}
		closable := c.result == "RedirectShopper" || c.result == "ChallengeShopper" || c.result == "IdentifyShopper" || c.result == "PresentToShopper"
		if out.Status == provider.Pending && out.Closable != closable {
			t.Errorf("%s closable = %v, want %v", c.result, out.Closable, closable)
		}
	}
	for _, r := range adyen.Refusals {
		if !r.Spec.Known() {
			t.Errorf("refusal %s maps to %q, not a spec code", r.Code, r.Spec)
		}
		if got := adyen.RefusalCodeOfReason("", r.Reason); got != r.Spec {
			t.Errorf("refusal by reason %q = %s, want %s", r.Reason, got, r.Spec)
		}
	}
}

func TestRequestsRefusedBeforeSending(t *testing.T) {
	p, err := adyen.New(adyen.Options{APIKey: "k", MerchantAccount: "m", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Serves(provider.MethodWallet) || p.Serves(provider.MethodUPI) || !p.Serves(provider.MethodCard) {
		t.Fatal("Serves: cards only")
	}
	var ae *provider.AmountError
	if err := p.CheckAmount(decimal.RequireFromString("1.5"), "JPY"); !errors.As(err, &ae) || ae.Code != codes.InvalidAmount {
		t.Fatalf("CheckAmount(1.5 JPY) = %v", err)
	}
	long := payment.ChargeReference(1) + strings.Repeat("9", 60)
	if _, err := p.Charge(context.Background(), provider.ChargeRequest{Reference: long}); !errors.Is(err, provider.ErrInvalidRequest) {
		t.Fatalf("Charge with a key over 64 characters = %v, want ErrInvalidRequest", err)
	}
	if _, err := p.SubmitDetails(context.Background(), "ptx_1:x", map[string]string{"redirectResult": "r"}); !errors.Is(err, provider.ErrInvalidRequest) {
		t.Fatalf("SubmitDetails with a reference that is not the service's = %v, want ErrInvalidRequest", err)
	}
	if _, err := adyen.New(adyen.Options{APIKey: "k"}); err == nil {
		t.Fatal("New without a merchant account")
	}
}

// TestInProgressIsNeverADecline: Adyen answers a key whose first request is
// still being processed with error 704 ("request already processed or in
// progress", as a 422 validation error or a 409), and a transient failure
// with the header Transient-Error: true. Neither is Adyen's answer to the
// charge: the connector sends again with the same key, and if the answer
// never comes it reports an error (outcome unknown), never a decline the
// first request might contradict.
func TestInProgressIsNeverADecline(t *testing.T) {
	const inProgress = `{"status":422,"errorCode":"704","message":"request already processed or in progress","errorType":"validation"}`
	const transient = `{"status":422,"errorCode":"000","errorType":"validation"}`
	for _, c := range []struct {
		name     string
		status   int
		body     string
		header   bool
		failures int // answers before the charge's own; -1: always
		want     provider.Status
		unknown  bool // no outcome: an error
	}{
		{"704 then the answer", http.StatusUnprocessableEntity, inProgress, false, 2, provider.Approved, false},
		{"704 as a 409 then the answer", http.StatusConflict, inProgress, false, 1, provider.Approved, false},
		{"Transient-Error then the answer", http.StatusUnprocessableEntity, transient, true, 1, provider.Approved, false},
		{"704 until the end", http.StatusUnprocessableEntity, inProgress, false, -1, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys)
				mu.Unlock()
				if c.failures < 0 || n <= c.failures {
					if c.header {
						w.Header().Set("Transient-Error", "true")
					}
					w.WriteHeader(c.status)
					io.WriteString(w, c.body)
					return
				}
				io.WriteString(w, `{"resultCode":"Authorised","pspReference":"PSP1","merchantReference":"ptx_1"}`)
			}))
			defer srv.Close()
			p, err := adyen.New(adyen.Options{APIKey: "k", MerchantAccount: "m", BaseURL: srv.URL, Retries: 2, RetryBase: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Charge(context.Background(), provider.ChargeRequest{Reference: "ptx_1", Amount: decimal.NewFromInt(1), Unit: "EUR",
				Method: provider.MethodCard, Card: &card.Details{Digits: "4111111111111111", Expiry: card.Expiry{Month: 1, Year: 2030}}, CVV: "737",
				ReturnURL: "https://x.example/"})
			if c.unknown {
				if err == nil {
					t.Fatalf("Charge = %+v; want an error (outcome unknown), never an outcome", out)
				}
			} else if err != nil || out.Status != c.want {
				t.Fatalf("Charge = %+v, %v; want %v", out, err, c.want)
			}
			for _, k := range keys {
				if k != keys[0] {
					t.Fatalf("keys %v: a resend changed the Idempotency-Key", keys)
				}
			}
			if len(keys) < 2 {
				t.Fatalf("sent %d times; want the same request sent again", len(keys))
			}
			lo, err := p.Lookup(context.Background(), "ptx_1")
			if c.unknown && !errors.Is(err, adyen.ErrOutcomeUnknown) {
				t.Fatalf("Lookup during 704 = %+v, %v; want ErrOutcomeUnknown", lo, err)
			}
		})
	}
}

// TestRefusalRowsReadOnAdyensPage holds the rows marked OnPage to the text
// of Adyen's "Refusal reasons" page (codes 2–18) and "Testing result codes
// and refusal reasons" (code 0, "Unknown" with resultCode Error), word for
// word, and keeps every row not read there (19 and above) marked.
func TestRefusalRowsReadOnAdyensPage(t *testing.T) {
	page := map[string]string{
		"0": "Unknown", "2": "Refused", "3": "Referral", "4": "Acquirer Error", "5": "Blocked Card",
		"6": "Expired Card", "7": "Invalid Amount", "8": "Invalid Card Number", "9": "Issuer Unavailable",
		"10": "Not supported", "11": "3D Not Authenticated", "12": "Not enough balance", "14": "Acquirer Fraud",
		"15": "Cancelled", "16": "Shopper Cancelled", "17": "Invalid Pin", "18": "Pin tries exceeded",
	}
	seen := map[string]bool{}
	for _, r := range adyen.Refusals {
		n, err := strconv.Atoi(r.Code)
		if err != nil || seen[r.Code] {
			t.Fatalf("row %q: not a number or listed twice", r.Code)
		}
		seen[r.Code] = true
		if text, ok := page[r.Code]; ok != r.OnPage || ok && text != r.Reason || !ok && n < 19 {
			t.Errorf("row %s %q (OnPage %v): Adyen's page says %q", r.Code, r.Reason, r.OnPage, text)
		}
	}
	for code := range page {
		if !seen[code] {
			t.Errorf("Adyen's row %s is missing", code)
		}
	}
}

// TestCurrencyTableIsAdyens: the zero- and three-decimal currencies are
// exactly those of Adyen's own PHP library (Adyen/adyen-php-api-library,
// src/Adyen/Util/Currency.php at 05505a05; every other currency is two
// decimals there), and the rows of Adyen's "Currency codes" page read in
// its stored copy (AED to ETB) are here with the page's decimals.
func TestCurrencyTableIsAdyens(t *testing.T) {
	zero := "CVE DJF GNF IDR JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF"
	three := "BHD IQD JOD KWD LYD OMR TND"
	table := adyen.ExponentsForTest()
	want := map[int32]string{0: zero, 3: three}
	for exp, list := range want {
		for _, c := range strings.Fields(list) {
			if table[c] != exp {
				t.Errorf("%s: %d decimals, Adyen's library says %d", c, table[c], exp)
			}
		}
	}
	for c, exp := range table {
		if exp != 2 && !strings.Contains(want[exp], c) {
			t.Errorf("%s: %d decimals, not in Adyen's library's list", c, exp)
		}
	}
	page := map[string]int32{"AED": 2, "ALL": 2, "AMD": 2, "AOA": 2, "ARS": 2, "AUD": 2, "AWG": 2, "AZN": 2, "BAM": 2,
		"BBD": 2, "BDT": 2, "BHD": 3, "BMD": 2, "BND": 2, "BOB": 2, "BRL": 2, "BSD": 2, "BWP": 2, "BYN": 2, "BZD": 2,
		"CAD": 2, "CHF": 2, "CLP": 2, "CNH": 2, "CNY": 2, "COP": 2, "CRC": 2, "CUP": 2, "CVE": 0, "CZK": 2, "DJF": 0,
		"DKK": 2, "DOP": 2, "DZD": 2, "EGP": 2, "ETB": 2}
	for c, exp := range page {
		if got, ok := table[c]; !ok || got != exp {
			t.Errorf("%s: table has %d (listed %v), Adyen's page %d", c, got, ok, exp)
		}
	}
	for c := range table {
		if c < "ETB" && c >= "AED" {
			if _, ok := page[c]; !ok {
				t.Errorf("%s: in the table, not on Adyen's page between AED and ETB", c)
			}
		}
	}
}

// Adyen refusing connections: no send connected, so the charge is not
// processed (the service may send the attempt to another connector). A
// connection made and then lost may have carried the payment: unknown.
func TestUnreachableAdyenIsNotProcessed(t *testing.T) {
	closed := adyentest.Unreachable(t)
	dropping, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dropping.Close()
	go func() {
		for {
			c, err := dropping.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 512))
			c.Close()
		}
	}()
	charge := func(base string) (*adyen.Provider, error) {
		p, err := adyen.New(adyen.Options{APIKey: "k", MerchantAccount: "m", BaseURL: base, Retries: 2, RetryBase: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Charge(context.Background(), provider.ChargeRequest{Reference: "ptx_1", Amount: decimal.NewFromInt(1), Unit: "EUR",
			Method: provider.MethodCard, Card: &card.Details{Digits: "4111111111111111", Expiry: card.Expiry{Month: 1, Year: 2030}}, CVV: "737",
			ReturnURL: "https://x.example/"})
		return p, err
	}
	if p, err := charge(closed); !errors.Is(err, provider.ErrNotProcessed) || p.Unreachable() != 1 {
		t.Fatalf("charge against a closed port: %v, want not processed", err)
	}
	if p, err := charge("http://" + dropping.Addr().String()); err == nil || errors.Is(err, provider.ErrNotProcessed) || p.Unreachable() != 0 {
		t.Fatalf("charge whose connection dropped after the request: %v, want an unknown outcome", err)
	}
}
