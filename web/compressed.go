package web

import (
	"embed"
	"io/fs"
)

//go:generate go run ./internal/genbrands
//go:generate go run ./internal/gencompressed

// Precompressed are the static files served with a Content-Encoding. Their
// gzip (.gz, level 9) and brotli (.br, quality 11) forms are generated once,
// by `go generate ./web`, into compressed/ and embedded, like those of the
// hosted page in each language (compressed/pages/<lang>.html.*). Compressing
// at start-up instead would cost every cold start about 0.2 s at brotli's
// best quality, and would link a brotli encoder into the function.
// TestCompressedUpToDate fails when a source changed and its generated forms
// did not.
var Precompressed = []string{
	"checkout/checkout.css",
	"checkout/checkout.js",
	"checkout/acs.js",
	"sdk/paycheckout.js",
	"sdk/paycheckout.d.ts",
}

//go:embed compressed
var compressed embed.FS

// Compressed returns the embedded encoding ("gzip" or "br") of name, one of
// Precompressed.
func Compressed(name, encoding string) ([]byte, bool) {
	return compressedFile(name, encoding)
}

// CompressedPage returns the embedded encoding ("gzip" or "br") of
// CheckoutPage(lang).
func CompressedPage(lang, encoding string) ([]byte, bool) {
	return compressedFile(PagePath(lang), encoding)
}

// PagePath names the generated forms of the hosted page in lang under
// compressed/ (without the .gz or .br).
func PagePath(lang string) string { return "pages/" + lang + ".html" }

func compressedFile(name, encoding string) ([]byte, bool) {
	ext := map[string]string{"gzip": ".gz", "br": ".br"}[encoding]
	if ext == "" {
		return nil, false
	}
	b, err := fs.ReadFile(compressed, "compressed/"+name+ext)
	return b, err == nil
}
