package browsertest_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/web"
)

// acceptLanguage sets the tab's languages as a browser's settings do: Chromium sends them as
// Accept-Language with its own q-values ("de-DE,de" becomes "de-DE,de;q=0.9") and reports them
// in navigator.languages.
func acceptLanguage(t *testing.T, tab context.Context, header string) {
	t.Helper()
	ua := bt.Eval[string](t, tab, `navigator.userAgent`)
	c, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(c, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: header}); err != nil {
		t.Fatal(err)
	}
}

// Text of the page with no-break spaces as plain spaces (Intl puts U+00A0 before "€" in German).
func plain(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\u00a0", " "), "\u202f", " ")
}

// The hosted page in the shopper's language, amounts in the shopper's format, the expiry field
// as the shopper types, and the decline message as a sentence.
func TestCheckoutLanguages(t *testing.T) {
	browser := bt.New(t)
	merchant := newSite(t)
	open := func(t *testing.T, api *fakeAPI, lang, query string) context.Context {
		tab := bt.NewTab(t, browser)
		hookCSP(t, tab)
		if lang != "" {
			acceptLanguage(t, tab, lang)
		}
		bt.Navigate(t, tab, api.Origin+"/checkout?"+query)
		bt.WaitJS(t, tab, visible("#card .pay"), 10*time.Second)
		return tab
	}

	t.Run("German Accept-Language: German page, 1.249,50 €, German errors and decline", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin)
		api.amount, api.failureURL = "1249.50", ""
		tab := open(t, api.start(), "de-DE,de,en", "requestId=42&token=tok-123")
		got := bt.Eval[map[string]any](t, tab, `({lang: document.documentElement.lang, title: `+text("#title")+`,
			recipient: `+text("#recipient")+`, amount: `+text("#amount")+`, pay: `+text("#card .pay")+`,
			name: `+text("label[for=cc-name]")+`, secure: `+text(".secure")+`, doc: document.title})`)
		for k, v := range got {
			got[k] = plain(v.(string))
		}
		want := map[string]any{
			"lang": "de", "title": "Sichere Zahlung", "recipient": "Zahlung an Acme Books", "amount": "1.249,50 €",
			"pay": "1.249,50 € bezahlen", "name": "Name auf der Karte", "doc": "Sichere Zahlung",
			"secure": "Ihre Kartendaten bleiben auf dieser sicheren Seite und werden nie an den Händler weitergegeben.",
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("German page:\n got %v\nwant %v", got, want)
		}
		// Field errors say what to do, in German.
		bt.Eval[void](t, tab, `(() => { `+jsSet+` set('cc-number', '4111 1111'); set('cc-exp', '13'); })()`)
		bt.Eval[void](t, tab, `document.querySelector('#card .pay').click()`)
		bt.WaitJS(t, tab, text("#cc-name-e")+` !== ''`, 5*time.Second)
		errs := bt.Eval[[]string](t, tab, `['#cc-name-e', '#cc-number-e', '#cc-exp-e', '#cc-csc-e'].map(s => `+jsText+`(s))`)
		if want := []string{
			"Geben Sie den Namen ein, der auf Ihrer Karte steht.",
			"Diese Kartennummer ist zu kurz. Prüfen Sie, ob Sie alle Ziffern eingegeben haben.",
			"Geben Sie das Ablaufdatum als MM/JJ ein, zum Beispiel 08/29.",
			"Geben Sie die Prüfnummer ein.",
		}; !reflect.DeepEqual(errs, want) {
			t.Errorf("German field errors:\n got %q\nwant %q", errs, want)
		}
		// A decline explains its code in German, as two sentences.
		bt.Eval[void](t, tab, payByCard("4000 0000 0000 0002"))
		bt.WaitJS(t, tab, text("#result-title")+` === 'Zahlung fehlgeschlagen'`, 5*time.Second)
		if got, want := bt.Eval[string](t, tab, text("#result-msg")),
			"Die Zahlung wurde abgelehnt; wenden Sie sich an Ihre kartenausgebende Bank. Es wurde kein Geld abgebucht."; got != want {
			t.Errorf("German decline %q, want %q", got, want)
		}
		wantNoCSPViolations(t, tab)
	})

	t.Run("the decline reason and 'No money was taken.' are two sentences", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin)
		api.failureURL = ""
		tab := open(t, api.start(), "", "requestId=42&token=tok-123")
		bt.Eval[void](t, tab, payByCard("4000 0000 0000 0002"))
		bt.WaitJS(t, tab, text("#result-title")+` === 'Payment failed'`, 5*time.Second)
		if got, want := bt.Eval[string](t, tab, text("#result-msg")), "Declined, contact the card issuer. No money was taken."; got != want {
			t.Errorf("failure message %q, want %q", got, want)
		}
	})

	t.Run("the locale parameter wins over Accept-Language, in every language", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		for _, lang := range web.Languages {
			tab := open(t, api, "de-DE,de", "requestId=42&token=tok-123&locale="+lang)
			msg, err := web.Messages(lang)
			if err != nil {
				t.Fatal(err)
			}
			got := bt.Eval[[]string](t, tab, `[document.documentElement.lang, `+text("#title")+`, `+text("label[for=cc-number]")+`]`)
			if want := []string{lang, msg["title"], msg["card.number"]}; !reflect.DeepEqual(got, want) {
				t.Errorf("locale=%s: [lang, title, label] = %q, want %q", lang, got, want)
			}
		}
	})

	t.Run("expiry typing: the slash comes once the month is certain", func(t *testing.T) {
		api := newFakeAPI(t, merchant.Origin).start()
		tab := open(t, api, "", "requestId=42&token=tok-123")
		value := func() string { return bt.Eval[string](t, tab, `document.getElementById('cc-exp').value`) }
		clear := func() {
			bt.Eval[void](t, tab, `(() => { const e = document.getElementById('cc-exp'); e.focus(); e.value = ''; })()`)
		}
		steps := []struct{ keys, want string }{
			{"", ""}, {"1", "1"}, {"3", "01/3"}, // 13 is no month: January, year digit 3
			{"", ""}, {"3", "03/"}, {"0", "03/0"},
			{"", ""}, {"1", "1"}, {"2", "12/"}, {"3", "12/3"}, {"4", "12/34"}, {"5", "12/34"},
			{"", ""}, {"1", "1"}, {"0", "10/"},
			{"", ""}, {"0", "0"}, {"0", "0"}, {"9", "09/"},
			{"", ""}, {"1", "1"}, {"/", "01/"},
			{"", ""}, {"1", "1"}, {"2", "12/"}, {kb.Backspace, "12"}, {kb.Backspace, "1"},
		}
		for i, s := range steps {
			if s.keys == "" {
				clear()
				continue
			}
			bt.Do(t, tab, chromedp.SendKeys(chromedp.ID("cc-exp"), s.keys))
			if got := value(); got != s.want {
				t.Fatalf("step %d: after %q the field is %q, want %q", i, s.keys, got, s.want)
			}
		}
	})
}

