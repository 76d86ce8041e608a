package browsertest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
)

// googlePayJS is the one seam where the tests replace a wallet: Google's servers are out of reach,
// so the browser's request for Google Pay's script is answered with a stand-in of the same API
// (google.payments.api.PaymentsClient: isReadyToPay, createButton, loadPaymentData). The stand-in
// records what the page asked for in <html data-gpay> and, when its button is pressed, "pays" with
// the sandbox wallet token it was given, or rejects with statusCode CANCELED as Google Pay does
// when the shopper closes the payment sheet. Nothing else of the page or the stack is replaced.
const googlePayJS = "https://pay.google.com/gp/p/js/pay.js"

func googlePayStandIn(token string, cancel bool) string {
	return `(() => {
	// The calls are kept in an attribute: the tests read frames from an isolated world, which
	// sees the DOM but not the page's globals.
	const calls = [];
	const G = {token: ` + bt.JS(token) + `, cancel: ` + bt.JS(cancel) + `,
		calls: {push: (c) => { calls.push(c); document.documentElement.setAttribute('data-gpay', JSON.stringify(calls)); }}};
	class PaymentsClient {
		constructor(opts) { G.calls.push({fn: 'PaymentsClient', arg: opts}); }
		isReadyToPay(req) { G.calls.push({fn: 'isReadyToPay', arg: req}); return Promise.resolve({result: true}); }
		createButton(opts) {
			G.calls.push({fn: 'createButton', arg: {buttonType: opts.buttonType}});
			const b = document.createElement('button');
			b.type = 'button';
			b.id = 'gpay-stand-in';
			b.textContent = 'Google Pay';
			b.addEventListener('click', opts.onClick);
			return b;
		}
		loadPaymentData(req) {
			G.calls.push({fn: 'loadPaymentData', arg: req});
			if (G.cancel) return Promise.reject({statusCode: 'CANCELED', statusMessage: 'User closed the Payment Request UI.'});
			return Promise.resolve({apiVersion: 2, apiVersionMinor: 0, paymentMethodData: {type: 'CARD', description: 'Visa •••• 1111',
				info: {cardNetwork: 'VISA', cardDetails: '1111'}, tokenizationData: {type: 'PAYMENT_GATEWAY', token: G.token}}});
		}
	}
	window.google = window.google || {};
	window.google.payments = {api: {PaymentsClient}};
})();`
}

// standInGooglePay makes the tab answer every request for Google Pay's script with the stand-in.
func standInGooglePay(t *testing.T, tab context.Context, script string) {
	t.Helper()
	standInScripts(t, tab, map[string]string{googlePayJS: script})
}

