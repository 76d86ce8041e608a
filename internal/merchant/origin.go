package merchant

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
)

// Allowed origins are written into headers (the hosted page's and the 3-D
// Secure pages' Content-Security-Policy frame-ancestors) and compared with
// a browser's Origin (the parent page the hosted page posts its events
// to). So an origin is exactly what a browser sends as one: a scheme, a
// host of letters, digits, dots and hyphens (an international name in its
// punycode form, as browsers send it) and an optional port — nothing else.
// A wildcard (https://*), a quote, a space or a semicolon would widen the
// policy or add a directive to it; a path or a user would never match.
// http is allowed only for sandbox merchants: a live merchant's card form
// is framed by https pages only.

// OriginError is an allowed origin refused (the spec's 032, "Invalid origin
// domain").
type OriginError struct {
	Origin string
	Reason string
}

func (e *OriginError) Error() string {
	return fmt.Sprintf("%q is not a valid origin (%s %s): %s", e.Origin, codes.InvalidOriginDomain,
		codes.InvalidOriginDomain.Message(), e.Reason)
}

// OriginProblem is err (an *OriginError) as the spec's 032 on field, for
// the HTTP edge's problem (its errors list names the field).
func OriginProblem(field string, err error) *errkind.Error {
	return errkind.Validation([]errkind.FieldError{{Field: field, Code: codes.InvalidOriginDomain, Detail: err.Error()}})
}

// label is one DNS label of letters, digits and hyphens, neither starting
// nor ending with a hyphen (punycode labels start with "xn--").
var label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// NormalizeOrigin checks an origin and returns it in the form browsers
// send: scheme://host[:port], lower-case, the host in punycode, without a
// default port (443 for https, 80 for http). One trailing "/" is taken as
// pasted from an address bar and dropped. http is refused unless sandbox.
func NormalizeOrigin(o string, sandbox bool) (string, error) {
	fail := func(reason string) (string, error) { return "", &OriginError{Origin: o, Reason: reason} }
	s := strings.TrimSpace(o)
	scheme, rest, ok := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	switch {
	case !ok || (scheme != "https" && scheme != "http"):
		return fail("it must start with https:// (http:// only for a sandbox merchant)")
	case scheme == "http" && !sandbox:
		return fail("a live merchant's origins must use https://")
	}
	rest = strings.TrimSuffix(rest, "/")
	host, port := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		host, port = rest[:i], rest[i+1:]
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
			return fail("the port must be a number from 1 to 65535")
		}
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = ""
		}
	}
	if strings.ContainsAny(host, "/?#@*;,'\"\\ \t\r\n[]%") {
		return fail("an origin is a scheme, a host and an optional port, nothing else (no path, query, wildcard, user or list)")
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil || ascii == "" || len(ascii) > 253 {
		return fail("the host must be a domain name or an IPv4 address of letters, digits, dots and hyphens (an international name in punycode)")
	}
	for _, l := range strings.Split(ascii, ".") {
		if !label.MatchString(l) {
			return fail("the host must be a domain name or an IPv4 address of letters, digits, dots and hyphens (an international name in punycode)")
		}
	}
	out := scheme + "://" + ascii
	if port != "" {
		out += ":" + port
	}
	return out, nil
}

// HeaderOrigins are m's allowed origins fit to be written into a header or
// compared with a browser's: each stored value checked again with
// NormalizeOrigin (a value stored before the rules, or a live merchant's
// http origin, is dropped and logged, never written). Every place that
// writes origins into a header takes them from here.
func HeaderOrigins(ctx context.Context, log *slog.Logger, m *Merchant) []string {
	var out []string
	for _, o := range m.AllowedOrigins {
		n, err := NormalizeOrigin(o, m.Sandbox)
		if err != nil {
			if log != nil {
				log.WarnContext(ctx, "stored allowed origin dropped", "merchantId", m.ID, "error", err.Error())
			}
			continue
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// InvalidOrigins are m's stored allowed origins that NormalizeOrigin
// refuses, with why (payctl merchant check-origins).
func InvalidOrigins(m *Merchant) []*OriginError {
	var out []*OriginError
	for _, o := range m.AllowedOrigins {
		if _, err := NormalizeOrigin(o, m.Sandbox); err != nil {
			out = append(out, err.(*OriginError))
		}
	}
	return out
}
