package checkout_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/web"
)

// assetServer is the checkout handler over real HTTP; the asset and page routes need no store.
func assetServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(checkout.New(checkout.Deps{Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return srv
}

// getRaw sends one request as a client that decodes nothing itself (Go's transport would
// otherwise ask for gzip and decode it behind our back).
func getRaw(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func decode(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var r io.Reader = bytes.NewReader(b)
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(r)
	case "":
	default:
		t.Fatalf("unexpected Content-Encoding %q", coding)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", coding, err)
	}
	return out
}

// Static assets are sent in the coding the client prefers by its q-values, with Vary, and decode
// to the very bytes of their source.
func TestAssetEncodings(t *testing.T) {
	srv := assetServer(t)
	assets := map[string]string{
		"/paycheckout.js":               "sdk/paycheckout.js",
		"/paycheckout.d.ts":             "sdk/paycheckout.d.ts",
		"/checkout/assets/checkout.css": "checkout/checkout.css",
		"/checkout/assets/checkout.js":  "checkout/checkout.js",
		"/checkout/assets/acs.js":       "checkout/acs.js",
	}
	cases := []struct{ accept, want string }{
		{"", ""},
		{"gzip, deflate, br, zstd", "br"}, // Chromium's
		{"gzip", "gzip"},
		{"br;q=0.5, gzip;q=0.8", "gzip"},
		{"br;q=0, gzip", "gzip"},
		{"gzip;q=0, br;q=0", ""},
		{"*", "br"},
		{"*;q=0.5, br;q=0", "gzip"},
		{"identity", ""},
		{"deflate", ""},
		{"BR;Q=1", "br"},
		{"x-gzip", "gzip"},
		{"br;q=bogus, gzip;q=0.1", "gzip"},
	}
	for path, file := range assets {
		src, err := fs.ReadFile(web.Files, file)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			resp, body := getRaw(t, srv.URL+path, "Accept-Encoding", c.accept)
			ce := resp.Header.Get("Content-Encoding")
			if resp.StatusCode != 200 || ce != c.want {
				t.Errorf("%s with Accept-Encoding %q: %d, Content-Encoding %q, want 200 and %q", path, c.accept, resp.StatusCode, ce, c.want)
				continue
			}
			if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
				t.Errorf("%s: Vary %q lacks Accept-Encoding", path, resp.Header.Get("Vary"))
			}
			if got := decode(t, ce, body); !bytes.Equal(got, src) {
				t.Errorf("%s (%s): decoded body differs from %s", path, ce, file)
			}
			if ce != "" && len(body) >= len(src) {
				t.Errorf("%s (%s): %d bytes sent for %d", path, ce, len(body), len(src))
			}
			if resp.Header.Get("Cache-Control") != "public, max-age=300" || resp.Header.Get("ETag") == "" {
				t.Errorf("%s: Cache-Control %q ETag %q", path, resp.Header.Get("Cache-Control"), resp.Header.Get("ETag"))
			}
		}
		// Each coding has its own validator, and revalidation answers 304 without a body.
		r1, _ := getRaw(t, srv.URL+path, "Accept-Encoding", "br")
		r2, _ := getRaw(t, srv.URL+path, "Accept-Encoding", "gzip")
		if r1.Header.Get("ETag") == r2.Header.Get("ETag") {
			t.Errorf("%s: brotli and gzip share the ETag %s", path, r1.Header.Get("ETag"))
		}
		nm, body := getRaw(t, srv.URL+path, "Accept-Encoding", "br", "If-None-Match", r1.Header.Get("ETag"))
		if nm.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("%s: If-None-Match answered %d with %d bytes", path, nm.StatusCode, len(body))
		}
	}
}

// The hosted page comes in the negotiated language, compressed, and says what it varies by.
func TestHostedPageLanguageAndEncoding(t *testing.T) {
	srv := assetServer(t)
	for _, c := range []struct{ query, accept, want string }{
		{"", "de-DE,de;q=0.9,en;q=0.8", "de"},
		{"", "pt-BR", "pt"},
		{"", "ja", "en"},
		{"?locale=hi", "de-DE,de;q=0.9", "hi"},
		{"?locale=fr-CA", "", "fr"},
		{"?locale=es", "", "es"},
	} {
		resp, body := getRaw(t, srv.URL+"/checkout"+c.query, "Accept-Language", c.accept, "Accept-Encoding", "gzip, br")
		page := decode(t, resp.Header.Get("Content-Encoding"), body)
		want, err := web.CheckoutPage(c.want)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "br" || resp.Header.Get("Content-Language") != c.want || !bytes.Equal(page, want) {
			t.Errorf("%q %q: %d, encoding %q, Content-Language %q, want the %s page in br", c.query, c.accept, resp.StatusCode,
				resp.Header.Get("Content-Encoding"), resp.Header.Get("Content-Language"), c.want)
		}
		if v := strings.Join(resp.Header.Values("Vary"), ","); !strings.Contains(v, "Accept-Language") || !strings.Contains(v, "Accept-Encoding") {
			t.Errorf("page Vary %q", v)
		}
		if resp.Header.Get("Cache-Control") != "no-store" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("page headers %v", resp.Header)
		}
	}
}

func TestFavicon(t *testing.T) {
	srv := assetServer(t)
	resp, body := getRaw(t, srv.URL+"/favicon.ico")
	src, _ := fs.ReadFile(web.Files, "favicon.ico")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/x-icon" || !bytes.Equal(body, src) ||
		resp.Header.Get("Cache-Control") != "public, max-age=86400" || resp.Header.Get("ETag") == "" {
		t.Fatalf("favicon: %d %v (%d bytes)", resp.StatusCode, resp.Header, len(body))
	}
	// An ICO holding one 32x32 PNG.
	if !bytes.HasPrefix(body, []byte{0, 0, 1, 0, 1, 0, 32, 32}) || !bytes.Contains(body, []byte("\x89PNG")) {
		t.Errorf("favicon is not a 32x32 ICO: % x", body[:min(len(body), 16)])
	}
}