// standInScripts makes the tab answer every request for one of the scripts' URLs with its stand-in
// (the DevTools Fetch domain; the checkout iframe is same-site, so it is the tab's own target).
func standInScripts(t *testing.T, tab context.Context, scripts map[string]string) {
	t.Helper()
	// Listen's callback must not run commands: answer from a goroutine.
	err := chromedp.Listen(tab, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(tab, 10*time.Second)
			defer cancel()
			var err error
			if script, ok := scripts[e.Request.URL]; ok {
				_, err = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: 200,
					Body: []byte(script), ResponseHeaders: []*fetch.HeaderEntry{
						{Name: "Content-Type", Value: "text/javascript"}, {Name: "Cache-Control", Value: "no-store"}}})
			} else {
				_, err = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			}
			if err != nil && tab.Err() == nil {
				t.Logf("fetch %s: %v", e.Request.URL, err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	var patterns []*fetch.RequestPattern
	for u := range scripts {
		patterns = append(patterns, &fetch.RequestPattern{URLPattern: u})
	}
	c, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(c, fetch.Enable, fetch.EnableParams{Patterns: patterns}); err != nil {
		t.Fatal(err)
	}
}

// gpay evaluates expr with G bound to the stand-in's recorded calls.
func gpay(expr string) string {
	return `(() => { const G = JSON.parse(document.documentElement.getAttribute('data-gpay') || '[]'); return (` + expr + `); })()`
}

// TestE2EWalletButtons: the hosted page's wallet tab inside PayCheckout (inline and modal) on the
// real sandbox stack, with Google Pay's script replaced by the stand-in: the Google Pay button pays
// with the sandbox's tokens (success, decline), a closed sheet leaves the checkout open, and
// Chromium (which has no ApplePaySession) shows no Apple Pay button.
func TestE2EWalletButtons(t *testing.T) {
	browser, b := e2eSetup(t)

	// openWallet opens the checkout in mode with the stand-in, selects the wallet tab and waits for
	// the Google Pay button; it checks the iframe's allow="payment", the Google Pay requests, the
	// absent Apple Pay button and that no token field is shown.
	openWallet := func(t *testing.T, mode, amount, token string, cancel bool) (*shopTab, string) {
		t.Helper()
		id := b.createRequest(t, amount)
		s := openShop(t, browser, b.shop)
		hookCSP(t, s.ctx)
		standInGooglePay(t, s.ctx, googlePayStandIn(token, cancel))
		s.open(t, mode, b.session(t, id))
		if got := bt.Eval[string](t, s.ctx, `E.frame().getAttribute('allow')`); got != "payment" {
			t.Errorf("%s iframe allow=%q, want \"payment\"", mode, got)
		}
		s.ready(t)
		bt.FrameEval[bool](t, s.ctx, "/checkout", `(document.getElementById('tab-wallet').click(), true)`)
		bt.WaitFrameJS(t, s.ctx, "/checkout", visible("#gpay-stand-in"), readyTimeout)
		got := bt.FrameEval[map[string]any](t, s.ctx, "/checkout", gpay(`{
			applePay: `+visible("#applepay")+`, none: `+visible("#wallet-none")+`,
			inputs: document.querySelectorAll('#wallet input').length,
			env: G[0].arg.environment,
			ready: JSON.stringify(G[1].arg.allowedPaymentMethods[0].tokenizationSpecification),
			button: G[2].fn,
			featurePolicy: document.featurePolicy ? document.featurePolicy.allowsFeature('payment') : 'n/a'}`))
		want := map[string]any{"applePay": false, "none": false, "inputs": 0.0, "env": "TEST",
			"ready":  `{"type":"PAYMENT_GATEWAY","parameters":{"gateway":"example","gatewayMerchantId":"` + b.m.ID + `"}}`,
			"button": "createButton", "featurePolicy": true}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("wallet tab:\n got %v\nwant %v", got, want)
		}
		return s, id
	}
	press := func(t *testing.T, s *shopTab) {
		t.Helper()
		bt.FrameEval[bool](t, s.ctx, "/checkout", `(document.getElementById('gpay-stand-in').click(), true)`)
	}
	// sheet checks what the page asked Google Pay to charge.
	sheet := func(t *testing.T, s *shopTab, amount string) {
		t.Helper()
		bt.WaitFrameJS(t, s.ctx, "/checkout", gpay(`G.some(c => c.fn === 'loadPaymentData')`), 5*time.Second)
		got := bt.FrameEval[string](t, s.ctx, "/checkout", gpay(`JSON.stringify(G.find(c => c.fn === 'loadPaymentData').arg.transactionInfo)`))
		if want := `{"totalPriceStatus":"FINAL","totalPrice":"` + amount + `","currencyCode":"EUR"}`; got != want {
			t.Errorf("loadPaymentData transactionInfo %s, want %s", got, want)
		}
	}

	for _, mode := range []string{"inline", "modal"} {
		t.Run(mode+": Google Pay success pays the request", func(t *testing.T) {
			s, id := openWallet(t, mode, "16.00", "tok_success", false)
			press(t, s)
			sheet(t, s, "16.00")
			data := s.terminal(t, "onSuccess", "url", "requestId", "paymentId")
			if data["url"] != b.successURL() || data["requestId"] != id {
				t.Errorf("onSuccess %v, want url %s and requestId %s", data, b.successURL(), id)
			}
			b.wantStatus(t, id, 1, 1.0, "-")
			if n := s.log.requested("POST " + b.api + "/checkout/api/pay/wallet"); n != 1 {
				t.Errorf("%d POST /checkout/api/pay/wallet, want 1", n)
			}
		})
	}

	t.Run("inline: Google Pay with a declining token reports failure", func(t *testing.T) {
		s, id := openWallet(t, "inline", "16.50", "tok_declined", false)
		press(t, s)
		data := s.terminal(t, "onFailure", "url", "requestId", "paymentId")
		if data["url"] != b.failureURL() || data["requestId"] != id {
			t.Errorf("onFailure %v, want url %s and requestId %s", data, b.failureURL(), id)
		}
		b.wantStatus(t, id, 2, 2.0, "999")
	})

	t.Run("modal: closing the Google Pay sheet leaves the checkout open and payable", func(t *testing.T) {
		s, id := openWallet(t, "modal", "17.00", "", true)
		wantNoCSPViolationsInFrame(t, s.ctx, "/checkout")
		press(t, s)
		sheet(t, s, "17.00")
		time.Sleep(500 * time.Millisecond) // a wrongly fired callback or attempt would show up here
		// No callback but onReady: the shopper is back on the wallet tab, free to pay another way.
		if ev := s.events(t); len(ev) != 1 || ev[0].Name != "onReady" {
			t.Errorf("callbacks after closing the sheet %+v, want only onReady", ev)
		}
		st := bt.FrameEval[map[string]any](t, s.ctx, "/checkout", `({wallet: `+visible("#wallet")+`, button: `+visible("#gpay-stand-in")+
			`, error: document.getElementById('formerr').textContent})`)
		if want := map[string]any{"wallet": true, "button": true, "error": ""}; fmt.Sprint(st) != fmt.Sprint(want) {
			t.Errorf("page after closing the sheet %v, want %v", st, want)
		}
		if n := s.log.requested("/checkout/api/pay/"); n != 0 {
			t.Errorf("%d payment attempts after closing the sheet, want none", n)
		}
		b.wantStatus(t, id, 2, nil, "-")
		// The modal still closes the usual way.
		bt.Eval[void](t, s.ctx, `E.overlay().querySelector('button[aria-label="Close checkout"]').click()`)
		s.terminal(t, "onCancel")
	})
}

