package checkout_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/checkoutwire"
)

var noFollow = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fromIP is a client whose connections come from another loopback address,
// so its per-IP budget is its own.
func fromIP(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, c *http.Client, u string) answer {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// create makes a payment request and returns its id and link.
func create(t *testing.T, m testenv.Merchant) (id, link string) {
	t.Helper()
	r := testenv.Do(t, "POST", base(t)+"/payment-requests", m.APIKey, `{"amount":5,"unit":"EUR"}`)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	j := r.JSON(t)
	return strconv.FormatInt(int64(j["id"].(float64)), 10), j["link"].(string)
}

func TestPaymentLinksAreUnguessable(t *testing.T) {
	m := testenv.NewMerchant(t)
	id, link := create(t, m)
	slug := strings.TrimPrefix(link, base(t)+"/pay/")
	if slug == link || len(slug) != 32 || strings.Contains(slug, id) {
		t.Fatalf("link %q of request %s: want %s/pay/<32-character slug>", link, id, base(t))
	}
	// The status endpoint shows the same link.
	if st := testenv.Do(t, "GET", base(t)+"/payment-requests/status/"+id, m.APIKey, nil).JSON(t); st["link"] != link {
		t.Fatalf("status link %v, create link %s", st["link"], link)
	}
	open := get(t, noFollow, link)
	loc, _ := url.Parse(open.header.Get("Location"))
	if open.status != http.StatusSeeOther || loc.Path != "/checkout" || loc.Query().Get("requestId") != id || !strings.HasPrefix(loc.Query().Get("token"), "pct_") {
		t.Fatalf("link: %d %s", open.status, open.header.Get("Location"))
	}

	// Everything that opens no checkout answers alike: the bare id, a forged
	// slug, a paid request's link, a cancelled request's link.
	paidID, paidLink := create(t, m)
	_, tok := sessionFor(t, m, paidID)
	if r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4111111111111111","expiry":"12/30","cvc":"123"}`, withToken(tok)...); r.Status != 200 {
		t.Fatalf("pay: %d %s", r.Status, r.Body)
	}
	cancelledID, cancelledLink := create(t, m)
	testenv.Do(t, "POST", base(t)+"/payment-requests/"+cancelledID+"/cancel", m.APIKey, nil)
	forged := make([]byte, 24)
	rand.Read(forged)
	var first answer
	for i, u := range []string{
		base(t) + "/pay/" + id,
		base(t) + "/pay/" + base64.RawURLEncoding.EncodeToString(forged),
		base(t) + "/pay/" + slug[:31] + map[bool]string{true: "B", false: "A"}[slug[31] == 'A'],
		paidLink, cancelledLink,
	} {
		a := get(t, noFollow, u)
		if a.status != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", u, a.status, a.body)
		}
		if i == 0 {
			first = a
		} else if !bytes.Equal(a.body, first.body) {
			t.Errorf("%s: body %s differs from the unknown link's %s", u, a.body, first.body)
		}
	}
}

// sessionFor mints a checkout session for an existing request.
func sessionFor(t *testing.T, m testenv.Merchant, id string) (paymentURL, token string) {
	t.Helper()
	s := testenv.Do(t, "POST", base(t)+"/payment-requests/"+id+"/checkout-session", m.APIKey, nil).JSON(t)
	return s["paymentUrl"].(string), s["token"].(string)
}

func frameAncestors(t *testing.T, u string) string {
	t.Helper()
	a := get(t, noFollow, u)
	_, fa, _ := strings.Cut(a.header.Get("Content-Security-Policy"), "frame-ancestors ")
	fa, _, _ = strings.Cut(fa, ";")
	return fa
}

