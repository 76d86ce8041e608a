package dashboard

import (
	"strings"

	"golang.org/x/text/language"
)

// ViewerLocale is the locale amounts and numbers are shown in: the first
// language of the viewer's Accept-Language header with its region ("de-DE",
// "en-US"), canonical BCP 47; "en" when the header names none. The pages'
// text is English; only numbers follow the viewer (dashboard.js formats
// them with Intl.NumberFormat in this locale, as the hosted page does).
func ViewerLocale(acceptLanguage string) string {
	if len(acceptLanguage) > 1024 {
		return "en"
	}
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil {
		// A malformed weight spoils the whole header for the parser: keep
		// the first tag it names.
		first, _, _ := strings.Cut(acceptLanguage, ",")
		first, _, _ = strings.Cut(first, ";")
		t, err := language.Parse(strings.TrimSpace(first))
		if err != nil {
			return "en"
		}
		tags = []language.Tag{t}
	}
	for _, t := range tags {
		// "*" parses as "mul" (any language): it names no locale.
		if b, _ := t.Base(); b.String() != "und" && b.String() != "mul" && len(t.String()) <= 35 {
			s := t.String()
			return s
		}
	}
	return "en"
}
