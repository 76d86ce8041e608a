package web

import (
	"encoding/json"
	"fmt"
	"html"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/text/language"
)

// Languages the hosted page is translated into (checkout/i18n/<lang>.json).
// English comes first: it is the fallback when nothing else matches.
var Languages = []string{"en", "de", "fr", "es", "pt", "hi"}

var matcher = language.NewMatcher(func() []language.Tag {
	tags := make([]language.Tag, len(Languages))
	for i, l := range Languages {
		tags[i] = language.MustParse(l)
	}
	return tags
}())

// Negotiate picks the page language: the locale option (PayCheckout.init's
// `locale`, sent as the `locale` query parameter) first, then the
// Accept-Language header, else English. Unparsable input counts as absent.
func Negotiate(locale, acceptLanguage string) string {
	var prefs []language.Tag
	if len(locale) <= 35 {
		if t, err := language.Parse(locale); err == nil {
			prefs = append(prefs, t)
		}
	}
	if len(acceptLanguage) <= 1024 {
		if tags, _, err := language.ParseAcceptLanguage(acceptLanguage); err == nil {
			prefs = append(prefs, tags...)
		} else {
			// A malformed weight somewhere ("de;q=0.9;q=0.9") spoils the whole header for the
			// parser: keep the languages it names, in their order.
			for _, part := range strings.Split(acceptLanguage, ",") {
				tag, _, _ := strings.Cut(part, ";")
				if t, err := language.Parse(strings.TrimSpace(tag)); err == nil {
					prefs = append(prefs, t)
				}
			}
		}
	}
	if len(prefs) == 0 {
		return Languages[0]
	}
	_, i, conf := matcher.Match(prefs...)
	if conf == language.No {
		return Languages[0]
	}
	return Languages[i]
}

// Messages returns the translations of lang (key -> text).
func Messages(lang string) (map[string]string, error) {
	b, err := fs.ReadFile(Files, "checkout/i18n/"+lang+".json")
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("checkout/i18n/%s.json: %w", lang, err)
	}
	return m, nil
}

var (
	pagesOnce sync.Once
	pages     map[string][]byte
	pagesErr  error
)

// CheckoutPage is checkout/index.html rendered in lang (one of Languages):
// the static text translated on the server, so that nothing flashes in
// English or shifts when the script starts, and the script's own messages
// in the `data-msg` attribute of <html> (no inline script under the CSP).
// The pages are rendered once, on first use.
func CheckoutPage(lang string) ([]byte, error) {
	pagesOnce.Do(func() { pages, pagesErr = renderPages() })
	if pagesErr != nil {
		return nil, pagesErr
	}
	p, ok := pages[lang]
	if !ok {
		return nil, fmt.Errorf("no checkout page in %q", lang)
	}
	return p, nil
}

// placeholder is what index.html may contain: {{t "key"}} (a translation), {{.Lang}} and
// {{.Messages}} (the script's messages as JSON). A substitution, not html/template: the
// template package's reflection would keep every method of every linked type in the binary
// (10 MB more for the checkout function).
var placeholder = regexp.MustCompile(`\{\{(?:t "([^"{}]+)"|\.(Lang|Messages))\}\}`)

func renderPages() (map[string][]byte, error) {
	src, err := fs.ReadFile(Files, "checkout/index.html")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, lang := range Languages {
		msg, err := Messages(lang)
		if err != nil {
			return nil, err
		}
		js, err := json.Marshal(msg)
		if err != nil {
			return nil, err
		}
		var missing []string
		// Every value is escaped for text and for quoted attributes alike (& < > " ').
		page := placeholder.ReplaceAllStringFunc(string(src), func(m string) string {
			sub := placeholder.FindStringSubmatch(m)
			switch {
			case sub[1] != "":
				s, ok := msg[sub[1]]
				if !ok {
					missing = append(missing, sub[1])
				}
				return html.EscapeString(s)
			case sub[2] == "Lang":
				return html.EscapeString(lang)
			default:
				return html.EscapeString(string(js))
			}
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("no %s translation of %q", lang, missing)
		}
		if i := strings.Index(page, "{{"); i >= 0 {
			return nil, fmt.Errorf("checkout/index.html: unknown placeholder at %q", page[i:min(len(page), i+40)])
		}
		out[lang] = []byte(page)
	}
	return out, nil
}