func TestFramingComesFromTheVerifiedToken(t *testing.T) {
	victim := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.AllowedOrigins = []string{"https://shop.example"} })
	attacker := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.AllowedOrigins = []string{"https://evil.example"} })
	vid, vtok := session(t, victim)
	aid, atok := session(t, attacker)
	page := base(t) + "/checkout?"
	for _, c := range []struct {
		name  string
		query url.Values
		want  string
	}{
		{"victim's own page", url.Values{"requestId": {vid}, "token": {vtok}}, "'self' https://shop.example"},
		{"token alone", url.Values{"token": {vtok}}, "'self' https://shop.example"},
		{"attacker's requestId with the victim's token", url.Values{"requestId": {aid}, "token": {vtok}}, "'self'"},
		{"attacker's requestId alone", url.Values{"requestId": {aid}}, "'self'"},
		{"attacker's own token", url.Values{"requestId": {aid}, "token": {atok}}, "'self' https://evil.example"},
		{"forged token", url.Values{"requestId": {aid}, "token": {atok[:len(atok)-2] + "AA"}}, "'self'"},
	} {
		if got := frameAncestors(t, page+c.query.Encode()); got != c.want {
			t.Errorf("%s: frame-ancestors %q, want %q", c.name, got, c.want)
		}
	}
	// The pages of the 3-D Secure round trip carry no token: their frame
	// ticket (signed, bound to the token's request) decides.
	r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4000000000003220","expiry":"12/30","cvc":"123"}`, withToken(vtok)...).JSON(t)
	acs, _ := url.Parse(r["nextAction"].(map[string]any)["url"].(string))
	ticket := acs.Query().Get("frame")
	if ticket == "" || strings.Contains(ticket, vtok) {
		t.Fatalf("3-D Secure URL %s: want a frame ticket that is not the token", acs)
	}
	if got := frameAncestors(t, base(t)+acs.String()); got != "'self' https://shop.example" {
		t.Errorf("3-D Secure page: frame-ancestors %q", got)
	}
	if got := frameAncestors(t, page+url.Values{"requestId": {vid}, "resume": {"1"}, "frame": {ticket}}.Encode()); got != "'self' https://shop.example" {
		t.Errorf("resume page: frame-ancestors %q", got)
	}
	if got := frameAncestors(t, page+url.Values{"requestId": {aid}, "frame": {ticket}}.Encode()); got != "'self'" {
		t.Errorf("frame ticket with another requestId: frame-ancestors %q", got)
	}
	// A frame ticket is no API credential.
	if s := testenv.Do(t, "GET", base(t)+"/checkout/api/session", "", nil, withToken(ticket)...); s.Status != 401 {
		t.Errorf("frame ticket accepted by the API: %d", s.Status)
	}
	// The API takes the request from the token, whatever the query says.
	if s := testenv.Do(t, "GET", base(t)+"/checkout/api/session?requestId="+aid, "", nil, withToken(vtok)...).JSON(t); s["requestId"] != vid {
		t.Errorf("session with requestId=%s: %v", aid, s["requestId"])
	}
}

func fieldCodes(t *testing.T, r testenv.Response) map[string]string {
	t.Helper()
	out := map[string]string{}
	errs, _ := r.JSON(t)["errors"].([]any)
	for _, e := range errs {
		fe := e.(map[string]any)
		c, _ := fe["code"].(string)
		out[fe["field"].(string)] = c
	}
	return out
}

