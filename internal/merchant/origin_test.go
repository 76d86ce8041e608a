package merchant

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// An allowed origin is a scheme, a host of letters, digits, dots and
// hyphens (an IDN in punycode) and an optional port, nothing else; http only
// in the sandbox. Each refused value of the attack round is here.
func TestNormalizeOriginAcceptsOnlySchemeHostAndPort(t *testing.T) {
	good := []struct{ in, want string }{
		{"https://shop.example", "https://shop.example"},
		{"HTTPS://Shop.Example:8443/", "https://shop.example:8443"},
		{" https://shop.example ", "https://shop.example"},
		{"https://shop.example:443", "https://shop.example"},
		{"https://a-b.c-d.example", "https://a-b.c-d.example"},
		{"https://bücher.example", "https://xn--bcher-kva.example"},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example"},
		{"https://127.0.0.1:8443", "https://127.0.0.1:8443"},
		{"https://localhost", "https://localhost"},
	}
	for _, c := range good {
		for _, sandbox := range []bool{false, true} {
			if got, err := NormalizeOrigin(c.in, sandbox); err != nil || got != c.want {
				t.Errorf("NormalizeOrigin(%q, sandbox %v) = %q, %v; want %q", c.in, sandbox, got, err, c.want)
			}
		}
	}
	if got, err := NormalizeOrigin("http://127.0.0.1:8080", true); err != nil || got != "http://127.0.0.1:8080" {
		t.Errorf("sandbox http: %q %v", got, err)
	}
	if got, err := NormalizeOrigin("http://shop.example:80", true); err != nil || got != "http://shop.example" {
		t.Errorf("sandbox http default port: %q %v", got, err)
	}
	bad := []string{
		"https://*", "https://*.shop.example", "*", "https://a.com;sandbox", "https://a.com; script-src *",
		"https://a.com 'unsafe-inline'", "https://a.com'", `https://a.com"`, "https://a.com,https://b.com",
		"https://a.com/path", "https://a.com/?q=1", "https://a.com#x", "https://user@a.com", "https://user:pw@a.com",
		"https://a_b.com", "https://-a.com", "https://a-.com", "https://a..com", "https://a.com.", "https://",
		"https://:443", "https://a.com:0", "https://a.com:65536", "https://a.com:08443", "https://a.com:x",
		"https://[::1]", "https://a%2ecom", "ftp://a.com", "javascript://a.com", "a.com", "//a.com", "",
		"https://a.com\\@b.com", "https://a.\tcom", "https://xn--zz.example", "https://" + strings.Repeat("a", 64) + ".com",
		"https://a\u2028.com", "https://a.com\u00a0x",
	}
	for _, in := range bad {
		for _, sandbox := range []bool{false, true} {
			got, err := NormalizeOrigin(in, sandbox)
			var oe *OriginError
			if err == nil || !errors.As(err, &oe) {
				t.Errorf("NormalizeOrigin(%q, sandbox %v) = %q, %v; want an OriginError", in, sandbox, got, err)
			}
		}
	}
	if _, err := NormalizeOrigin("http://shop.example", false); err == nil {
		t.Error("http origin accepted for a live merchant")
	}
	_, err := NormalizeOrigin("https://*", false)
	if !strings.Contains(err.Error(), "032") || !strings.Contains(err.Error(), `"https://*"`) {
		t.Errorf("error does not name the code and the value: %v", err)
	}
	p := OriginProblem("origin", err)
	if p.Code != codes.InvalidOriginDomain || len(p.Fields) != 1 || p.Fields[0].Field != "origin" || p.Kind != errkind.Invalid {
		t.Errorf("problem = %+v", p)
	}
}

// Validate names the field and refuses each bad origin.
func TestValidateRefusesBadOriginsNamingTheField(t *testing.T) {
	for _, m := range []Merchant{
		{Name: "x", AllowedOrigins: []string{"https://*"}},
		{Name: "x", AllowedOrigins: []string{"https://a.com;sandbox"}},
		{Name: "x", AllowedOrigins: []string{"http://a.com"}},
	} {
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), "allowedOrigins") {
			t.Errorf("%v: %v", m.AllowedOrigins, err)
		}
	}
}

// HeaderOrigins writes only valid origins: stored values that fail today's
// rules (a wildcard, a directive, a live merchant's http) are dropped and
// logged, the rest normalised.
func TestHeaderOriginsDropsAndLogsStoredBadValues(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	m := &Merchant{ID: "mer_1", AllowedOrigins: []string{"https://shop.example", "https://*", "https://a.com;sandbox", "http://old.example",
		"https://Shop.Example:443"}}
	got := HeaderOrigins(context.Background(), log, m)
	if !slices.Equal(got, []string{"https://shop.example"}) {
		t.Errorf("live: %v", got)
	}
	for _, want := range []string{`https://*`, `https://a.com;sandbox`, `http://old.example`, `mer_1`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if bad := InvalidOrigins(m); len(bad) != 3 {
		t.Errorf("InvalidOrigins = %v", bad)
	}
	m.Sandbox = true
	if got := HeaderOrigins(context.Background(), nil, m); !slices.Equal(got, []string{"https://shop.example", "http://old.example"}) {
		t.Errorf("sandbox: %v", got)
	}
}
