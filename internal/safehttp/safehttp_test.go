package safehttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPublicAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1",
		"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"::ffff:10.0.0.1", "fc00::1", "fd12:3456::1",
		"169.254.169.254", "169.254.0.1", "::ffff:169.254.169.254", "::ffff:a9fe:a9fe",
		"fe80::1", "fe80::1%eth0", "fd00:ec2::254",
		"0.0.0.0", "0.1.2.3", "::", "::ffff:0.0.0.0",
		"224.0.0.1", "239.255.255.250", "ff02::1", "ff05::2",
		"255.255.255.255", "240.0.0.1",
		"100.64.0.1", "100.127.255.254", "::ffff:100.64.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "::127.0.0.1",
		"2002:7f00:1::1", "198.18.0.1", "192.0.0.8",
	}
	for _, s := range refused {
		if PublicAddr(netip.MustParseAddr(s)) {
			t.Errorf("PublicAddr(%s) = true, want false", s)
		}
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.1",
		"172.15.255.255", "172.32.0.1", "::ffff:8.8.8.8", "2606:4700:4700::1111",
		"64:ff9b::808:808", "2a00:1450:4001:80b::200e",
	}
	for _, s := range allowed {
		if !PublicAddr(netip.MustParseAddr(s)) {
			t.Errorf("PublicAddr(%s) = false, want true", s)
		}
	}
	if PublicAddr(netip.Addr{}) {
		t.Error("the zero Addr must not be public")
	}
}

// The control hook is what the dialer runs before connect. Addresses other
// than loopback are only checked here, never dialed.
func TestControlRefusesBeforeConnect(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:80", "[::1]:443", "[::ffff:127.0.0.1]:80", "169.254.169.254:80",
		"[::ffff:169.254.169.254]:80", "10.0.0.1:443", "0.0.0.0:80", "100.64.1.1:443",
		"[fe80::1%eth0]:80", "not-an-address",
	} {
		if err := control("tcp", addr, nil); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("control(%q) = %v, want ErrBlockedAddress", addr, err)
		}
	}
	for _, addr := range []string{"93.184.215.14:443", "[2606:4700:4700::1111]:443"} {
		if err := control("tcp", addr, nil); err != nil {
			t.Errorf("control(%q) = %v, want nil", addr, err)
		}
	}
}

// countingServer counts the requests that actually reached it.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestClientRefusesLoopbackAfterResolution(t *testing.T) {
	srv, hits := countingServer(t, nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := NewClient(Options{})
	for _, host := range []string{
		"127.0.0.1",
		"localhost", // a name: only the dial-time check on the resolved IP catches it
		"[::1]",
		"[::ffff:127.0.0.1]",
	} {
		u := "http://" + net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)) + "/"
		resp, err := c.Post(u, "text/plain", strings.NewReader("x"))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: request succeeded, want refusal", u)
			continue
		}
		if !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("%s: err = %v, want ErrBlockedAddress", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("server was reached %d times", n)
	}
}

func TestAllowPrivateReachesLoopback(t *testing.T) {
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	c := NewClient(Options{AllowPrivate: true})
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	for _, u := range []string{srv.URL, "http://localhost:" + port} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: status %d", u, resp.StatusCode)
		}
	}
	if hits.Load() != 2 {
		t.Fatalf("hits = %d, want 2", hits.Load())
	}
}

func TestRedirectIsReturnedNotFollowed(t *testing.T) {
	target, targetHits := countingServer(t, nil)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	})
	resp, err := NewClient(Options{AllowPrivate: true}).Post(srv.URL, "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status = %d, want 302", resp.StatusCode)
	}
	if got := resp.Header.Get("Location"); !strings.HasSuffix(got, "/elsewhere") {
		t.Fatalf("Location = %q", got)
	}
	if targetHits.Load() != 0 {
		t.Fatal("redirect target was contacted")
	}
}

func TestSlowServerTimesOut(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := NewClient(Options{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	start := time.Now()
	resp, err := c.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("want a timeout error")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("gave up after %v, timeout was 200ms", d)
	}
}

func TestSchemes(t *testing.T) {
	srv, hits := countingServer(t, nil)
	strict := NewClient(Options{AllowPrivate: true, RequireHTTPS: true})
	if _, err := strict.Get(srv.URL); !errors.Is(err, ErrScheme) {
		t.Errorf("http with RequireHTTPS: err = %v, want ErrScheme", err)
	}
	lax := NewClient(Options{AllowPrivate: true})
	for _, u := range []string{"ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1/"} {
		if _, err := lax.Get(u); !errors.Is(err, ErrScheme) {
			t.Errorf("%s: err = %v, want ErrScheme", u, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("a refused scheme reached the server")
	}
}

func TestHTTPSWithRequireHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := NewClient(Options{AllowPrivate: true, RequireHTTPS: true, TLSConfig: &tls.Config{RootCAs: roots}})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// Without AllowPrivate the same TLS server is refused before the handshake.
	c = NewClient(Options{RequireHTTPS: true, TLSConfig: &tls.Config{RootCAs: roots}})
	if _, err := c.Get(srv.URL); !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("err = %v, want ErrBlockedAddress", err)
	}
}

func TestNoProxyAndDefaults(t *testing.T) {
	c := NewClient(Options{})
	if c.Timeout != DefaultTimeout {
		t.Errorf("Timeout = %v, want %v", c.Timeout, DefaultTimeout)
	}
	tr := c.Transport.(*schemeGuard).next.(*http.Transport)
	// An environment proxy would resolve the merchant's host itself, out of
	// the guard's reach.
	if tr.Proxy != nil {
		t.Error("transport must not use a proxy")
	}
	if tr.TLSHandshakeTimeout == 0 || tr.ResponseHeaderTimeout == 0 {
		t.Error("TLS handshake and response header timeouts must be set")
	}
	if err := c.CheckRedirect(&http.Request{}, nil); !errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("CheckRedirect = %v", err)
	}
}
