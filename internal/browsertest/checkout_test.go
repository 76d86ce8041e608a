package browsertest_test

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	bt "github.com/payreq/payreq/internal/browsertest"
)

// cspHook runs in every frame before the page's own scripts: it marks the document and records CSP
// violations in a DOM attribute, which the isolated worlds of FrameEval can read too.
const cspHook = `(() => {
	const mark = (name, value) => {
		const el = document.documentElement;
		if (el) el.setAttribute(name, (el.getAttribute(name) || '') + value);
	};
	document.addEventListener('securitypolicyviolation', (e) => mark('data-csp', '|' + e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber));
	document.addEventListener('DOMContentLoaded', () => mark('data-csp-hook', '1'));
})()`

// cspViolations is an expression for the violations recorded by cspHook, or "no hook".
const cspViolations = `(document.documentElement.getAttribute('data-csp-hook') ? (document.documentElement.getAttribute('data-csp') || '') : 'no hook')`

func hookCSP(t *testing.T, tab context.Context) {
	t.Helper()
	c, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(c, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspHook}); err != nil {
		t.Fatal(err)
	}
}

func wantNoCSPViolations(t *testing.T, tab context.Context) {
	t.Helper()
	if v := bt.Eval[string](t, tab, cspViolations); v != "" {
		t.Errorf("CSP violations: %s", v)
	}
}

func wantNoCSPViolationsInFrame(t *testing.T, tab context.Context, urlPart string) {
	t.Helper()
	// An element can be visible before DOMContentLoaded (deferred scripts
	// still loading), which is when the hook marks itself: wait for it.
	bt.WaitFrameJS(t, tab, urlPart, `document.documentElement.hasAttribute('data-csp-hook')`, 10*time.Second)
	if v := bt.FrameEval[string](t, tab, urlPart, cspViolations); v != "" {
		t.Errorf("CSP violations in frame %s: %s", urlPart, v)
	}
}

// JavaScript for the hosted page (top frame or, through FrameEval, the checkout iframe).
const (
	jsSet = `const set = (id, v) => { const el = document.getElementById(id); el.focus(); el.value = v;
		el.dispatchEvent(new Event('input', {bubbles: true})); el.blur(); };`
	jsVisible = `((sel) => { const el = document.querySelector(sel); return !!el && el.getClientRects().length > 0; })`
	jsText    = `((sel) => { const el = document.querySelector(sel); return el ? el.textContent.trim() : ''; })`
)

func payByCard(number string) string {
	return `(() => { ` + jsSet + `
		set('cc-name', 'Ada Lovelace'); set('cc-number', ` + bt.JS(number) + `); set('cc-exp', '12/34'); set('cc-csc', '123');
		document.querySelector('#card .pay').click(); return true; })()`
}

