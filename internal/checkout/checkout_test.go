package checkout_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apispec"
	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

func TestMain(m *testing.M) {
	spec, err := apispec.Load()
	if err != nil {
		panic(err)
	}
	testenv.Check = spec.Check
	testenv.Main(m)
}

func base(t *testing.T) string { return testenv.Stack(t).Info.APIBase }

// session creates a request and a checkout session as a merchant back end does.
func session(t *testing.T, m testenv.Merchant) (id, token string) {
	t.Helper()
	r := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, `{"amount":19.99,"unit":"EUR","successUrl":"https://shop.example/ok"}`)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id = strconv.FormatInt(int64(r.JSON(t)["id"].(float64)), 10)
	s := testenv.Do(t, "POST", base(t)+"/payment-requests/"+id+"/checkout-session", m.APIKey, nil)
	return id, s.JSON(t)["token"].(string)
}

func withToken(tok string) []string { return []string{"X-Checkout-Token", tok} }

func TestHostedPageHeadersAndPaymentLink(t *testing.T) {
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.AllowedOrigins = []string{"https://shop.example"} })
	id, tok := session(t, m)
	resp, err := http.Get(base(t) + "/checkout?requestId=" + id + "&token=" + tok)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'self' https://shop.example") || !strings.Contains(csp, "script-src 'self'") ||
		resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("headers %v", resp.Header)
	}
	// The payment link mints a session and opens the hosted page.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	st := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+id, m.APIKey, nil).JSON(t)
	link, err := noFollow.Get(st["link"].(string))
	if err != nil {
		t.Fatal(err)
	}
	link.Body.Close()
	loc, _ := url.Parse(link.Header.Get("Location"))
	if link.StatusCode != http.StatusSeeOther || loc.Path != "/checkout" || loc.Query().Get("requestId") != id || loc.Query().Get("token") == "" {
		t.Fatalf("link: %d %s", link.StatusCode, link.Header.Get("Location"))
	}
	js, _ := http.Get(base(t) + "/paycheckout.js")
	js.Body.Close()
	if js.StatusCode != 200 || !strings.HasPrefix(js.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("paycheckout.js: %d %s", js.StatusCode, js.Header.Get("Content-Type"))
	}
	// Through the local gateway too: brotli when asked, and the favicon is a route.
	br, _ := getRaw(t, base(t)+"/paycheckout.js", "Accept-Encoding", "gzip, br")
	if br.StatusCode != 200 || br.Header.Get("Content-Encoding") != "br" || br.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("paycheckout.js in brotli: %d %v", br.StatusCode, br.Header)
	}
	if fav, _ := getRaw(t, base(t)+"/favicon.ico"); fav.StatusCode != 200 || fav.Header.Get("Content-Type") != "image/x-icon" {
		t.Fatalf("favicon: %d %v", fav.StatusCode, fav.Header)
	}
}

func TestSessionAndCardPayment(t *testing.T) {
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.AllowedOrigins = []string{"https://shop.example"} })
	id, tok := session(t, m)
	s := testenv.Do(t, "GET", base(t)+"/checkout/api/session?origin=https%3A%2F%2Fshop.example", "", nil, withToken(tok)...).JSON(t)
	if s["requestId"] != id || s["amount"] != "19.99" || s["parentOrigin"] != "https://shop.example" || s["successUrl"] != "https://shop.example/ok" {
		t.Fatalf("session %v", s)
	}
	// An unregistered parent origin is not confirmed: the page will not post to it.
	if s := testenv.Do(t, "GET", base(t)+"/checkout/api/session?origin=https%3A%2F%2Fevil.example", "", nil, withToken(tok)...).JSON(t); s["parentOrigin"] != nil {
		t.Fatalf("unregistered origin confirmed: %v", s)
	}
	bad := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"","number":"4111 1111 1111 1112","expiry":"13/20","cvc":"1"}`, withToken(tok)...)
	fields := map[string]string{}
	for _, e := range bad.JSON(t)["errors"].([]any) {
		fe := e.(map[string]any)
		fields[fe["field"].(string)] = fe["code"].(string)
	}
	if bad.Status != 400 || fields["holderName"] != "025" || fields["number"] != "040" || fields["expiry"] != "041" {
		t.Fatalf("invalid card: %d %v", bad.Status, fields)
	}
	ok := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4111 1111 1111 1111","expiry":"12/30","cvc":"123"}`, withToken(tok)...)
	res := ok.JSON(t)
	if ok.Status != 200 || res["transactionStatusId"] != 1.0 || res["paymentRequestStatusId"] != 1.0 {
		t.Fatalf("pay: %d %s", ok.Status, ok.Body)
	}
	if st := testenv.Do(t, "GET", base(t)+"/checkout/api/status", "", nil, withToken(tok)...).JSON(t); st["transactionStatusId"] != 1.0 {
		t.Fatalf("status %v", st)
	}
	if again := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4111111111111111","expiry":"12/30","cvc":"123"}`, withToken(tok)...); again.Status != 409 {
		t.Fatalf("second payment on a paid request: %d", again.Status)
	}
	if sess := testenv.Do(t, "GET", base(t)+"/checkout/api/session", "", nil, withToken(tok)...); sess.Status != 409 {
		t.Fatalf("session of a paid request: %d", sess.Status)
	}
	if st := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+id, m.APIKey, nil).JSON(t); st["paymentRequestStatusId"] != 1.0 {
		t.Fatalf("merchant status %v", st)
	}
}

