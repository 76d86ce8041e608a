package checkout

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/payreq/payreq/web"
)

// encodedFile is a response body in its identity, gzip and brotli forms,
// compressed at build time (web.Precompressed, web.CompressedPage).
type encodedFile struct {
	raw, gz, br []byte
	etag        string // of the identity form; the others add their coding
}

func newEncodedFile(raw, gz, br []byte) *encodedFile {
	sum := sha256.Sum256(raw)
	return &encodedFile{raw: raw, gz: gz, br: br, etag: base64.RawURLEncoding.EncodeToString(sum[:12])}
}

// write sends the form the client prefers, with Vary: Accept-Encoding
// whatever it is (a cache must not hand the brotli form to a client that
// asked for none), and answers a matching If-None-Match with 304.
func (f *encodedFile) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Accept-Encoding")
	body, coding := f.raw, ""
	switch pickEncoding(r.Header.Get("Accept-Encoding"), f.br != nil, f.gz != nil) {
	case "br":
		body, coding = f.br, "br"
	case "gzip":
		body, coding = f.gz, "gzip"
	}
	etag := `"` + f.etag + `"`
	if coding != "" {
		etag = `"` + f.etag + "-" + coding + `"`
		h.Set("Content-Encoding", coding)
	}
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// pickEncoding chooses among the codings on offer by the client's
// Accept-Encoding q-values (RFC 9110 §12.5.3): the highest non-zero q wins,
// brotli on a tie; "*" stands for codings not named; "identity" when the
// client accepts neither (or sends no header).
func pickEncoding(header string, haveBr, haveGzip bool) string {
	q := map[string]float64{}
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		v := 1.0
		for _, p := range strings.Split(params, ";") {
			k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil || f < 0 || f > 1 {
				f = 0 // a malformed weight does not make a coding acceptable
			}
			v = f
		}
		if name == "x-gzip" {
			name = "gzip"
		}
		q[name] = v
	}
	weight := func(c string) float64 {
		if v, ok := q[c]; ok {
			return v
		}
		return q["*"] // 0 when absent
	}
	br, gz := 0.0, 0.0
	if haveBr {
		br = weight("br")
	}
	if haveGzip {
		gz = weight("gzip")
	}
	switch {
	case br > 0 && br >= gz:
		return "br"
	case gz > 0:
		return "gzip"
	}
	return ""
}

var (
	assetsOnce sync.Once
	assets     map[string]*encodedFile
)

// staticAsset is a file of web.Files with the embedded compressed forms
// when it is one of web.Precompressed.
func staticAsset(name string) (*encodedFile, bool) {
	assetsOnce.Do(func() {
		assets = map[string]*encodedFile{}
		for _, n := range web.Precompressed {
			raw, err1 := fs.ReadFile(web.Files, n)
			gz, ok1 := web.Compressed(n, "gzip")
			br, ok2 := web.Compressed(n, "br")
			if err1 == nil && ok1 && ok2 {
				assets[n] = newEncodedFile(raw, gz, br)
			}
		}
	})
	if f, ok := assets[name]; ok {
		return f, true
	}
	raw, err := fs.ReadFile(web.Files, name)
	if err != nil {
		return nil, false
	}
	return newEncodedFile(raw, nil, nil), true
}

var (
	pagesOnce sync.Once
	pages     map[string]*encodedFile
	pagesErr  error
)

// checkoutPage is the hosted page in lang with its embedded compressed forms.
func checkoutPage(lang string) (*encodedFile, error) {
	pagesOnce.Do(func() {
		pages = map[string]*encodedFile{}
		for _, l := range web.Languages {
			raw, err := web.CheckoutPage(l)
			if err != nil {
				pagesErr = fmt.Errorf("checkout page %s: %w", l, err)
				return
			}
			gz, ok1 := web.CompressedPage(l, "gzip")
			br, ok2 := web.CompressedPage(l, "br")
			if !ok1 || !ok2 {
				gz, br = nil, nil // not generated: served uncompressed rather than not at all
			}
			pages[l] = newEncodedFile(raw, gz, br)
		}
	})
	if pagesErr != nil {
		return nil, pagesErr
	}
	p, ok := pages[lang]
	if !ok {
		return nil, fmt.Errorf("no checkout page in %q", lang)
	}
	return p, nil
}
