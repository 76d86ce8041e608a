package apispec_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/payreq/payreq/docs"
	"github.com/payreq/payreq/internal/apispec"
	"github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/testenv"
)

var spec *apispec.Spec

func TestMain(m *testing.M) {
	s, err := apispec.Load()
	if err != nil {
		panic(err)
	}
	spec = s
	// Every exchange through testenv.Do is checked against the description,
	// tracked headers included (apispec.Check).
	testenv.Check = s.Check
	testenv.Main(m)
}

// On the running local stack, the tracked headers a response carries are
// exactly those the description declares on it: X-Request-Id everywhere,
// RateLimit and RateLimit-Policy on merchant API answers after
// authentication, Idempotent-Replayed on replays and only there.
func TestLocalStackHeadersMatchTheDescription(t *testing.T) {
	base := testenv.Stack(t).Info.APIBase
	m := testenv.NewMerchant(t)
	n := 0
	call := func(method, path, apiKey string, body any, want int, replay bool, headers ...string) testenv.Response {
		t.Helper()
		n++
		r := testenv.Do(t, method, base+path, apiKey, body, headers...) // fails on a tracked header not declared
		if r.Status != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Body)
		}
		declared, err := spec.Declared(httptest.NewRequest(method, base+path, nil), r.Status)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range apispec.Tracked {
			isDeclared := slices.ContainsFunc(declared, func(d string) bool { return strings.EqualFold(d, name) })
			sent := r.Header.Get(name) != ""
			if name == "Idempotent-Replayed" {
				if sent != replay {
					t.Errorf("%s %s → %d: Idempotent-Replayed sent=%v on a replay=%v", method, path, r.Status, sent, replay)
				}
				if replay && !isDeclared {
					t.Errorf("%s %s → %d: replayable response does not declare Idempotent-Replayed", method, path, r.Status)
				}
				continue
			}
			if isDeclared != sent {
				t.Errorf("%s %s → %d: %s declared=%v, sent=%v (%q)", method, path, r.Status, name, isDeclared, sent, r.Header.Get(name))
			}
		}
		return r
	}
	key := m.APIKey
	created := call("POST", "/payment-requests", key, `{"amount":"10.00","unit":"EUR"}`, 201, false, "Idempotency-Key", "hdr-create-1")
	call("POST", "/payment-requests", key, `{"amount":"10.00","unit":"EUR"}`, 201, true, "Idempotency-Key", "hdr-create-1")
	call("POST", "/payment-requests", key, `{"amount":-1,"unit":"EUR"}`, 400, false, "Idempotency-Key", "hdr-create-2")
	call("POST", "/payment-requests", key, `{"amount":-1,"unit":"EUR"}`, 400, true, "Idempotency-Key", "hdr-create-2")
	id := strconv.FormatInt(int64(created.JSON(t)["id"].(float64)), 10)
	call("GET", "/payment-requests/status/"+id, key, nil, 200, false)
	call("GET", "/payment-requests/status/"+id, "prk_test_not-a-key", nil, 401, false)
	call("GET", "/payment-requests/status/999999", key, nil, 404, false)
	call("GET", "/transactions/999999", key, nil, 404, false)
	sess := call("POST", "/payment-requests/"+id+"/checkout-session", key, "{}", 201, false)
	tok := sess.JSON(t)["token"].(string)
	call("GET", "/checkout/api/session", "", nil, 200, false, "X-Checkout-Token", tok)
	call("GET", "/checkout?requestId="+id+"&token="+tok, "", nil, 200, false)
	call("GET", "/checkout/3ds?transactionId=1&requestId="+id, "", nil, 200, false)
	call("GET", "/checkout/assets/checkout.css", "", nil, 200, false)
	call("GET", "/checkout/assets/no-such-file.css", "", nil, 404, false)
	call("GET", "/paycheckout.js", "", nil, 200, false)
	call("GET", "/paycheckout.d.ts", "", nil, 200, false)
	call("POST", "/callbacks/test/json", "", `{"orderId":"order-1042"}`, 200, false)
	call("POST", "/payment-requests/"+id+"/cancel", key, "{}", 200, false, "Idempotency-Key", "hdr-cancel-1")
	call("POST", "/payment-requests/"+id+"/cancel", key, "{}", 200, true, "Idempotency-Key", "hdr-cancel-1")
	if n < 19 {
		t.Fatalf("only %d exchanges", n)
	}
}

// GET /docs on the local stack serves the reference page, its script and
// the Redoc bundle from this origin, each with a CSP that admits scripts
// from this origin only, and the page has no inline script.
func TestDocsServedOnLocalStack(t *testing.T) {
	base := testenv.Stack(t).Info.APIBase
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != docs.ReferenceCSP {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
		return resp, string(b)
	}
	resp, page := get("/docs")
	if resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(page, `<div id="redoc">`) {
		t.Fatalf("GET /docs: %s\n%s", resp.Header.Get("Content-Type"), page)
	}
	scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1)
	if len(scripts) != 2 || strings.Contains(page, "http") || regexp.MustCompile(`<script[^>]*>[^<]`).MatchString(page) {
		t.Fatalf("GET /docs: scripts %v; the page must load its scripts from this origin and have no inline code", scripts)
	}
	for _, s := range scripts {
		src := regexp.MustCompile(`src="([^"]+)"`).FindStringSubmatch(s)[1]
		r, body := get(src)
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") || len(body) == 0 {
			t.Fatalf("GET %s: %s, %d bytes", src, r.Header.Get("Content-Type"), len(body))
		}
	}
	csp := docs.ReferenceCSP
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") ||
		strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "http") {
		t.Fatalf("CSP %q is not strict", csp)
	}
}

// The reference renders in Chromium under its CSP, offline: every
// operation and both webhooks are listed, nothing is fetched from another
// origin, and the console has no error.
func TestDocsRenderInChromium(t *testing.T) {
	base := testenv.Stack(t).Info.APIBase
	ctx := browsertest.New(t)
	var mu sync.Mutex
	var problems, foreign []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console "+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text+" "+fmt.Sprint(e.ExceptionDetails.Exception.Description))
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log "+string(e.Entry.Source)+": "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			u := e.Request.URL
			if !strings.HasPrefix(u, base) && !strings.HasPrefix(u, "data:") && !strings.HasPrefix(u, "blob:") {
				foreign = append(foreign, u)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Navigate(t, ctx, base+"/docs")
	// Every operation and webhook has its section, named by operationId.
	var ids []string
	for key, op := range operations(spec.Doc) {
		if op.OperationID == "" {
			t.Fatalf("%s has no operationId", key)
		}
		ids = append(ids, op.OperationID)
	}
	browsertest.WaitJS(t, ctx, `(() => {
		const ids = [...document.querySelectorAll('[data-section-id]')].map(e => e.getAttribute('data-section-id'));
		return `+browsertest.JS(ids)+`.every(op => ids.some(id => id.endsWith('/' + op) || id === 'operation/' + op));
	})()`, 90*time.Second)
	// And shows its summary.
	text := browsertest.Eval[string](t, ctx, `document.body.innerText`)
	for _, op := range operations(spec.Doc) {
		if !strings.Contains(text, op.Summary) {
			t.Errorf("the reference does not show %q", op.Summary)
		}
	}
	if !strings.Contains(text, "Bank system error, try later") {
		t.Error("the reference does not show the spec codes' meanings")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(problems, "\n"))
	}
	if len(foreign) > 0 {
		t.Errorf("requests to other origins (the page must work offline):\n%s", strings.Join(foreign, "\n"))
	}
}