// TestWalletButtonStripeGateway: with a production stage's configuration (Google Pay's PRODUCTION
// environment, the stripe gateway and the publishable key), the hosted page asks Google Pay for a
// Stripe token and sends the API that token's id, never the JSON around it.
func TestWalletButtonStripeGateway(t *testing.T) {
	browser := bt.New(t)
	api := newFakeAPI(t, "'none'")
	api.wallets = map[string]any{"applePay": true, "googlePay": map[string]any{"environment": "PRODUCTION", "merchantName": "Acme Books",
		"tokenizationParameters": map[string]any{"gateway": "stripe", "stripe:version": "2018-10-31", "stripe:publishableKey": "pk_test_123"}}}
	api.start()
	tab := bt.NewTab(t, browser)
	hookCSP(t, tab)
	// What Google Pay returns for the stripe gateway: a Stripe Token object, as JSON.
	standInGooglePay(t, tab, googlePayStandIn(`{"id":"tok_1GpayVisa","object":"token","type":"card","card":{"brand":"Visa","last4":"1111"}}`, false))
	bt.Navigate(t, tab, api.Origin+"/checkout?requestId=42&token="+api.token)
	bt.WaitJS(t, tab, visible("#card .pay"), 10*time.Second)
	bt.Eval[void](t, tab, `document.getElementById('tab-wallet').click()`)
	bt.WaitJS(t, tab, visible("#gpay-stand-in"), 10*time.Second)
	got := bt.Eval[map[string]any](t, tab, gpay(`{env: G[0].arg.environment, spec: JSON.stringify(G[1].arg.allowedPaymentMethods[0].tokenizationSpecification),
		applePay: `+visible("#applepay")+`}`))
	want := map[string]any{"env": "PRODUCTION", "applePay": false,
		"spec": `{"type":"PAYMENT_GATEWAY","parameters":{"gateway":"stripe","stripe:publishableKey":"pk_test_123","stripe:version":"2018-10-31"}}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Google Pay set-up:\n got %v\nwant %v", got, want)
	}
	bt.Eval[void](t, tab, `document.getElementById('gpay-stand-in').click()`)
	waitRequests(t, api, "/checkout/api/pay/wallet", 1, 10*time.Second)
	if r, _ := api.lastRequest("/checkout/api/pay/wallet"); fmt.Sprint(r.Body) != "map[token:tok_1GpayVisa]" {
		t.Errorf("POST /checkout/api/pay/wallet body %v, want {token: tok_1GpayVisa}", r.Body)
	}
	bt.WaitJS(t, tab, visible("#result"), 10*time.Second)
	wantNoCSPViolations(t, tab)
}

// stripeJS is Stripe.js's URL; the Apple Pay button of a production page runs on its payment request.
const stripeJS = "https://js.stripe.com/v3/"

// stripeJSStandIn is the seam's stand-in for Stripe.js (Stripe(key).paymentRequest: canMakePayment,
// on, show). It records the calls in <html data-stripe> and, when the sheet is shown, answers with
// the card PaymentMethod pmID as Stripe.js does after Apple Pay authorizes, or fires "cancel" as
// when the shopper closes the Apple Pay sheet. ev.complete's status is recorded too.
func stripeJSStandIn(pmID string, cancel bool) string {
	return `(() => {
	const calls = [];
	const rec = (c) => { calls.push(c); document.documentElement.setAttribute('data-stripe', JSON.stringify(calls)); };
	window.Stripe = function (key) {
		rec({fn: 'Stripe', arg: key});
		return {paymentRequest(opts) {
			rec({fn: 'paymentRequest', arg: opts});
			const on = {};
			return {
				canMakePayment() { return Promise.resolve({applePay: true, googlePay: false, link: false}); },
				on(name, fn) { on[name] = fn; },
				show() {
					rec({fn: 'show'});
					setTimeout(() => {
						if (` + bt.JS(cancel) + `) { if (on.cancel) on.cancel(); return; }
						on.paymentmethod({paymentMethod: {id: ` + bt.JS(pmID) + `, type: 'card',
							card: {brand: 'visa', last4: '4242', wallet: {type: 'apple_pay'}}},
							complete: (status) => rec({fn: 'complete', arg: status})});
					}, 0);
				}
			};
		}};
	};
})();`
}

// applePaySession is the browser's side of the seam: Chromium has no ApplePaySession, so the
// tab gets one that says Apple Pay is available, as Safari's does on a device with a card.
const applePaySession = `window.ApplePaySession = function () {}; window.ApplePaySession.canMakePayments = () => true;`

// stripeCalls evaluates expr with S bound to the Stripe.js stand-in's recorded calls.
func stripeCalls(expr string) string {
	return `(() => { const S = JSON.parse(document.documentElement.getAttribute('data-stripe') || '[]'); return (` + expr + `); })()`
}

// TestWalletButtonApplePayThroughStripe: a production page offers Apple Pay through Stripe.js's
// payment request where the browser offers Apple Pay, under the checkout handler's own policy with
// Stripe.js's origins; the total is in Stripe's minor units; the PaymentMethod Stripe.js hands the
// page (pm_…) is what the page sends the API, and the sheet is completed with the outcome; a closed
// sheet makes no attempt. Without ApplePaySession no Apple Pay button shows.
func TestWalletButtonApplePayThroughStripe(t *testing.T) {
	browser := bt.New(t)
	applePayCfg := map[string]any{"publishableKey": "pk_test_123", "country": "DE", "currency": "eur", "amount": 1050, "label": "Acme Books"}
	open := func(t *testing.T, pmID string, cancel, hasApplePay bool) (*fakeAPI, context.Context) {
		t.Helper()
		api := newFakeAPI(t, "'none'")
		api.wallets = map[string]any{"applePay": applePayCfg}
		api.stripePolicy = true
		api.start()
		tab := bt.NewTab(t, browser)
		hookCSP(t, tab)
		if hasApplePay {
			c, cancelCtx := context.WithTimeout(tab, 10*time.Second)
			defer cancelCtx()
			if _, err := chromedp.Call(c, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: applePaySession}); err != nil {
				t.Fatal(err)
			}
		}
		standInScripts(t, tab, map[string]string{stripeJS: stripeJSStandIn(pmID, cancel)})
		bt.Navigate(t, tab, api.Origin+"/checkout?requestId=42&token="+api.token)
		bt.WaitJS(t, tab, visible("#card .pay"), 10*time.Second)
		bt.Eval[void](t, tab, `document.getElementById('tab-wallet').click()`)
		return api, tab
	}

	t.Run("Apple Pay pays with the PaymentMethod Stripe.js returns", func(t *testing.T) {
		api, tab := open(t, "pm_1ApplePayVisa", false, true)
		bt.WaitJS(t, tab, visible("#applepay"), 10*time.Second)
		got := bt.Eval[map[string]any](t, tab, stripeCalls(`{key: S[0].arg, request: JSON.stringify(S[1].arg), none: `+visible("#wallet-none")+`,
			inputs: document.querySelectorAll('#wallet input').length}`))
		want := map[string]any{"key": "pk_test_123", "none": false, "inputs": 0.0,
			"request": `{"country":"DE","currency":"eur","total":{"label":"Acme Books","amount":1050},"disableWallets":["googlePay","browserCard","link"]}`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Stripe.js payment request:\n got %v\nwant %v", got, want)
		}
		bt.Eval[void](t, tab, `document.getElementById('applepay').click()`)
		waitRequests(t, api, "/checkout/api/pay/wallet", 1, 10*time.Second)
		if r, _ := api.lastRequest("/checkout/api/pay/wallet"); fmt.Sprint(r.Body) != "map[token:pm_1ApplePayVisa]" {
			t.Errorf("POST /checkout/api/pay/wallet body %v, want {token: pm_1ApplePayVisa}", r.Body)
		}
		bt.WaitJS(t, tab, stripeCalls(`S.some(c => c.fn === 'complete')`), 10*time.Second)
		if st := bt.Eval[string](t, tab, stripeCalls(`S.find(c => c.fn === 'complete').arg`)); st != "success" {
			t.Errorf("Apple Pay sheet completed with %q, want success", st)
		}
		bt.WaitJS(t, tab, visible("#result"), 10*time.Second)
		wantNoCSPViolations(t, tab)
	})

	t.Run("closing the Apple Pay sheet makes no attempt", func(t *testing.T) {
		api, tab := open(t, "", true, true)
		bt.WaitJS(t, tab, visible("#applepay"), 10*time.Second)
		bt.Eval[void](t, tab, `document.getElementById('applepay').click()`)
		bt.WaitJS(t, tab, stripeCalls(`S.some(c => c.fn === 'show')`), 10*time.Second)
		time.Sleep(500 * time.Millisecond) // a wrongly made attempt would show up here
		if n := len(api.requests()); n > 0 {
			for _, r := range api.requests() {
				if strings.HasPrefix(r.Path, "/checkout/api/pay/") {
					t.Errorf("attempt %s after closing the sheet, want none", r.Path)
				}
			}
		}
		st := bt.Eval[map[string]any](t, tab, `({button: `+visible("#applepay")+`, error: document.getElementById('formerr').textContent})`)
		if want := map[string]any{"button": true, "error": ""}; fmt.Sprint(st) != fmt.Sprint(want) {
			t.Errorf("page after closing the sheet %v, want %v", st, want)
		}
		wantNoCSPViolations(t, tab)
	})

	t.Run("no Apple Pay button where the browser has no Apple Pay", func(t *testing.T) {
		_, tab := open(t, "pm_unused", false, false)
		bt.WaitJS(t, tab, visible("#wallet-none"), 10*time.Second)
		if bt.Eval[bool](t, tab, visible("#applepay")) {
			t.Error("Apple Pay button shown without ApplePaySession")
		}
	})
}