func TestStrictJSONBodies(t *testing.T) {
	m := testenv.NewMerchant(t)
	create := base(t) + "/payment-requests"
	for name, body := range map[string]string{
		"duplicate key":          `{"amount":1,"amount":1000,"unit":"EUR"}`,
		"duplicate nested key":   `{"amount":1,"unit":"EUR","client":{"name":"A","name":"B"}}`,
		"case variant":           `{"amount":1,"unit":"EUR","notifyURL":"https://evil.example/hook"}`,
		"case variant of amount": `{"Amount":1,"unit":"EUR"}`,
		"invalid UTF-8":          "{\"amount\":1,\"unit\":\"EUR\",\"notes\":\"\xff\xfe\"}",
	} {
		if r := testenv.Do(t, "POST", create, m.APIKey, body); r.Status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.Status, r.Body)
		}
	}
	for _, c := range []struct{ field, value, code string }{
		{"recipientName", "Acme\u202eskooB", "025"},
		{"recipientName", "Ac\u200bme", "025"},
		{"referenceId", "order\u2066-1", "028"},
		{"notes", "line\r\nInjected: yes", "028"},
		{"notes", "nul\u0000byte", "028"},
		{"notes", "zero\ufeffwidth", "028"},
	} {
		body, _ := json.Marshal(map[string]any{"amount": 1, "unit": "EUR", c.field: c.value})
		r := testenv.Do(t, "POST", create, m.APIKey, body)
		if got := fieldCodes(t, r); r.Status != 400 || got[c.field] != c.code {
			t.Errorf("%s=%q: %d %v, want 400 with %s", c.field, c.value, r.Status, got, c.code)
		}
	}
	client, _ := json.Marshal(map[string]any{"amount": 1, "unit": "EUR", "client": map[string]any{"name": "Ann\u200dLee"}})
	if r := testenv.Do(t, "POST", create, m.APIKey, client); fieldCodes(t, r)["client.name"] != "025" {
		t.Errorf("client.name with a zero-width joiner: %d %s", r.Status, r.Body)
	}
	// Payer data of a host-to-host payment.
	id, _ := createRequest(t, m)
	payerBody := map[string]any{"name": "Ann Lee", "email": "ann@example.com", "phoneNumber": "1234567890", "address": "1 Main St",
		"city": "Springfield", "state": "IL", "postalCode": "62701", "country": "US"}
	for _, c := range []struct{ field, value, code string }{
		{"name", "Ann\u202eeeL", "025"}, {"address", "1 Main\u0000St", "034"}, {"city", "Spring\u200bfield", "035"}, {"state", "I\u2067L", "036"},
	} {
		b := maps.Clone(payerBody)
		b[c.field] = c.value
		r := testenv.Do(t, "POST", base(t)+"/payments/qr/"+id, m.APIKey, b)
		if got := fieldCodes(t, r); r.Status != 400 || got[c.field] != c.code {
			t.Errorf("payer %s=%q: %d %v, want 400 with %s", c.field, c.value, r.Status, got, c.code)
		}
	}
	// The hosted page's card form.
	_, tok := session(t, m)
	if r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", "{\"holderName\":\"Ann\u200bLee\",\"number\":\"4111111111111111\",\"expiry\":\"12/30\",\"cvc\":\"123\"}", withToken(tok)...); fieldCodes(t, r)["holderName"] != "025" {
		t.Errorf("card holder with a zero-width space: %d %s", r.Status, r.Body)
	}
	if r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4111111111111111","number":"4000000000000002","expiry":"12/30","cvc":"123"}`, withToken(tok)...); r.Status != 400 {
		t.Errorf("card body with a duplicate key: %d %s", r.Status, r.Body)
	}

	// A repeated Idempotency-Key header (API Gateway joins repeats with a comma).
	for _, keys := range [][]string{{"key-a", "key-b"}, {"key-a,key-b"}} {
		req, _ := http.NewRequest("POST", create, strings.NewReader(`{"amount":1,"unit":"EUR"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", m.APIKey)
		for _, k := range keys {
			req.Header.Add("Idempotency-Key", k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("Idempotency-Key %q: %d, want 400", keys, resp.StatusCode)
		}
	}
}

func createRequest(t *testing.T, m testenv.Merchant) (string, string) { return create(t, m) }

func TestHSTSOnEveryFunction(t *testing.T) {
	// One route of each HTTP function, unauthenticated: errors carry it too.
	for fn, path := range map[string]string{
		"MerchantApiFunction": "/payment-requests/status/1",
		"PaymentsFunction":    "/payments/creditCard/status/1",
		"CheckoutFunction":    "/paycheckout.js",
		"CheckoutFunction404": "/pay/nope",
		"CallbacksFunction":   "/callbacks/test/text",
	} {
		a := get(t, noFollow, base(t)+path)
		if got := a.header.Get("Strict-Transport-Security"); got != "max-age=31536000; includeSubDomains" {
			t.Errorf("%s %s (%d): Strict-Transport-Security %q", fn, path, a.status, got)
		}
	}
}

// untilNextWindowIfLate keeps a counting run inside one fixed minute window.
func untilNextWindowIfLate(need time.Duration) {
	if left := time.Minute - time.Duration(time.Now().Unix()%60)*time.Second; left < need {
		time.Sleep(left + 100*time.Millisecond)
	}
}

// inOneWindow runs a burst that must fit in one fixed minute window of the
// rate limits and reports its last answer. A burst that crossed into the
// next window (a loaded machine: 300 requests took 56 s) proves nothing
// about the limit and is run again, from a fresh budget (try: 0, 1, 2).
func inOneWindow(t *testing.T, need time.Duration, burst func(try int) answer) answer {
	t.Helper()
	var last answer
	for try := range 3 {
		untilNextWindowIfLate(need)
		start := time.Now().Unix() / 60
		last = burst(try)
		if time.Now().Unix()/60 == start {
			return last
		}
		t.Logf("burst %d crossed a window's end; running it again", try+1)
	}
	t.Fatal("every burst crossed a window's end")
	return last
}

func TestUnauthenticatedEndpointsAreRateLimited(t *testing.T) {
	m := testenv.NewMerchant(t)
	_, link := create(t, m)

	// Per link: 120 a minute from one address.
	c := fromIP("127.0.0.2")
	last := inOneWindow(t, 20*time.Second, func(try int) answer {
		if try > 0 {
			_, link = create(t, m) // a fresh link's budget
		}
		var last answer
		for i := 0; i < 121; i++ {
			if last = get(t, c, link); i < 120 && last.status != http.StatusSeeOther {
				t.Fatalf("request %d on the link: %d %s", i+1, last.status, last.body)
			}
		}
		return last
	})
	if ra, _ := strconv.Atoi(last.header.Get("Retry-After")); last.status != 429 || ra < 1 || ra > 60 {
		t.Fatalf("121st request on one link: %d Retry-After %q", last.status, last.header.Get("Retry-After"))
	}
	// Another address is still limited on that link (the budget is the link's).
	if a := get(t, fromIP("127.0.0.4"), link); a.status != 429 {
		t.Fatalf("the link's budget from another address: %d", a.status)
	}

	// Per client IP: 300 a minute, whatever the link or token.
	last = inOneWindow(t, 30*time.Second, func(try int) answer {
		c := fromIP("127.0.0." + strconv.Itoa(3+2*try)) // .3, .5, .7: a fresh address's budget
		var last answer
		for i := 0; i < 301; i++ {
			if i%2 == 0 {
				last = get(t, c, base(t)+"/pay/"+strconv.Itoa(i))
			} else {
				req, _ := http.NewRequest("GET", base(t)+"/checkout/api/status", nil)
				req.Header.Set("X-Checkout-Token", "pct_guess"+strconv.Itoa(i)+".x")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = answer{resp.StatusCode, resp.Header, b}
			}
			if i < 300 && last.status == 429 {
				t.Fatalf("request %d from one address refused", i+1)
			}
		}
		return last
	})
	if last.status != 429 || last.header.Get("Retry-After") == "" {
		t.Fatalf("301st request from one address: %d %s", last.status, last.body)
	}
	// Other callers are not affected.
	if a := get(t, noFollow, base(t)+"/pay/"+strings.Repeat("A", 32)); a.status != 404 {
		t.Fatalf("another address: %d", a.status)
	}
}

func TestThreeDSAnswerIgnoresTheHostHeader(t *testing.T) {
	stack := testenv.Stack(t)
	m := testenv.NewMerchant(t)
	_, tok := session(t, m)
	r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4000000000003220","expiry":"12/30","cvc":"123"}`, withToken(tok)...).JSON(t)
	txID := r["paymentId"].(string)

	// An attacker's server, named by the Host header below.
	var conns atomic.Int32
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	evil.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	evil.StartTLS()
	defer evil.Close()

	// The checkout function as the template deploys it by default: no
	// PUBLIC_BASE_URL.
	env, err := stack.Resources.Env("CheckoutFunction")
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"], env["PUBLIC_BASE_URL"] = "1", ""
	h, err := checkoutwire.Checkout(context.Background(), func(k string) string { return env[k] }, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/checkout/api/3ds/complete", strings.NewReader(`{"transactionId":"`+txID+`","result":"approve"}`))
	req.Host = strings.TrimPrefix(evil.URL, "https://")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Checkout-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("complete: %d %s", resp.StatusCode, b)
	}
	// The answer reaches the service through the sandbox function and the
	// configured callback base; nothing ever contacts the Host header's server.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := testenv.Do(t, "GET", base(t)+"/checkout/api/status", "", nil, withToken(tok)...).JSON(t)
		if st["transactionStatusId"] == 1.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 3-D Secure answer never arrived: %v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the Host header's server", n)
	}
}