// The hosted page does not shift while it loads on a phone: Layout Instability entries summed as
// Lighthouse's CLS does (shifts right after input excluded) must be 0.
func TestCheckoutNoLayoutShift(t *testing.T) {
	browser := bt.New(t)
	merchant := newSite(t)
	api := newFakeAPI(t, merchant.Origin)
	api.sessionGate = make(chan struct{})
	api.start()
	tab := bt.NewTab(t, browser)
	// A phone-sized viewport. Not EmulateMobile: under mobile emulation this Chromium reports no
	// layout-shift entries at all (the guard at the end would fail).
	bt.Do(t, tab, chromedp.EmulateViewport(390, 844))
	c, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(c, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `(() => {
		window.__cls = 0; window.__shifts = [];
		new PerformanceObserver((list) => {
			for (const e of list.getEntries()) {
				if (e.hadRecentInput) continue;
				window.__cls += e.value;
				window.__shifts.push(e.value.toFixed(4) + ' ' + e.sources.map((s) => s.node ? (s.node.id || s.node.className || s.node.nodeName) : '?').join(','));
			}
		}).observe({type: 'layout-shift', buffered: true});
	})()`}); err != nil {
		t.Fatal(err)
	}
	// Shift entries are reported after the frame that shifted is rendered: two frames, then a task.
	const frames = `new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(ok, 0))))`
	bt.Navigate(t, tab, api.Origin+"/checkout?requestId=42&token=tok-123")
	// The loading state is on screen (as it is while a real session call is in flight), then the
	// session arrives and the form replaces it.
	bt.WaitJS(t, tab, visible("#loading"), 10*time.Second)
	bt.Eval[void](t, tab, frames)
	close(api.sessionGate)
	bt.WaitJS(t, tab, visible("#card .pay")+` && `+visible(".secure"), 10*time.Second)
	bt.Eval[void](t, tab, frames)
	if !bt.Eval[bool](t, tab, `PerformanceObserver.supportedEntryTypes.includes('layout-shift')`) {
		t.Fatal("this Chromium does not report layout-shift entries")
	}
	if cls := bt.Eval[float64](t, tab, `window.__cls`); cls != 0 {
		t.Errorf("CLS %.4f on a 390x844 phone, want 0; shifts: %v", cls, bt.Eval[[]string](t, tab, `window.__shifts`))
	}
	// Guards the measurement: a shift made on purpose (the form pushed down) must be reported.
	bt.Eval[void](t, tab, `document.getElementById('pay').before(Object.assign(document.createElement('p'), {textContent: 'x'}))`)
	bt.Eval[void](t, tab, frames)
	bt.WaitJS(t, tab, `window.__cls > 0`, 5*time.Second)
}
