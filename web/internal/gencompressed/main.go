// Command gencompressed writes the gzip and brotli forms of web.Precompressed
// and of the hosted page in every language into web/compressed (run by
// `go generate ./web`, from the web directory).
package main

import (
	"bytes"
	"compress/gzip"
	"log"
	"os"
	"path/filepath"

	"github.com/andybalholm/brotli"

	"github.com/payreq/payreq/web"
)

func main() {
	for _, name := range web.Precompressed {
		src, err := os.ReadFile(name)
		if err != nil {
			log.Fatal(err)
		}
		write(name, src)
	}
	for _, lang := range web.Languages {
		// Rendered from the embedded sources: run go generate twice after editing index.html
		// or a translation (TestCompressedUpToDate tells).
		page, err := web.CheckoutPage(lang)
		if err != nil {
			log.Fatal(err)
		}
		write(web.PagePath(lang), page)
	}
}

func write(name string, src []byte) {
	gz, br := gzipBest(src), brotliBest(src)
	out := filepath.Join("compressed", name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(out+".gz", gz, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(out+".br", br, 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("%s: %d bytes, gzip %d, brotli %d", name, len(src), len(gz), len(br))
}

// gzipBest has no name or time in its header: the output depends on src only.
func gzipBest(src []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := w.Write(src); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}

func brotliBest(src []byte) []byte {
	var buf bytes.Buffer
	w := brotli.NewWriterLevel(&buf, brotli.BestCompression)
	if _, err := w.Write(src); err != nil {
		log.Fatal(err)
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}
