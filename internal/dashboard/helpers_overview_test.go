package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/testenv"
)

// Sandbox cards (docs/sandbox.md).
const (
	cardApproved     = "4111111111111111"
	cardDeclined999  = "4000000000000002"
	cardDeclined006  = "4000000000000127"
	cardMastercardOK = "5555555555554444"
)

// paid is the outcome of one payment the tests make.
type paid struct {
	RequestID int64 `json:"paymentRequestId"`
	TxID      int64 `json:"transactionId"`
	Status    int   `json:"transactionStatusId"`
}

// payCard creates and pays a request of amount (a JSON number, exact) in
// unit with a sandbox card through the real API.
func payCard(t testing.TB, m testenv.Merchant, amount, unit, number string) paid {
	t.Helper()
	body := map[string]any{"amount": json.RawMessage(amount), "unit": unit, "referenceId": "ov-" + unit + "-" + amount,
		"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St", "city": "Berlin",
		"state": "BE", "postalCode": "10115", "country": "DE",
		"card": map[string]any{"number": number, "expiry": "12/" + time.Now().AddDate(3, 0, 0).Format("06"), "cvc": "123", "holderName": "Ann Lee"}}
	resp := payRetrying(t, "/payments/h2h/1", m, body)
	if resp.Status != http.StatusOK {
		t.Fatalf("pay %s %s with %s: %d %s", amount, unit, number, resp.Status, resp.Body)
	}
	var out paid
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		t.Fatalf("pay: %s (%v)", resp.Body, err)
	}
	return out
}

// payRetrying posts a payment as the docs tell merchants to: a 503 (a
// dependency that did not answer in time, on a loaded emulator) is sent
// again with the same Idempotency-Key, which never charges twice.
func payRetrying(t testing.TB, path string, m testenv.Merchant, body map[string]any) testenv.Response {
	t.Helper()
	key := fmt.Sprintf("ov-%s-%d", body["referenceId"], time.Now().UnixNano())
	for attempt := 1; ; attempt++ {
		resp := testenv.Do(t, "POST", testenv.Stack(t).Info.APIBase+path, m.APIKey, body, "Idempotency-Key", key)
		if resp.Status != http.StatusServiceUnavailable || attempt == 5 {
			return resp
		}
		time.Sleep(time.Duration(attempt) * time.Second)
	}
}

// payToken pays with a sandbox wallet token on wallet selector 44.
func payToken(t testing.TB, m testenv.Merchant, amount, unit, token string) paid {
	t.Helper()
	body := map[string]any{"amount": json.RawMessage(amount), "unit": unit, "referenceId": "ov-w-" + unit + "-" + amount,
		"name": "Ann Lee", "email": "payer@example.com", "phoneNumber": "4915112345678", "address": "1 Main St", "city": "Berlin",
		"state": "BE", "postalCode": "10115", "country": "DE", "token": token}
	resp := payRetrying(t, "/payments/h2h/44", m, body)
	if resp.Status != http.StatusOK {
		t.Fatalf("pay %s %s with %s: %d %s", amount, unit, token, resp.Status, resp.Body)
	}
	var out paid
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		t.Fatalf("pay: %s (%v)", resp.Body, err)
	}
	return out
}

// viewerLanguage makes the tab send Accept-Language header, as a browser
// set to those languages does.
func viewerLanguage(t *testing.T, tab context.Context, header string) {
	t.Helper()
	ua := bt.Eval[string](t, tab, `navigator.userAgent`)
	c, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(c, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: header}); err != nil {
		t.Fatal(err)
	}
}

// signInTab signs u in in the browser tab by typing, and waits for the home page.
func signInTab(t *testing.T, tab context.Context, u *user) {
	t.Helper()
	bt.Navigate(t, tab, u.base+"/dashboard/login")
	bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("email"), u.email),
		chromedp.SendKeys(chromedp.ID("password"), password))
	bt.Eval[bool](t, tab, `(() => { window.__old = true; return true; })()`)
	bt.Do(t, tab, chromedp.Click(chromedp.CSS("main button[type=submit]")))
	bt.WaitJS(t, tab, `!window.__old && location.pathname.startsWith("/dashboard/") && location.pathname !== "/dashboard/login"`, pageTimeout)
}

// nbsp turns Intl's no-break spaces into plain ones.
func nbsp(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\u00a0' || r == '\u202f' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
