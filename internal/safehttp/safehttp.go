// Package safehttp builds the HTTP client that sends notifications to
// merchant-supplied URLs. A notify URL is attacker-controlled input, so the
// client must not become a way to reach the service's own network (SSRF):
// loopback (the Lambda runtime API listens on 127.0.0.1), private ranges, the
// instance metadata address 169.254.169.254 and the like are refused.
//
// The check runs in the dialer's Control hook, on the IP address the socket is
// about to connect to, after DNS resolution. Checking the host name or a
// resolved address before dialing is not enough: a name can resolve to a
// public address for the check and to 127.0.0.1 for the connect (DNS rebinding).
package safehttp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DefaultTimeout bounds a whole exchange: the spec asks merchants to answer
// within 30 seconds.
const DefaultTimeout = 30 * time.Second

var (
	// ErrBlockedAddress is returned (wrapped) when the resolved destination is
	// not a public unicast address.
	ErrBlockedAddress = errors.New("safehttp: destination address not allowed")
	// ErrScheme is returned (wrapped) for a URL scheme the options refuse.
	ErrScheme = errors.New("safehttp: URL scheme not allowed")
)

// Options configure NewClient. The zero value is the strictest address policy
// but still allows plain http; production callers set RequireHTTPS.
type Options struct {
	// Timeout bounds the whole request including reading the response body;
	// zero means DefaultTimeout.
	Timeout time.Duration
	// AllowPrivate turns the address guard off, for the local stack where
	// merchants' receivers listen on 127.0.0.1.
	AllowPrivate bool
	// RequireHTTPS refuses plain http URLs (the spec: all communication must
	// use HTTPS). Only the local stack leaves it off.
	RequireHTTPS bool
	// TLSConfig overrides the TLS settings, e.g. to trust a local test CA;
	// nil uses the system roots.
	TLSConfig *tls.Config
}

// NewClient returns a client that never follows redirects, refuses
// non-public destinations at dial time (unless AllowPrivate) and refuses
// schemes other than https (and http unless RequireHTTPS).
func NewClient(opts Options) *http.Client {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := &net.Dialer{
		Timeout:   min(10*time.Second, timeout),
		KeepAlive: 30 * time.Second,
	}
	if !opts.AllowPrivate {
		dialer.Control = control
	}
	transport := &http.Transport{
		// No proxy, deliberately: through a proxy the dial goes to the proxy's
		// address and the proxy resolves the merchant's host, which would
		// bypass the guard.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       opts.TLSConfig,
		TLSHandshakeTimeout:   min(10*time.Second, timeout),
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Transport: &schemeGuard{next: transport, requireHTTPS: opts.RequireHTTPS},
		Timeout:   timeout,
		// A redirect is the receiver's answer, not an instruction: following
		// it would let a public URL bounce the request to any other address
		// and would re-POST the signed body to a third party.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// schemeGuard refuses URL schemes before any connection is made.
type schemeGuard struct {
	next         http.RoundTripper
	requireHTTPS bool
}

func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.URL.Scheme {
	case "https":
	case "http":
		if g.requireHTTPS {
			closeBody(req)
			return nil, fmt.Errorf("%w: http (https required)", ErrScheme)
		}
	default:
		closeBody(req)
		return nil, fmt.Errorf("%w: %q", ErrScheme, req.URL.Scheme)
	}
	return g.next.RoundTrip(req)
}

// closeBody honours the RoundTripper contract: the body is closed even on error.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// control is the net.Dialer Control hook. It runs after the socket is created
// and before connect, with the numeric address being dialed.
func control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Fail closed: an address we cannot read is an address we cannot vet.
		return fmt.Errorf("%w: unparsable address %q", ErrBlockedAddress, address)
	}
	if !PublicAddr(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, ap.Addr())
	}
	return nil
}

// Non-public ranges that netip.Addr has no predicate for.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, incl. 255.255.255.255
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated)
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2002::/16"),      // 6to4 embeds an arbitrary IPv4 address
	netip.MustParsePrefix("2001::/32"),      // Teredo embeds an arbitrary IPv4 address
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits are an
// IPv4 address the NAT64 gateway connects to, so that address is what counts.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// PublicAddr reports whether ip is a public unicast address that outbound
// notifications may connect to. IPv4-mapped IPv6 forms (::ffff:127.0.0.1)
// are judged as the IPv4 address they map to. The EC2 metadata service's
// IPv6 address fd00:ec2::254 lies in the refused unique-local fc00::/7.
func PublicAddr(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsLoopback() || ip.IsPrivate() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() {
		return false
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
