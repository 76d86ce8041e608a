// Command gencompressed writes the gzip and brotli forms of web.Precompressed
// into web/compressed (run by `go generate ./web`, from the web directory).
package main

import (
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
		gz, br := web.Gzip(src), web.Brotli(src, brotli.BestCompression)
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
}
