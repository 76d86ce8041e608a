package web

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io/fs"

	"github.com/andybalholm/brotli"
)

//go:generate go run ./internal/gencompressed

// Precompressed are the static files served with a Content-Encoding. Their
// gzip (.gz, level 9) and brotli (.br, quality 11) forms are generated once,
// by `go generate ./web`, into compressed/ and embedded: compressing them at
// start-up would cost a cold start about 0.3 s at brotli's best quality, and
// per request far more. TestCompressedUpToDate fails when a source changed
// and the generated files did not.
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
	ext := map[string]string{"gzip": ".gz", "br": ".br"}[encoding]
	if ext == "" {
		return nil, false
	}
	b, err := fs.ReadFile(compressed, "compressed/"+name+ext)
	return b, err == nil
}

// Gzip is src gzipped at the best level, with no name or time in the header
// (the output depends on src only).
func Gzip(src []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write(src) // writes to a bytes.Buffer do not fail
	_ = w.Close()
	return buf.Bytes()
}

// Brotli is src compressed by brotli at quality (0 to 11).
func Brotli(src []byte, quality int) []byte {
	var buf bytes.Buffer
	w := brotli.NewWriterLevel(&buf, quality)
	_, _ = w.Write(src)
	_ = w.Close()
	return buf.Bytes()
}