func TestThreeDSChallengeThroughTheCallback(t *testing.T) {
	m := testenv.NewMerchant(t)
	for _, c := range []struct {
		result string
		status float64
		code   string
	}{{"approve", 1, ""}, {"fail", 2, "004"}} {
		_, tok := session(t, m)
		r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4000000000003220","expiry":"12/30","cvc":"123"}`, withToken(tok)...).JSON(t)
		next, _ := r["nextAction"].(map[string]any)
		if r["transactionStatusId"] != 3.0 || next["type"] != "threeds_redirect" || !strings.HasPrefix(next["url"].(string), "/checkout/3ds?") {
			t.Fatalf("3-D Secure card: %v", r)
		}
		body := `{"transactionId":"` + r["paymentId"].(string) + `","result":"` + c.result + `"}`
		if resp := testenv.Do(t, "POST", base(t)+"/checkout/api/3ds/complete", "", body, withToken(tok)...); resp.Status != 204 {
			t.Fatalf("complete: %d %s", resp.Status, resp.Body)
		}
		st := testenv.Do(t, "GET", base(t)+"/checkout/api/status", "", nil, withToken(tok)...).JSON(t)
		if st["transactionStatusId"] != c.status || st["lastLog"].(map[string]any)["code"] != c.code {
			t.Fatalf("%s: status %v", c.result, st)
		}
		if again := testenv.Do(t, "POST", base(t)+"/checkout/api/3ds/complete", "", body, withToken(tok)...); again.Status != 409 {
			t.Fatalf("answered twice: %d", again.Status)
		}
	}
}

func TestTokenRules(t *testing.T) {
	m := testenv.NewMerchant(t)
	id, tok := session(t, m)
	key, _ := devstack.SealKey(testenv.StateDir(t))
	old, _ := checkouttoken.New(key)
	old.Now = func() time.Time { return time.Now().Add(-16 * time.Minute) }
	rid, _ := strconv.ParseInt(id, 10, 64)
	expired, _ := old.Mint(rid, m.ID)
	other := testenv.NewMerchant(t)
	forged, _ := old.Mint(rid, other.ID) // signed, but names another merchant
	// Tamper with a signature character that carries six bits, always
	// changing it (a fixed replacement would sometimes equal the original).
	at := len(tok) - 5
	swap := byte('A')
	if tok[at] == 'A' {
		swap = 'B'
	}
	tampered := tok[:at] + string(swap) + tok[at+1:]
	for name, tk := range map[string]string{"none": "", "garbage": "pct_x.y", "expired": expired, "tampered": tampered, "other merchant": forged} {
		r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"A","number":"4111111111111111","expiry":"12/30","cvc":"123"}`, withToken(tk)...)
		if r.Status != 401 || r.JSON(t)["code"] != "048" {
			t.Errorf("%s token: %d %s", name, r.Status, r.Body)
		}
	}
	// The API key is not a checkout credential.
	if r := testenv.Do(t, "GET", base(t)+"/checkout/api/session", m.APIKey, nil); r.Status != 401 {
		t.Fatalf("API key accepted by the checkout API: %d", r.Status)
	}
	// A cancelled request refuses the hosted page.
	testenv.Do(t, "POST", base(t)+"/payment-requests/"+id+"/cancel", m.APIKey, nil)
	if r := testenv.Do(t, "GET", base(t)+"/checkout/api/session", "", nil, withToken(tok)...); r.Status != 409 || r.JSON(t)["code"] != "012" {
		t.Fatalf("cancelled: %d %s", r.Status, r.Body)
	}
}

func TestAttemptsPerRequestAreLimited(t *testing.T) {
	m := testenv.NewMerchant(t)
	// The limit counts in fixed 15-minute windows of the wall clock: a run
	// that crosses a window's end counts anew, by design, so it is run
	// again on a new request (CI once crossed 15:15:00 mid-run).
	window := func() int64 { return time.Now().Unix() / int64((15 * time.Minute).Seconds()) }
	for try := 0; ; try++ {
		_, tok := session(t, m)
		started := window()
		statuses := map[int]int{}
		for i := 0; i < 12; i++ {
			r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"A","number":"4000000000000002","expiry":"12/30","cvc":"123"}`, withToken(tok)...)
			statuses[r.Status]++
		}
		if window() != started && try < 2 {
			continue
		}
		if statuses[200] != 10 || statuses[429] != 2 {
			t.Fatalf("statuses %v: want 10 declined attempts then 429", statuses)
		}
		return
	}
}
