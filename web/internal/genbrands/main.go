// Command genbrands writes the card-brand table of internal/card into the
// hosted page's script, between its markers (run by `go generate ./web`,
// from the web directory, before the compressed forms are made).
package main

import (
	"log"
	"os"
	"strings"

	"github.com/payreq/payreq/internal/card"
)

const script = "checkout/checkout.js"

func main() {
	src, err := os.ReadFile(script)
	if err != nil {
		log.Fatal(err)
	}
	s := string(src)
	i, j := strings.Index(s, card.BrandScriptBegin), strings.Index(s, card.BrandScriptEnd)
	if i < 0 || j < i {
		log.Fatalf("%s: card brand markers not found", script)
	}
	s = s[:i] + card.BrandScript() + s[j+len(card.BrandScriptEnd):]
	if err := os.WriteFile(script, []byte(s), 0o644); err != nil {
		log.Fatal(err)
	}
}
