package browsertest_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/payreq/payreq/web"
)

// site is an HTTP server on its own 127.0.0.1 port, so each site is its own origin. Its origin is
// known before it starts, so that sites can name each other in their CSP.
type site struct {
	*httptest.Server
	Origin string
}

func newSite(t testing.TB) *site {
	t.Helper()
	s := httptest.NewUnstartedServer(nil)
	t.Cleanup(s.Close)
	return &site{Server: s, Origin: "http://" + s.Listener.Addr().String()}
}

func (s *site) start(h http.Handler) *site {
	s.Config.Handler = h
	s.Start()
	return s
}

var testdata = os.DirFS("testdata")

// serve writes one file of fsys, with no caching and the CSP (when not empty).
func serve(w http.ResponseWriter, r *http.Request, fsys fs.FS, name, csp string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if csp != "" {
		w.Header().Set("Content-Security-Policy", csp)
	}
	http.ServeFileFS(w, r, fsys, name)
}

// merchantCSP is a strict merchant-page policy: PayCheckout must work without inline code or styles.
func merchantCSP(frameOrigins ...string) string {
	return "default-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; frame-src " + strings.Join(frameOrigins, " ")
}

// startMerchant serves the merchant test page (testdata/merchant.html, instrument.js, harness.js)
// and the real /paycheckout.js.
func (s *site) startMerchant(frameOrigins ...string) *site {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, testdata, "merchant.html", merchantCSP(frameOrigins...))
	})
	mux.HandleFunc("GET /instrument.js", func(w http.ResponseWriter, r *http.Request) { serve(w, r, testdata, "instrument.js", "") })
	mux.HandleFunc("GET /harness.js", func(w http.ResponseWriter, r *http.Request) { serve(w, r, testdata, "harness.js", "") })
	mux.HandleFunc("GET /paycheckout.js", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, web.Files, "sdk/paycheckout.js", "")
	})
	return s.start(mux)
}

// startFakeCheckout serves the fake checkout page (a test fixture that posts whatever the harness
// asks for) at /checkout, framable only by the merchant origin.
func (s *site) startFakeCheckout(merchantOrigin string) *site {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkout", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, testdata, "fake-checkout.html", "default-src 'self'; frame-ancestors "+merchantOrigin)
	})
	mux.HandleFunc("GET /fake.js", func(w http.ResponseWriter, r *http.Request) { serve(w, r, testdata, "fake.js", "") })
	return s.start(mux)
}
