package web

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/card"
)

// checkoutBrandBlock is the generated card-brand block of the hosted
// page's script, markers included.
func checkoutBrandBlock(t *testing.T) string {
	t.Helper()
	src, err := Files.ReadFile("checkout/checkout.js")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i, j := strings.Index(s, card.BrandScriptBegin), strings.Index(s, card.BrandScriptEnd)
	if i < 0 || j < i {
		t.Fatal("checkout.js has no generated card-brand block")
	}
	return s[i : j+len(card.BrandScriptEnd)]
}

// The hosted page's brand table is internal/card's, as generated.
func TestCheckoutBrandTableIsCurrent(t *testing.T) {
	if got := checkoutBrandBlock(t); got != card.BrandScript() {
		t.Fatalf("web/checkout/checkout.js has a stale card-brand table: run `go generate ./web`\ngot:\n%s\nwant:\n%s", got, card.BrandScript())
	}
}

// TestCheckoutBrandsMatchGo runs the page's brand detection in Node on
// every range boundary of the table (and just outside it) and requires the
// brand DetectBrand gives, so the page never shows one brand while the
// service decides another.
func TestCheckoutBrandsMatchGo(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required (the emulators need it too): ", err)
	}
	inputs := card.BrandBoundaries()
	// Prefixes being typed, and numbers of no brand.
	inputs = append(inputs, "", "3", "30", "309", "3095", "6221", "622126", "62212", "9999999999999999", "1234567890123456")
	in, _ := json.Marshal(inputs)
	prog := checkoutBrandBlock(t) + "console.log(JSON.stringify(" + string(in) + ".map(iinBrand)));\n"
	out, err := exec.Command(node, "-e", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got []*string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(inputs) {
		t.Fatalf("node output %q: %v", out, err)
	}
	for i, d := range inputs {
		want := card.DetectBrand(d)
		page := card.Unknown
		if got[i] != nil {
			page = card.Brand(*got[i])
		}
		if page != want {
			t.Errorf("%q: page says %s, service says %s", d, page, want)
		}
	}
}