// Allowed origins stored before the origin rules (a wildcard, an added
// directive, a quoted source) never reach a header: the hosted page's and
// its 3-D Secure page's frame-ancestors list the valid ones only. An origin
// parameter that is no origin is refused with 032 naming the field; a
// stored bad value is never a parent origin.
func TestStoredBadOriginsNeverReachAHeader(t *testing.T) {
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) {
		m.AllowedOrigins = []string{"https://shop.example", "https://*", "https://a.com;sandbox allow-scripts", "https://x.example 'unsafe-inline'"}
	})
	id, tok := session(t, m)
	check := func(name, u string) {
		t.Helper()
		csp := get(t, noFollow, u).header.Get("Content-Security-Policy")
		if !strings.HasSuffix(csp, "; frame-ancestors 'self' https://shop.example") || strings.Contains(csp, "https://*") ||
			strings.Contains(csp, "sandbox") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q, want frame-ancestors 'self' https://shop.example and nothing of the stored bad values", name, csp)
		}
	}
	check("hosted page", base(t)+"/checkout?"+url.Values{"requestId": {id}, "token": {tok}}.Encode())
	r := testenv.Do(t, "POST", base(t)+"/checkout/api/pay/card", "", `{"holderName":"Ann Lee","number":"4000000000003220","expiry":"12/30","cvc":"123"}`, withToken(tok)...).JSON(t)
	acs, _ := url.Parse(r["nextAction"].(map[string]any)["url"].(string))
	check("3-D Secure page", base(t)+acs.String())

	for _, o := range []string{"https://*", "https://a.com;sandbox", "https://shop.example/path", "javascript:alert(1)"} {
		s := testenv.Do(t, "GET", base(t)+"/checkout/api/session?origin="+url.QueryEscape(o), "", nil, withToken(tok)...)
		if s.Status != 400 || s.JSON(t)["code"] != "032" || fieldCodes(t, s)["origin"] != "032" {
			t.Errorf("origin=%s: %d %s, want 400 with 032 on origin", o, s.Status, s.Body)
		}
	}
	for o, want := range map[string]any{"https://shop.example": "https://shop.example", "https://other.example": nil} {
		s := testenv.Do(t, "GET", base(t)+"/checkout/api/session?origin="+url.QueryEscape(o), "", nil, withToken(tok)...)
		if s.Status != 200 || s.JSON(t)["parentOrigin"] != want {
			t.Errorf("origin=%s: %d %s, want parentOrigin %v", o, s.Status, s.Body, want)
		}
	}
}
