package web

import (
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	for _, c := range []struct{ locale, accept, want string }{
		{"", "", "en"},
		{"", "de-DE,de;q=0.9,en;q=0.5", "de"},
		{"", "fr-CA", "fr"},
		{"", "es-MX,es;q=0.9", "es"},
		{"", "pt-BR", "pt"},
		{"", "hi-IN,en;q=0.8", "hi"},
		{"", "nl-NL,de;q=0.7,en;q=0.5", "de"},
		{"", "ja", "en"},
		{"", "en;q=0.1, de;q=0.9", "de"},
		{"hi", "de-DE,de;q=0.9", "hi"},
		{"pt-BR", "", "pt"},
		{"xx-not a tag", "fr", "fr"},
		{"ja", "es", "es"},
		{"", "*", "en"},
		{"", "de-DE,de;q=0.9;q=0.9,en;q=0.5;q=0.8", "de"},
		{"", strings.Repeat("de,", 600), "en"},
	} {
		if got := Negotiate(c.locale, c.accept); got != c.want {
			t.Errorf("Negotiate(%q, %q) = %q, want %q", c.locale, c.accept, got, c.want)
		}
	}
}