// waitRequests waits until fakeAPI has served path at least n times.
func waitRequests(t *testing.T, api *fakeAPI, path string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := 0
		for _, r := range api.requests() {
			if r.Path == path {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s requested %d times, want %d", path, got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func visible(sel string) string { return jsVisible + `(` + bt.JS(sel) + `)` }
func text(sel string) string    { return jsText + `(` + bt.JS(sel) + `)` }

// Tests of the hosted checkout page (web/checkout) in Chromium against fakeAPI.
func TestCheckoutPage(t *testing.T) {
	browser := bt.New(t)
	merchant := newSite(t)

	open := func(t *testing.T, api *fakeAPI, query string) context.Context {
		tab := bt.NewTab(t, browser)
		hookCSP(t, tab)
		bt.Navigate(t, tab, api.Origin+"/checkout?"+query)
		return tab
	}
	waitForm := func(t *testing.T, tab context.Context) {
		t.Helper()
		bt.WaitJS(t, tab, visible("#card .pay"), 10*time.Second)
	}

	t.Run("token moves from the URL to session storage", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin, merchant.Origin).start()
		tab := open(t, api, "requestId=42&token=tok-123")
		waitForm(t, tab)
		got := bt.Eval[map[string]any](t, tab, `({search: location.search, stored: sessionStorage.getItem('paycheckout.token.42'),
			recipient: `+text("#recipient")+`, amount: `+text("#amount")+`, sandbox: `+visible("#sandbox")+`,
			tabs: [...document.querySelectorAll('[role=tab]')].filter(t => !t.hidden).map(t => t.dataset.m),
			pay: `+text("#card .pay")+`, focusStolen: document.activeElement !== document.body})`)
		want := map[string]any{
			"search": "?requestId=42", "stored": "tok-123", "recipient": "Payment to Acme Books", "amount": "€10.50",
			"sandbox": true, "tabs": []any{"card", "wallet", "upi", "qr"}, "pay": "Pay €10.50", "focusStolen": false,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("page state:\n got %v\nwant %v", got, want)
		}
		if s, ok := api.lastRequest("/checkout/api/session"); !ok || s.Token != "tok-123" || s.Query != "origin=" {
			t.Fatalf("session request %+v, want X-Checkout-Token tok-123 and origin=", s)
		}
		wantNoCSPViolations(t, tab)

		// A later load without the token in the URL (e.g. after a reload) uses session storage.
		bt.Eval[void](t, tab, `location.reload()`)
		bt.WaitJS(t, tab, `performance.getEntriesByType('navigation')[0].type === 'reload'`, 10*time.Second)
		waitForm(t, tab)
		if n := len(api.requests()); n < 2 {
			t.Fatalf("only %d requests", n)
		}
		sessions := 0
		for i, r := range api.requests() {
			if r.Path == "/checkout/api/session" {
				sessions++
				if r.Token != "tok-123" {
					t.Errorf("session call %d without the token header", sessions)
				}
			}
			// The token is in the first page URL only: never in another URL, never in a Referer.
			if i > 0 && (strings.Contains(r.Query, "tok-123") || strings.Contains(r.Referer, "tok-123")) {
				t.Errorf("token leaked in request %s %s?%s (Referer %q)", r.Method, r.Path, r.Query, r.Referer)
			}
		}
		if sessions != 2 {
			t.Errorf("%d session calls, want 2", sessions)
		}
		wantNoCSPViolations(t, tab)
	})

	t.Run("a merchant API key as the token is refused, never stored, never sent", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		key := "prk_test_" + strings.Repeat("a", 40)
		for _, q := range []string{"requestId=42&token=" + key, "requestId=42&token=tok-123&x=" + strings.ToUpper(key)} {
			tab := open(t, api, q)
			bt.WaitJS(t, tab, visible("#result-title"), 10*time.Second)
			got := bt.Eval[map[string]any](t, tab, `({title: `+text("#result-title")+`, form: `+visible("#pay")+`,
				search: location.search, stored: Object.keys(sessionStorage).map(k => sessionStorage.getItem(k)).join('|')})`)
			if got["title"] != "This checkout link is invalid" || got["form"] != false || strings.Contains(got["search"].(string), "prk_test_") ||
				strings.Contains(strings.ToLower(got["stored"].(string)), "prk_test_") {
				t.Errorf("%s: page state %v", q, got)
			}
			wantNoCSPViolations(t, tab)
		}
		for _, r := range api.requests() {
			if strings.HasPrefix(r.Path, "/checkout/api/") || strings.Contains(strings.ToLower(r.Token+r.Referer), "prk_") {
				t.Errorf("request after a refused token: %+v", r)
			}
		}
	})

	t.Run("the CSP hook sees violations", func(t *testing.T) {
		// Guards the CSP checks above: an inline style under this CSP must be reported.
		api := newFakeAPI(t, merchant.Origin).start()
		tab := open(t, api, "requestId=42&token=tok-123")
		waitForm(t, tab)
		bt.Eval[void](t, tab, `(() => { const s = document.createElement('script'); s.textContent = 'window.x = 1'; document.body.appendChild(s); })()`)
		if v := bt.Eval[string](t, tab, cspViolations); !strings.Contains(v, "script-src") {
			t.Fatalf("an inline script was not reported: %q", v)
		}
	})

	t.Run("expired or missing token shows a friendly error and no form", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		for _, q := range []string{"requestId=42&token=expired", "requestId=42", "token=tok-123"} {
			tab := open(t, api, q)
			bt.WaitJS(t, tab, visible("#result-title"), 10*time.Second)
			got := bt.Eval[[]any](t, tab, `[`+text("#result-title")+`, `+visible("#pay")+`,
				[...document.querySelectorAll('input')].filter(i => i.getClientRects().length).length]`)
			if !reflect.DeepEqual(got, []any{"This checkout link has expired", false, 0.0}) {
				t.Errorf("%s: [title, form visible, visible inputs] = %v", q, got)
			}
			wantNoCSPViolations(t, tab)
		}
	})

	t.Run("an already paid request shows that state", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin)
		api.requestStatus = 1
		tab := open(t, api.start(), "requestId=42&token=tok-123")
		bt.WaitJS(t, tab, visible("#result-title"), 10*time.Second)
		if got := bt.Eval[string](t, tab, text("#result-title")); got != "Already paid" {
			t.Errorf("title %q", got)
		}
		if bt.Eval[bool](t, tab, visible("#pay")) {
			t.Error("payment form shown for a paid request")
		}
	})

	t.Run("card validation, brand and server field errors", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		tab := open(t, api, "requestId=42&token=tok-123")
		waitForm(t, tab)
		// Real typing: the number is grouped as typed and the brand shown.
		bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("cc-number"), "4111111111111112"), chromedp.SendKeys(chromedp.ID("cc-exp"), "0120"))
		if got := bt.Eval[[]string](t, tab, `[document.getElementById('cc-number').value, `+text("#cc-brand")+`, document.getElementById('cc-exp').value]`); !reflect.DeepEqual(got, []string{"4111 1111 1111 1112", "Visa", "01/20"}) {
			t.Errorf("[number, brand, expiry] = %q", got)
		}
		bt.Do(t, tab, chromedp.Click(chromedp.CSS("#card .pay")))
		bt.WaitJS(t, tab, text("#cc-name-e")+` !== ''`, 5*time.Second)
		errs := bt.Eval[map[string]any](t, tab, `(() => {
			const r = {};
			for (const id of ['cc-name', 'cc-number', 'cc-exp', 'cc-csc', 'cc-email']) {
				const el = document.getElementById(id);
				r[id] = [document.getElementById(id + '-e').textContent, el.getAttribute('aria-invalid'), el.getAttribute('aria-describedby').includes(id + '-e')];
			}
			r.focus = document.activeElement.id;
			return r;
		})()`)
		want := map[string]any{
			"cc-name":   []any{"Enter the name shown on your card.", "true", true},
			"cc-number": []any{"This card number is not valid. Check the digits and try again.", "true", true},
			"cc-exp":    []any{"This card has expired. Please use another card.", "true", true},
			"cc-csc":    []any{"Enter the security code.", "true", true},
			"cc-email":  []any{"", nil, true},
			"focus":     "cc-name",
		}
		if !reflect.DeepEqual(errs, want) {
			t.Fatalf("inline errors:\n got %v\nwant %v", errs, want)
		}
		if _, ok := api.lastRequest("/checkout/api/pay/card"); ok {
			t.Fatal("an invalid form was submitted")
		}

		// American Express wants a 4-digit security code.
		bt.Eval[void](t, tab, `(() => { `+jsSet+` set('cc-number', '378282246310005'); set('cc-csc', '123'); })()`)
		if got := bt.Eval[[]string](t, tab, `[document.getElementById('cc-number').value, `+text("#cc-brand")+`, `+text("#cc-number-e")+`]`); !reflect.DeepEqual(got, []string{"3782 822463 10005", "American Express", ""}) {
			t.Errorf("amex [number, brand, error] = %q", got)
		}
		bt.Eval[void](t, tab, `document.querySelector('#card .pay').click()`)
		bt.WaitJS(t, tab, text("#cc-csc-e")+` === 'Enter the 4-digit code on the front of your card.'`, 5*time.Second)

		// Maestro and Discover's range inside UnionPay's come from the
		// service's own table (internal/card, generated into the page).
		for _, tc := range [][2]string{{"6759649826438453", "Maestro"}, {"6221260000000000", "Discover"}, {"6200000000000005", "UnionPay"}} {
			bt.Eval[void](t, tab, `(() => { `+jsSet+` set('cc-number', '`+tc[0]+`'); })()`)
			if got := bt.Eval[string](t, tab, text("#cc-brand")); got != tc[1] {
				t.Errorf("brand of %s = %q, want %q", tc[0], got, tc[1])
			}
		}

		// Valid on the client, refused by the server: the field error shows next to its field.
		bt.Eval[void](t, tab, `(() => { `+jsSet+` set('cc-name', 'Ada Lovelace'); set('cc-number', '5555555555554444'); set('cc-exp', '1234'); set('cc-csc', '123'); })()`)
		if got := bt.Eval[[]string](t, tab, `[`+text("#cc-brand")+`, document.getElementById('cc-exp').value]`); !reflect.DeepEqual(got, []string{"Mastercard", "12/34"}) {
			t.Errorf("[brand, expiry] = %q", got)
		}
		bt.Eval[void](t, tab, `document.querySelector('#card .pay').click()`)
		bt.WaitJS(t, tab, text("#cc-number-e")+` === 'This card number is not valid. Check the digits and try again.' && document.activeElement.id === 'cc-number' && !document.querySelector('#card fieldset').disabled`, 5*time.Second)
		r, _ := api.lastRequest("/checkout/api/pay/card")
		if want := map[string]any{"holderName": "Ada Lovelace", "number": "5555555555554444", "expiry": "12/34", "cvc": "123"}; !reflect.DeepEqual(r.Body, want) || r.Token != "tok-123" {
			t.Errorf("pay request body %v token %q, want %v and tok-123", r.Body, r.Token, want)
		}
		wantNoCSPViolations(t, tab)
	})

	t.Run("tabs work with the keyboard and the QR payload is shown", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		tab := open(t, api, "requestId=42&token=tok-123")
		waitForm(t, tab)
		bt.Do(t, tab, chromedp.Focus(chromedp.ID("tab-card")), chromedp.KeyEvent(kb.ArrowRight))
		got := bt.Eval[[]any](t, tab, `[document.activeElement.id, document.getElementById('tab-wallet').getAttribute('aria-selected'), `+visible("#wallet")+`, `+visible("#card")+`]`)
		if !reflect.DeepEqual(got, []any{"tab-wallet", "true", true, false}) {
			t.Errorf("after ArrowRight [focus, selected, wallet visible, card visible] = %v", got)
		}
		bt.Do(t, tab, chromedp.KeyEvent(kb.End), chromedp.KeyEvent(kb.Enter))
		bt.Eval[void](t, tab, `document.querySelector('#qr .pay').click()`)
		bt.WaitJS(t, tab, visible("#wait-code"), 5*time.Second)
		if got := bt.Eval[[]string](t, tab, `[`+text("#wait-title")+`, `+text("#wait-code")+`]`); !reflect.DeepEqual(got, []string{"Scan to pay", "upi://pay?pa=acme@upi&am=10.50&cu=EUR"}) {
			t.Errorf("[title, payload] = %q", got)
		}
		// It polls the status while it waits.
		waitRequests(t, api, "/checkout/api/status", 2, 6*time.Second)
	})

	t.Run("success without embedding redirects to the success URL", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		tab := open(t, api, "requestId=42&token=tok-123")
		waitForm(t, tab)
		bt.Eval[void](t, tab, payByCard("4111 1111 1111 1111"))
		bt.WaitJS(t, tab, text("#result-title")+` === 'Payment successful'`, 5*time.Second)
		if got := bt.Eval[[]string](t, tab, `[`+text("#result-ref")+`, document.getElementById('back').href, document.activeElement.id]`); !reflect.DeepEqual(got, []string{"Reference: TX-0000987", api.successURL, "result-title"}) {
			t.Errorf("[reference, back link, focus] = %q", got)
		}
		bt.WaitJS(t, tab, `location.pathname === '/merchant/success'`, 10*time.Second)
	})

	t.Run("decline without a failure URL offers a retry", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin)
		api.failureURL = ""
		tab := open(t, api.start(), "requestId=42&token=tok-123")
		waitForm(t, tab)
		bt.Eval[void](t, tab, payByCard("4000 0000 0000 0002"))
		bt.WaitJS(t, tab, text("#result-title")+` === 'Payment failed'`, 5*time.Second)
		if got := bt.Eval[string](t, tab, text("#result-msg")); !strings.HasPrefix(got, "Declined, contact the card issuer") {
			t.Errorf("failure message %q", got)
		}
		bt.Do(t, tab, chromedp.Click(chromedp.ID("retry")))
		bt.WaitJS(t, tab, visible("#card .pay")+` && document.activeElement.id === 'cc-name'`, 5*time.Second)
	})

	t.Run("mobile screenshots", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		tab := open(t, api, "requestId=42&token=tok-123")
		bt.Do(t, tab, chromedp.EmulateViewport(375, 740, chromedp.EmulateScale(2)))
		waitForm(t, tab)
		if w := bt.Eval[int](t, tab, `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("page is %dpx wide at a 375px viewport: horizontal scrolling", w)
		}
		dir := bt.ScreenshotDir(t)
		bt.Screenshot(t, tab, dir+"/checkout-mobile.png")
		bt.Eval[void](t, tab, `document.querySelector('#card .pay').click()`)
		bt.WaitJS(t, tab, text("#cc-name-e")+` !== ''`, 5*time.Second)
		bt.Screenshot(t, tab, dir+"/checkout-mobile-errors.png")
		bt.Do(t, tab, chromedp.EmulateViewport(1024, 900))
		bt.Screenshot(t, tab, dir+"/checkout-desktop-errors.png")
		bt.Do(t, tab, chromedp.EmulateViewport(375, 740, chromedp.EmulateScale(2)))
		bt.Eval[void](t, tab, payByCard("4111111111111111"))
		bt.WaitJS(t, tab, visible("#result-title"), 5*time.Second)
		bt.Screenshot(t, tab, dir+"/checkout-mobile-success.png")
		bt.Navigate(t, tab, api.Origin+"/checkout/3ds?transactionId=987&requestId=42")
		bt.WaitJS(t, tab, visible("#approve")+` && !document.getElementById('approve').disabled`, 5*time.Second)
		wantNoCSPViolations(t, tab)
		bt.Screenshot(t, tab, dir+"/acs-mobile.png")
		t.Logf("screenshots in %s", dir)
	})
}

// End-to-end tests of the embedded checkout: the merchant page (one origin) runs the real
// PayCheckout, which frames the real hosted page served by fakeAPI (another origin).
func TestEmbeddedCheckout(t *testing.T) {
	browser := bt.New(t)

	setup := func(t *testing.T, registered bool, configure func(*fakeAPI)) (context.Context, *fakeAPI, string) {
		merchant := newSite(t)
		reg := []string{"https://shop.example"}
		if registered {
			reg = append(reg, merchant.Origin)
		}
		api := newFakeAPI(t, merchant.Origin, reg...)
		if configure != nil {
			configure(api)
		}
		api.start()
		merchant.startMerchant(api.Origin)
		pageURL := merchant.Origin + "/?checkout=" + url.QueryEscape(api.Origin)
		tab := bt.NewTab(t, browser)
		hookCSP(t, tab)
		bt.Navigate(t, tab, pageURL)
		bt.WaitJS(t, tab, `window.PayCheckout && window.T`, 5*time.Second)
		t.Cleanup(func() {
			if v := bt.Eval[[]string](t, tab, `window.cspViolations`); len(v) > 0 {
				t.Errorf("CSP violations on the merchant page: %v", v)
			}
			if got := bt.Eval[string](t, tab, `location.href`); got != pageURL {
				t.Errorf("the top window navigated to %s", got)
			}
		})
		return tab, api, merchant.Origin
	}
	ready := func(t *testing.T, tab context.Context, init string) {
		t.Helper()
		bt.Eval[void](t, tab, init)
		bt.WaitJS(t, tab, `T.count('onReady') === 1`, 10*time.Second)
		bt.WaitFrameJS(t, tab, "/checkout", visible("#card .pay"), 5*time.Second)
		wantNoCSPViolationsInFrame(t, tab, "/checkout")
	}
	terminal := func(t *testing.T, tab context.Context, name string, data map[string]any) {
		t.Helper()
		bt.WaitJS(t, tab, `T.calls.length >= 2`, 15*time.Second)
		got := bt.Eval[[]call](t, tab, `T.calls`)
		want := []call{{"onReady", empty, true}, {name, data, true}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("callbacks:\n got %+v\nwant %+v", got, want)
		}
		bt.WaitJS(t, tab, `!document.querySelector('iframe') && !T.overlay()`, 5*time.Second)
		if n := bt.Eval[int](t, tab, `listenerCount('message') + listenerCount('keydown')`); n != 0 {
			t.Errorf("%d listeners left", n)
		}
	}
	// Event messages that reached the merchant window from the checkout, in order (size reports
	// aside: resized tells those).
	messages := func(t *testing.T, tab context.Context) []string {
		return bt.Eval[[]string](t, tab, `T.seen.filter(m => m.data && m.data.source === 'paycheckout' && m.data.type !== 'payment.resize').map(m => m.origin + ' ' + m.data.type)`)
	}
	resized := func(t *testing.T, tab context.Context) []string {
		return bt.Eval[[]string](t, tab, `T.seen.filter(m => m.data && m.data.type === 'payment.resize').map(m => m.origin + ' ' + m.data.data.height)`)
	}
	frameHeight := func(t *testing.T, tab context.Context) float64 {
		return bt.Eval[float64](t, tab, `T.frame().getBoundingClientRect().height`)
	}
	// The Pay button's bottom edge and the frame's viewport height, inside the hosted page.
	payInView := func(t *testing.T, tab context.Context) []float64 {
		return bt.FrameEval[[]float64](t, tab, "/checkout", `[document.querySelector('#card .pay').getBoundingClientRect().bottom, innerHeight, Math.ceil(document.documentElement.getBoundingClientRect().height)]`)
	}

	t.Run("the locale option shows the page in Hindi", func(t *testing.T) {
		tab, _, _ := setup(t, true, nil)
		if msg := bt.Eval[string](t, tab, `T.initError({paymentUrl: T.url(), containerId: 'box', locale: 'hi"><x'})`); !strings.Contains(msg, "locale") {
			t.Errorf("a malformed locale: init error %q", msg)
		}
		ready(t, tab, `T.init({containerId: 'box', locale: 'hi'})`)
		if src := bt.Eval[string](t, tab, `T.frame().src`); !strings.Contains(src, "locale=hi") {
			t.Errorf("iframe src %s has no locale=hi", src)
		}
		// The browser asks for English (Accept-Language en-US): the option wins.
		got := bt.FrameEval[[]string](t, tab, "/checkout", `[document.documentElement.lang, `+text("#title")+`, `+text("#amount")+`,
			`+text("#card .pay")+`, `+text("label[for=cc-number]")+`, `+text(".secure")+`]`)
		want := []string{"hi", "सुरक्षित भुगतान", "€10.50", "€10.50 का भुगतान करें", "कार्ड नंबर",
			"कार्ड विवरण इसी सुरक्षित पेज पर रहते हैं और व्यापारी के साथ कभी साझा नहीं किए जाते।"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Hindi page:\n got %q\nwant %q", got, want)
		}
		bt.FrameEval[void](t, tab, "/checkout", `document.querySelector('#card .pay').click()`)
		bt.WaitFrameJS(t, tab, "/checkout", text("#cc-number-e")+` !== ''`, 5*time.Second)
		if got := bt.FrameEval[string](t, tab, "/checkout", text("#cc-number-e")); got != "अपना कार्ड नंबर दर्ज करें।" {
			t.Errorf("Hindi card number error %q", got)
		}
	})

	t.Run("inline frame fits the page: grows from a small height, keeps a larger one", func(t *testing.T) {
		tab, api, _ := setup(t, true, nil)
		ready(t, tab, `T.init({containerId: 'box', height: '240px'})`)
		// The page reports its content height and the frame grows to it: the Pay button is in view.
		bt.WaitJS(t, tab, `T.frame().getBoundingClientRect().height > 240`, 5*time.Second)
		got := payInView(t, tab)
		if got[0] > got[1] || got[2] != got[1] {
			t.Errorf("Pay button bottom %v, frame viewport %v, content %v: want the frame to fit the content", got[0], got[1], got[2])
		}
		if h := frameHeight(t, tab); h != got[2] {
			t.Errorf("iframe height %v, content %v", h, got[2])
		}
		for _, m := range resized(t, tab) {
			if !strings.HasPrefix(m, api.Origin+" ") {
				t.Errorf("size report %q, want from %s only", m, api.Origin)
			}
		}
		// The content grows (a QR code): the frame follows.
		before := frameHeight(t, tab)
		bt.FrameEval[bool](t, tab, "/checkout", `(document.getElementById('tab-qr').click(), document.querySelector('#qr .pay').click(), true)`)
		bt.WaitFrameJS(t, tab, "/checkout", visible("#wait"), 5*time.Second)
		bt.FrameEval[bool](t, tab, "/checkout", `(document.getElementById('wait-msg').textContent += ' ' + 'x '.repeat(800), true)`)
		bt.WaitJS(t, tab, `T.frame().getBoundingClientRect().height > `+bt.JS(before+100), 5*time.Second)
		grown := bt.FrameEval[[]float64](t, tab, "/checkout", `[innerHeight, Math.ceil(document.documentElement.getBoundingClientRect().height)]`)
		if grown[0] != grown[1] {
			t.Errorf("after growing: frame viewport %v, content %v", grown[0], grown[1])
		}
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)

		// A height above the content stays: it is the minimum.
		tab2, _, _ := setup(t, true, nil)
		ready(t, tab2, `T.init({containerId: 'box', height: '1400px'})`)
		bt.WaitJS(t, tab2, `T.seen.some(m => m.data && m.data.type === 'payment.resize')`, 5*time.Second)
		time.Sleep(200 * time.Millisecond)
		if h := frameHeight(t, tab2); h != 1400 {
			t.Errorf("iframe height %v, want the 1400px minimum", h)
		}
		if got := payInView(t, tab2); got[2] >= 1400 {
			t.Errorf("content %v px: the test needs a page shorter than 1400px", got[2])
		}
		bt.Eval[void](t, tab2, `PayCheckout.destroy()`)
	})

	t.Run("inline card payment reports success", func(t *testing.T) {
		tab, api, _ := setup(t, true, nil)
		ready(t, tab, `T.init({containerId: 'box'})`)
		bt.FrameEval[bool](t, tab, "/checkout", payByCard("4111111111111111"))
		terminal(t, tab, "onSuccess", map[string]any{"url": api.successURL, "requestId": "42", "paymentId": "987"})
		if got := messages(t, tab); !reflect.DeepEqual(got, []string{api.Origin + " payment.ready", api.Origin + " payment.success"}) {
			t.Errorf("messages %q", got)
		}
		for i, r := range api.requests() {
			if i > 0 && (strings.Contains(r.Query, "tok-123") || strings.Contains(r.Referer, "tok-123")) {
				t.Errorf("token leaked in request %s %s?%s (Referer %q)", r.Method, r.Path, r.Query, r.Referer)
			}
		}
	})

	t.Run("modal card decline reports failure", func(t *testing.T) {
		tab, api, _ := setup(t, true, nil)
		ready(t, tab, `T.init({mode: 'modal'})`)
		bt.Screenshot(t, tab, bt.ScreenshotDir(t)+"/modal.png")
		bt.FrameEval[bool](t, tab, "/checkout", payByCard("4000000000000002"))
		terminal(t, tab, "onFailure", map[string]any{"url": api.failureURL, "requestId": "42", "paymentId": "987"})
		if bt.Eval[string](t, tab, `document.body.style.overflow`) != "" {
			t.Error("body overflow not restored")
		}
	})

	for _, c := range []struct {
		name, card, answer, callback string
	}{
		{"3-D Secure approved inside the frame reports success", "4000000000003220", "approve", "onSuccess"},
		{"3-D Secure failed inside the frame reports failure", "4000008400001629", "fail", "onFailure"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab, api, merchantOrigin := setup(t, true, nil)
			ready(t, tab, `T.init({containerId: 'box'})`)
			bt.FrameEval[bool](t, tab, "/checkout", payByCard(c.card))
			bt.WaitFrameJS(t, tab, "/checkout/3ds", visible("#approve")+` && !document.getElementById('approve').disabled`, 10*time.Second)
			wantNoCSPViolationsInFrame(t, tab, "/checkout/3ds")
			acs, _ := api.lastRequest("/checkout/3ds")
			q, _ := url.ParseQuery(acs.Query)
			if q.Get("embedded") != "true" || q.Get("origin") != merchantOrigin || q.Get("transactionId") != "987" || q.Get("requestId") != "42" {
				t.Errorf("3-D Secure page query %q lacks the embedding context", acs.Query)
			}
			bt.FrameEval[bool](t, tab, "/checkout/3ds", `(document.getElementById(`+bt.JS(c.answer)+`).click(), true)`)
			url := api.successURL
			if c.callback == "onFailure" {
				url = api.failureURL
			}
			terminal(t, tab, c.callback, map[string]any{"url": url, "requestId": "42", "paymentId": "987"})
			done, _ := api.lastRequest("/checkout/api/3ds/complete")
			if done.Token != "tok-123" || done.Body["result"] != c.answer {
				t.Errorf("3ds/complete request %+v", done)
			}
			if r, ok := api.lastRequest("/checkout"); !ok || !strings.Contains(r.Query, "resume=1") || strings.Contains(r.Query, "token") {
				t.Errorf("resume load %+v", r)
			}
		})
	}

	t.Run("UPI collect waits, polls and reports success", func(t *testing.T) {
		tab, api, _ := setup(t, true, nil)
		ready(t, tab, `T.init({containerId: 'box'})`)
		bt.FrameEval[bool](t, tab, "/checkout", `(() => { document.getElementById('tab-upi').click(); `+jsSet+`
			set('upi-id', 'success@upi'); document.querySelector('#upi .pay').click(); return true; })()`)
		bt.WaitFrameJS(t, tab, "/checkout", text("#wait-code")+` === 'Reference: UPI-REF-1'`, 5*time.Second)
		terminal(t, tab, "onSuccess", map[string]any{"url": api.successURL, "requestId": "42", "paymentId": "987"})
		if r, _ := api.lastRequest("/checkout/api/pay/upi"); !reflect.DeepEqual(r.Body, map[string]any{"upiId": "success@upi"}) {
			t.Errorf("UPI body %v", r.Body)
		}
	})

	t.Run("cancel button reports cancel", func(t *testing.T) {
		tab, _, _ := setup(t, true, func(f *fakeAPI) { f.methods = []string{"card"} })
		ready(t, tab, `T.init({mode: 'modal'})`)
		if bt.FrameEval[bool](t, tab, "/checkout", visible("#tabs")) {
			t.Error("tabs shown for a single method")
		}
		bt.FrameEval[bool](t, tab, "/checkout", `(document.getElementById('cancel').click(), true)`)
		terminal(t, tab, "onCancel", empty)
	})

	t.Run("demo merchant page", func(t *testing.T) {
		api := newFakeAPI(t, "'self'")
		api.registered = []string{api.Origin}
		api.start()
		tab := bt.NewTab(t, browser)
		hookCSP(t, tab)
		bt.Navigate(t, tab, api.Origin+"/demo")
		bt.WaitJS(t, tab, `window.PayCheckout && !document.getElementById('pay-inline').disabled`, 5*time.Second)
		bt.Do(t, tab, chromedp.Click(chromedp.ID("pay-inline")))
		bt.WaitJS(t, tab, `/onReady/.test(document.getElementById('log').textContent) && !!document.querySelector('#checkout iframe')`, 10*time.Second)
		bt.WaitFrameJS(t, tab, "/checkout", visible("#card .pay"), 5*time.Second)
		bt.FrameEval[bool](t, tab, "/checkout", payByCard("4111111111111111"))
		bt.WaitJS(t, tab, `/onSuccess .*"paymentId":"987"/.test(document.getElementById('log').textContent)`, 10*time.Second)
		bt.WaitJS(t, tab, `!document.querySelector('iframe') && !document.getElementById('pay-modal').disabled`, 5*time.Second)
		if r, _ := api.lastRequest("/demo/api/checkout"); !reflect.DeepEqual(r.Body, map[string]any{"amount": "10.50", "unit": "EUR"}) {
			t.Errorf("demo checkout request body %v", r.Body)
		}

		// The modal, closed with its close button.
		bt.Do(t, tab, chromedp.Click(chromedp.ID("pay-modal")))
		bt.WaitJS(t, tab, `document.getElementById('log').children.length >= 5 && /onReady[^]*onReady/.test(document.getElementById('log').textContent)`, 10*time.Second)
		bt.Do(t, tab, chromedp.Click(chromedp.CSS(`[data-paycheckout=backdrop] button`)))
		bt.WaitJS(t, tab, `/onCancel/.test(document.getElementById('log').textContent) && !document.querySelector('[data-paycheckout]')`, 5*time.Second)
		bt.Screenshot(t, tab, bt.ScreenshotDir(t)+"/demo.png")
		wantNoCSPViolations(t, tab)
	})

	t.Run("unregistered parent origin: nothing is posted", func(t *testing.T) {
		tab, _, _ := setup(t, false, nil)
		bt.Eval[void](t, tab, `T.init({containerId: 'box'})`)
		bt.WaitFrameJS(t, tab, "/checkout", text("#result-title")+` === 'This checkout cannot be shown here'`, 10*time.Second)
		if bt.FrameEval[bool](t, tab, "/checkout", visible("#pay")) {
			t.Error("payment form shown although the result cannot be reported")
		}
		if got := messages(t, tab); len(got) != 0 {
			t.Errorf("messages posted: %q", got)
		}
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)
	})
}
