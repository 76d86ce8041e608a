package docs

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"io"
	"net/http"
	"strings"
	"sync"
)

// RedocGz is Redoc's standalone bundle (redoc/bundles/redoc.standalone.js
// of the version pinned in infra/local/package.json), gzipped. The local
// stack serves it itself, so the reference at /docs works offline, without a
// CDN. `make api-docs` copies it again after an upgrade;
// TestRedocBundleIsThePinnedOne (internal/apispec) fails while it differs.
//
//go:embed redoc.standalone.js.gz
var RedocGz []byte

// redocLogo is the one remote resource the bundle loads: the attribution's
// logo, from Redocly's CDN. It is served as an empty data: image instead
// (Redoc hides an image that does not load), so the page fetches nothing
// from another origin.
const redocLogo = "https://cdn.redoc.ly/redoc/logo-mini.svg"

// PinnedRedocBundle returns the uncompressed bundle as pinned.
var PinnedRedocBundle = sync.OnceValue(func() []byte {
	zr, err := gzip.NewReader(bytes.NewReader(RedocGz))
	if err != nil {
		panic("docs: redoc.standalone.js.gz: " + err.Error()) // embedded at build time
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		panic("docs: redoc.standalone.js.gz: " + err.Error())
	}
	return b
})

// RedocBundle is the bundle as served: PinnedRedocBundle without the remote logo.
var RedocBundle = sync.OnceValue(func() []byte {
	return bytes.Replace(PinnedRedocBundle(), []byte(redocLogo), []byte("data:,"), 1)
})

// The page has no inline code: the CSP below allows scripts from this
// origin only.
const referencePage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Payment Request Service API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="redoc"></div>
<script src="/docs/redoc.standalone.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`

// init.js renders /openapi.yaml, the description the stack itself serves,
// so the page always shows the current one.
const referenceInit = `Redoc.init('/openapi.yaml', {
  expandResponses: '200,201',
  jsonSampleExpandLevel: 3,
  sortTagsAlphabetically: false,
  hideDownloadButton: false
}, document.getElementById('redoc'));
`

// ReferenceCSP is the Content-Security-Policy of every /docs response:
// scripts, the description and images from this origin only, nothing from
// another one (no CDN, no fonts, no analytics). Redoc styles itself with
// styled-components, which inserts <style> elements at run time, hence
// 'unsafe-inline' for styles only; its search index runs in a blob: worker.
const ReferenceCSP = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ReferenceHandler serves the rendered API reference of the local stack:
// GET /docs (the page), /docs/init.js and /docs/redoc.standalone.js. Mount
// it on "GET /docs" and "GET /docs/{file}".
func ReferenceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		var ctype string
		switch strings.TrimPrefix(r.URL.Path, "/docs") {
		case "", "/":
			body, ctype = []byte(referencePage), "text/html; charset=utf-8"
		case "/init.js":
			body, ctype = []byte(referenceInit), "text/javascript; charset=utf-8"
		case "/redoc.standalone.js":
			body, ctype = RedocBundle(), "text/javascript; charset=utf-8"
		default:
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("Content-Security-Policy", ReferenceCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(body)
	})
}
