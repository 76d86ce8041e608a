package browsertest_test

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	bt "github.com/payreq/payreq/internal/browsertest"
)

// call is one PayCheckout callback recorded by the harness (testdata/harness.js).
type call struct {
	Name       string         `json:"name"`
	Data       map[string]any `json:"data"`
	FrameInDom bool           `json:"frameInDom"`
}

type void = chromedp.Void

func msg(typ string, data any) map[string]any {
	return map[string]any{"source": "paycheckout", "type": typ, "data": data}
}

var (
	successData = map[string]any{"url": "https://shop.example/ok?o=1", "requestId": "42", "paymentId": "987"}
	failureData = map[string]any{"url": "https://shop.example/failed", "requestId": "42", "paymentId": "988"}
	pendingData = map[string]any{"url": "https://shop.example/ok?o=1", "requestId": "42"}
	empty       = map[string]any{}
)

// Component tests of web/sdk/paycheckout.js in Chromium. The merchant page and the (fake) checkout
// page are on two different origins (two 127.0.0.1 ports); a third origin plays a foreign site.
func TestPayCheckout(t *testing.T) {
	browser := bt.New(t)
	merchant, checkout, other := newSite(t), newSite(t), newSite(t)
	merchant.startMerchant(checkout.Origin, other.Origin)
	checkout.startFakeCheckout(merchant.Origin)
	other.startFakeCheckout(merchant.Origin)
	pageURL := merchant.Origin + "/?checkout=" + url.QueryEscape(checkout.Origin) + "&other=" + url.QueryEscape(other.Origin)

	open := func(t *testing.T) context.Context {
		tab := bt.NewTab(t, browser)
		bt.Navigate(t, tab, pageURL)
		bt.WaitJS(t, tab, `window.PayCheckout && window.T`, 5*time.Second)
		t.Cleanup(func() {
			if v := bt.Eval[[]string](t, tab, `window.cspViolations`); len(v) > 0 {
				t.Errorf("CSP violations on the merchant page: %v", v)
			}
		})
		return tab
	}
	calls := func(t *testing.T, tab context.Context) []call { return bt.Eval[[]call](t, tab, `T.calls`) }
	listeners := func(t *testing.T, tab context.Context) (message, keydown int) {
		n := bt.Eval[[]int](t, tab, `[listenerCount('message'), listenerCount('keydown')]`)
		return n[0], n[1]
	}
	wantListeners := func(t *testing.T, tab context.Context, message, keydown int) {
		t.Helper()
		if m, k := listeners(t, tab); m != message || k != keydown {
			t.Fatalf("window listeners: message=%d keydown=%d, want %d and %d", m, k, message, keydown)
		}
	}
	waitLoaded := func(t *testing.T, tab context.Context, frameExpr string) {
		t.Helper()
		bt.WaitJS(t, tab, frameExpr+` && T.isLoaded(`+frameExpr+`.contentWindow)`, 10*time.Second)
	}
	// send makes the fake checkout page in frameExpr post msgs to the merchant window, and waits
	// until the merchant window has received them all (so PayCheckout has handled them too).
	send := func(t *testing.T, tab context.Context, frameExpr string, msgs ...any) {
		t.Helper()
		before := bt.Eval[int](t, tab, `T.seen.length`)
		bt.Eval[void](t, tab, `T.send(`+frameExpr+`.contentWindow, `+bt.JS(msgs)+`)`)
		bt.WaitJS(t, tab, `T.seen.length >= `+bt.JS(before+len(msgs)), 5*time.Second)
	}
	wantCalls := func(t *testing.T, tab context.Context, want ...call) {
		t.Helper()
		got := calls(t, tab)
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("callbacks:\n got %+v\nwant %+v", got, want)
		}
	}

	t.Run("inline ready once, success with exact payload, then removed", func(t *testing.T) {
		tab := open(t)
		wantListeners(t, tab, 0, 0)
		bt.Eval[void](t, tab, `T.init({containerId: 'box'})`)

		src, err := url.Parse(bt.Eval[string](t, tab, `T.frame().src`))
		if err != nil {
			t.Fatal(err)
		}
		q := src.Query()
		if got := src.Scheme + "://" + src.Host; got != checkout.Origin || src.Path != "/checkout" {
			t.Errorf("iframe src %s, want %s/checkout", src, checkout.Origin)
		}
		for k, v := range map[string]string{"requestId": "42", "token": "tok-123", "embedded": "true", "origin": merchant.Origin} {
			if q.Get(k) != v {
				t.Errorf("iframe src param %s=%q, want %q (src %s)", k, q.Get(k), v, src)
			}
		}
		if got := bt.Eval[string](t, tab, `T.frame().parentElement.id`); got != "box" {
			t.Errorf("iframe parent #%s, want #box", got)
		}
		size := bt.Eval[[]string](t, tab, `[T.frame().style.width, T.frame().style.height, T.frame().title]`)
		if size[0] != "480px" || size[1] != "700px" || size[2] == "" {
			t.Errorf("iframe width/height/title = %q, want 480px, 700px and a title", size)
		}
		wantListeners(t, tab, 1, 0)

		waitLoaded(t, tab, `T.frame()`)
		send(t, tab, `T.frame()`, msg("payment.ready", empty), msg("payment.ready", empty))
		wantCalls(t, tab, call{"onReady", empty, true})

		send(t, tab, `T.frame()`, msg("payment.success", successData))
		wantCalls(t, tab, call{"onReady", empty, true}, call{"onSuccess", successData, true})
		if bt.Eval[bool](t, tab, `!!document.querySelector('iframe')`) {
			t.Fatal("iframe still in the page after onSuccess")
		}
		wantListeners(t, tab, 0, 0)
	})

	t.Run("inline custom size", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box', width: '100%', height: '520px'})`)
		size := bt.Eval[[]string](t, tab, `[T.frame().style.width, T.frame().style.height]`)
		if size[0] != "100%" || size[1] != "520px" {
			t.Errorf("iframe width/height = %q, want 100%% and 520px", size)
		}
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)
		wantListeners(t, tab, 0, 0)
	})

	t.Run("init validates its options", func(t *testing.T) {
		tab := open(t)
		for _, c := range []struct{ opts, want string }{
			{`{paymentUrl: T.url()}`, "containerId is required"},
			{`{mode: 'inline', paymentUrl: T.url()}`, "containerId is required"},
			{`{paymentUrl: T.url(), containerId: 'nope'}`, `"nope"`},
			{`{containerId: 'box'}`, "paymentUrl is required"},
			{`{paymentUrl: T.checkout + '/checkout?requestId=42', containerId: 'box'}`, "requestId and token"},
			{`{paymentUrl: T.checkout + '/checkout?token=t', containerId: 'box'}`, "requestId and token"},
			{`{paymentUrl: 'http://pay.example/checkout?requestId=1&token=t', containerId: 'box'}`, "https"},
			{`{paymentUrl: T.url() + '&apiKey=secret', containerId: 'box'}`, "API key"},
			{`{paymentUrl: T.checkout + '/checkout?requestId=1&token=prk_test_' + 'a'.repeat(40), containerId: 'box'}`, "API key"},
			{`{paymentUrl: T.url() + '&ref=PRK_LIVE_' + 'b'.repeat(40), containerId: 'box'}`, "API key"},
			{`{paymentUrl: T.url() + '#prk_live_' + 'c'.repeat(40), containerId: 'box'}`, "API key"},
			{`{mode: 'popup', paymentUrl: T.url(), containerId: 'box'}`, "mode"},
			{`{paymentUrl: T.url(), containerId: 'box', onSuccess: 'alert(1)'}`, "onSuccess must be a function"},
			{`undefined`, "options"},
		} {
			got := bt.Eval[string](t, tab, `T.initError(`+c.opts+`)`)
			if !strings.Contains(got, c.want) || !strings.HasPrefix(got, "PayCheckout: ") {
				t.Errorf("init(%s) threw %q, want an Error mentioning %q", c.opts, got, c.want)
			}
		}
		if n := bt.Eval[int](t, tab, `document.querySelectorAll('iframe').length`); n != 0 {
			t.Errorf("%d iframes after failed inits", n)
		}
		wantListeners(t, tab, 0, 0)
		// Modal mode needs no container.
		if got := bt.Eval[string](t, tab, `T.initError({mode: 'modal', paymentUrl: T.url()})`); got != "" {
			t.Errorf("modal init without containerId threw %q", got)
		}
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)
		wantListeners(t, tab, 0, 0)
	})

	t.Run("modal overlay, scroll lock, Esc cancels and restores", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `document.body.style.overflow = 'scroll'; document.getElementById('opener').focus()`)
		bt.Eval[void](t, tab, `T.init({mode: 'modal'})`)
		st := bt.Eval[map[string]any](t, tab, `(() => {
			const o = T.overlay(), d = o && o.querySelector('[role=dialog]'), cs = o && getComputedStyle(o);
			return {
				overlay: !!o, parent: o && o.parentElement.tagName, position: cs && cs.position,
				backdrop: cs && cs.backgroundColor, modal: d && d.getAttribute('aria-modal'),
				dialogWidth: d && d.style.width, frameInDialog: !!(d && d.contains(T.frame())),
				frameHeight: T.frame().style.height,
				close: !!(d && d.querySelector('button[aria-label="Close checkout"]')),
				overflow: document.body.style.overflow, focusInDialog: !!(d && d.contains(document.activeElement)),
				pageInert: document.querySelector('h1').inert
			};
		})()`)
		want := map[string]any{
			"overlay": true, "parent": "BODY", "position": "fixed", "backdrop": "rgba(17, 24, 39, 0.6)", "modal": "true",
			"dialogWidth": "480px", "frameInDialog": true, "frameHeight": "700px", "close": true, "overflow": "hidden",
			"focusInDialog": true, "pageInert": true,
		}
		if !reflect.DeepEqual(st, want) {
			t.Fatalf("modal state:\n got %v\nwant %v", st, want)
		}
		wantListeners(t, tab, 1, 1)
		waitLoaded(t, tab, `T.frame()`)
		send(t, tab, `T.frame()`, msg("payment.ready", empty))

		bt.Do(t, tab, chromedp.KeyEvent(kb.Escape))
		bt.WaitJS(t, tab, `T.count('onCancel') === 1`, 5*time.Second)
		wantCalls(t, tab, call{"onReady", empty, true}, call{"onCancel", empty, true})
		after := bt.Eval[map[string]any](t, tab, `({overlay: !!T.overlay(), frames: document.querySelectorAll('iframe').length,
			overflow: document.body.style.overflow, focus: document.activeElement.id, pageInert: document.querySelector('h1').inert})`)
		if want := map[string]any{"overlay": false, "frames": 0.0, "overflow": "scroll", "focus": "opener", "pageInert": false}; !reflect.DeepEqual(after, want) {
			t.Fatalf("after Esc:\n got %v\nwant %v", after, want)
		}
		wantListeners(t, tab, 0, 0)
		bt.Do(t, tab, chromedp.KeyEvent(kb.Escape)) // no session: nothing happens
		wantCalls(t, tab, call{"onReady", empty, true}, call{"onCancel", empty, true})
	})

	t.Run("modal close button cancels", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({mode: 'modal', width: '600px', height: '500px'})`)
		size := bt.Eval[[]string](t, tab, `[T.overlay().querySelector('[role=dialog]').style.width, T.frame().style.height]`)
		if size[0] != "600px" || size[1] != "500px" {
			t.Errorf("dialog width / iframe height = %q, want 600px and 500px", size)
		}
		bt.Do(t, tab, chromedp.Click(chromedp.CSS(`[data-paycheckout=backdrop] button[aria-label="Close checkout"]`)))
		bt.WaitJS(t, tab, `T.count('onCancel') === 1`, 5*time.Second)
		wantCalls(t, tab, call{"onCancel", empty, true})
		if bt.Eval[bool](t, tab, `!!T.overlay() || document.body.style.overflow !== ''`) {
			t.Fatal("overlay left behind or body overflow not restored")
		}
		wantListeners(t, tab, 0, 0)
	})

	t.Run("ignores other origins, other frames and malformed messages", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box'}); T.addFrame(T.url()); T.addFrame(T.url(T.other))`)
		sameOrigin, otherOrigin := `document.querySelectorAll('iframe.rogue')[0]`, `document.querySelectorAll('iframe.rogue')[1]`
		waitLoaded(t, tab, `T.frame()`)
		waitLoaded(t, tab, sameOrigin)
		waitLoaded(t, tab, otherOrigin)

		good := []any{msg("payment.ready", empty), msg("payment.success", successData), msg("payment.cancel", empty)}
		// Another frame of the same checkout origin, and a frame of another origin.
		send(t, tab, sameOrigin, good...)
		send(t, tab, otherOrigin, good...)
		// The merchant window itself.
		before := bt.Eval[int](t, tab, `T.seen.length`)
		bt.Eval[void](t, tab, `window.postMessage(`+bt.JS(msg("payment.success", successData))+`, '*')`)
		bt.WaitJS(t, tab, `T.seen.length > `+bt.JS(before), 5*time.Second)
		// The right frame, malformed messages.
		send(t, tab, `T.frame()`,
			map[string]any{"source": "other", "type": "payment.success", "data": successData},
			map[string]any{"type": "payment.success", "data": successData},
			msg("payment.unknown", empty),
			msg("toString", empty),
			msg("__proto__", empty),
			map[string]any{"source": "paycheckout", "type": "payment.success"},
			msg("payment.success", map[string]any{"url": "", "requestId": 42, "paymentId": "987"}),
			msg("payment.success", map[string]any{"url": "", "requestId": "42"}),
			msg("payment.failure", map[string]any{"url": nil, "requestId": "42", "paymentId": "987"}),
			msg("payment.failure", nil),
			msg("payment.pending", []any{"", "42"}),
			msg("payment.cancel", "x"),
			msg("payment.ready", 1),
			"payment.success",
			nil,
			[]any{msg("payment.success", successData)},
		)
		wantCalls(t, tab)
		if !bt.Eval[bool](t, tab, `!!T.frame()`) {
			t.Fatal("the checkout iframe was removed by an ignored message")
		}
		wantListeners(t, tab, 1, 0)

		// The real frame still gets through.
		send(t, tab, `T.frame()`, msg("payment.failure", failureData))
		wantCalls(t, tab, call{"onFailure", failureData, true})
		wantListeners(t, tab, 0, 0)
	})

	t.Run("ignores its own frame once it shows another origin", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box'}); window.f = T.frame()`)
		waitLoaded(t, tab, `T.frame()`)
		// The iframe navigates itself to another origin (as to a bank's 3-D Secure page): the same
		// window (event.source) then speaks for another origin, and must not be trusted.
		bt.Eval[void](t, tab, `T.go(window.f.contentWindow, T.url(T.other))`)
		bt.WaitJS(t, tab, `T.loads(window.f.contentWindow) === 2`, 10*time.Second)
		send(t, tab, `window.f`, msg("payment.ready", empty), msg("payment.success", successData))
		wantCalls(t, tab)
		wantListeners(t, tab, 1, 0)
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)
	})

	t.Run("payment.resize from its own frame sizes the iframe, never below height", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box', height: '300px'}); T.addFrame(T.url()); T.addFrame(T.url(T.other))`)
		sameOrigin, otherOrigin := `document.querySelectorAll('iframe.rogue')[0]`, `document.querySelectorAll('iframe.rogue')[1]`
		waitLoaded(t, tab, `T.frame()`)
		waitLoaded(t, tab, sameOrigin)
		waitLoaded(t, tab, otherOrigin)
		height := func() float64 { return bt.Eval[float64](t, tab, `T.frame().getBoundingClientRect().height`) }
		resize := func(h any) map[string]any { return msg("payment.resize", map[string]any{"height": h}) }
		if h := height(); h != 300 {
			t.Fatalf("initial height %v, want 300", h)
		}
		send(t, tab, `T.frame()`, resize(850))
		if h := height(); h != 850 {
			t.Errorf("after resize 850: %v", h)
		}
		send(t, tab, `T.frame()`, resize(120.2))
		if h := height(); h != 300 {
			t.Errorf("after resize 120.2: %v, want the 300px minimum", h)
		}
		send(t, tab, `T.frame()`, resize(640.4))
		if h := height(); h != 641 {
			t.Errorf("after resize 640.4: %v, want 641", h)
		}
		// Other frames (same and other origin), the merchant window, malformed heights: ignored.
		send(t, tab, sameOrigin, resize(2000))
		send(t, tab, otherOrigin, resize(2000))
		before := bt.Eval[int](t, tab, `T.seen.length`)
		bt.Eval[void](t, tab, `window.postMessage(`+bt.JS(resize(2000))+`, '*')`)
		bt.WaitJS(t, tab, `T.seen.length > `+bt.JS(before), 5*time.Second)
		send(t, tab, `T.frame()`, resize("2000px"), resize(-5), resize(nil), msg("payment.resize", 2000),
			map[string]any{"type": "payment.resize", "data": map[string]any{"height": 2000}})
		if h := height(); h != 641 {
			t.Errorf("after ignored messages: %v, want 641", h)
		}
		// Absurd heights are capped.
		send(t, tab, `T.frame()`, resize(1e9))
		if h := height(); h != 10000 {
			t.Errorf("after resize 1e9: %v, want the 10000px cap", h)
		}
		wantCalls(t, tab)
		wantListeners(t, tab, 1, 0)
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)
	})

	t.Run("extra payload fields are dropped", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box'})`)
		waitLoaded(t, tab, `T.frame()`)
		send(t, tab, `T.frame()`, msg("payment.pending", map[string]any{"url": "", "requestId": "42", "card": "4111"}))
		wantCalls(t, tab, call{"onPending", map[string]any{"url": "", "requestId": "42"}, true})
	})

	t.Run("exactly one terminal callback", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box'})`)
		waitLoaded(t, tab, `T.frame()`)
		bt.Eval[void](t, tab, `window.f = T.frame()`)
		send(t, tab, `window.f`,
			msg("payment.success", successData), msg("payment.failure", failureData),
			msg("payment.pending", pendingData), msg("payment.cancel", empty), msg("payment.success", successData))
		wantCalls(t, tab, call{"onSuccess", successData, true})
		wantListeners(t, tab, 0, 0)

		// A terminal event raised from inside a terminal callback (here Esc in a modal) is ignored.
		bt.Eval[void](t, tab, `T.calls = []; T.init({mode: 'modal', onSuccess: (d) => {
			T.rec('onSuccess')(d);
			window.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
		}})`)
		waitLoaded(t, tab, `T.frame()`)
		send(t, tab, `T.frame()`, msg("payment.success", successData))
		wantCalls(t, tab, call{"onSuccess", successData, true})
		wantListeners(t, tab, 0, 0)
	})

	t.Run("pending is terminal", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({mode: 'modal'})`)
		waitLoaded(t, tab, `T.frame()`)
		send(t, tab, `T.frame()`, msg("payment.pending", pendingData))
		wantCalls(t, tab, call{"onPending", pendingData, true})
		if bt.Eval[bool](t, tab, `!!T.overlay()`) {
			t.Fatal("overlay still there after onPending")
		}
		wantListeners(t, tab, 0, 0)
	})

	t.Run("destroy twice is harmless and init replaces the open session", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `PayCheckout.destroy()`) // nothing open yet
		bt.Eval[void](t, tab, `T.init({containerId: 'box'}); T.init({mode: 'modal'})`)
		if got := bt.Eval[[]any](t, tab, `[document.querySelectorAll('iframe').length, !!T.overlay(), document.querySelectorAll('#box iframe').length]`); !reflect.DeepEqual(got, []any{1.0, true, 0.0}) {
			t.Fatalf("after two inits [iframes, overlay, inline iframes] = %v, want [1 true 0]", got)
		}
		wantListeners(t, tab, 1, 1)
		bt.Eval[void](t, tab, `PayCheckout.destroy(); PayCheckout.destroy()`)
		if got := bt.Eval[[]any](t, tab, `[document.querySelectorAll('iframe').length, !!T.overlay(), document.body.style.overflow]`); !reflect.DeepEqual(got, []any{0.0, false, ""}) {
			t.Fatalf("after destroy [iframes, overlay, overflow] = %v", got)
		}
		wantListeners(t, tab, 0, 0)
		wantCalls(t, tab) // a manual destroy calls no callback
		if !bt.Eval[bool](t, tab, `Object.isFrozen(PayCheckout) && typeof PayCheckout.init === 'function'`) {
			t.Error("PayCheckout should be a frozen object with init")
		}
	})

	t.Run("a callback may open a new session", func(t *testing.T) {
		tab := open(t)
		bt.Eval[void](t, tab, `T.init({containerId: 'box', onFailure: (d) => { T.rec('onFailure')(d); T.init({containerId: 'box'}); }})`)
		waitLoaded(t, tab, `T.frame()`)
		bt.Eval[void](t, tab, `window.first = T.frame()`)
		send(t, tab, `window.first`, msg("payment.failure", failureData))
		wantCalls(t, tab, call{"onFailure", failureData, true})
		if !bt.Eval[bool](t, tab, `!!T.frame() && T.frame() !== window.first && !window.first.isConnected`) {
			t.Fatal("the session opened from the callback should stay open, the old iframe should be gone")
		}
		wantListeners(t, tab, 1, 0)
		bt.Eval[void](t, tab, `PayCheckout.destroy()`)
		wantListeners(t, tab, 0, 0)
	})
}
