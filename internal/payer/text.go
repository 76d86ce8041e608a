package payer

import (
	"unicode"
	"unicode/utf8"
)

// PlainText reports whether s is safe to store and to show on the hosted
// page, in notifications and in the merchant's dashboard: valid UTF-8 with
// no control characters (C0, C1: NUL, CR, LF, ESC ...), no format characters
// (category Cf: bidi overrides and isolates such as U+202E, zero-width
// characters such as U+200B, U+200D, U+2060, the BOM U+FEFF, the soft
// hyphen), no line or paragraph separators (U+2028, U+2029) and no U+FFFD
// (what a lone surrogate escape like "\udc00" decodes to). Such characters
// let one name look like another or break the lines of logs and CSV files.
//
// Names, addresses, cities, states, references and notes are all checked
// with it.
func PlainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return false
		}
	}
	return true
}
