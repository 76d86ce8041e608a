package card

import (
	"fmt"
	"sort"
	"strings"
)

// The hosted page detects the brand while the payer types, with this
// package's table: BrandScript renders iinRanges and brandNames as the
// page's JavaScript, between the markers below in web/checkout/checkout.js
// (`go generate ./web` writes it; web's TestCheckoutBrandTableIsCurrent
// fails when the page's copy differs, and TestCheckoutBrandsMatchGo runs it
// in Node on every range boundary against DetectBrand).
const (
	BrandScriptBegin = "  // BEGIN card brands: generated from internal/card/brand.go by `go generate ./web`; do not edit.\n"
	BrandScriptEnd   = "  // END card brands\n"
)

// BrandScript is the generated block, markers included: IIN (the ranges,
// checked in order like DetectBrand), BRAND_NAMES and iinBrand(digits),
// which returns a brand id or null.
func BrandScript() string {
	var b strings.Builder
	b.WriteString(BrandScriptBegin)
	b.WriteString("  const IIN = [\n")
	for i, r := range iinRanges {
		sep := ","
		if i == len(iinRanges)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    [%d, %d, %d, '%s']%s\n", r.width, r.lo, r.hi, r.brand, sep)
	}
	b.WriteString("  ];\n  const BRAND_NAMES = {\n")
	ids := make([]string, 0, len(brandNames))
	for id := range brandNames {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	for i, id := range ids {
		n := brandNames[Brand(id)]
		lens := make([]string, len(n.lengths))
		for j, l := range n.lengths {
			lens[j] = fmt.Sprint(l)
		}
		sep := ","
		if i == len(ids)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s: ['%s', [%s]]%s\n", id, n.name, strings.Join(lens, ", "), sep)
	}
	b.WriteString("  };\n")
	b.WriteString("  const iinBrand = (d) => {\n" +
		"    for (const [w, lo, hi, id] of IIN) {\n" +
		"      if (d.length >= w) { const p = +d.slice(0, w); if (p >= lo && p <= hi) return id; }\n" +
		"    }\n" +
		"    return null;\n" +
		"  };\n")
	b.WriteString(BrandScriptEnd)
	return b.String()
}

// BrandBoundaries are card-number prefixes (padded to 16 digits) at and
// around every range boundary of the table, for tests that hold another
// implementation to DetectBrand.
func BrandBoundaries() []string {
	var out []string
	for _, r := range iinRanges {
		for _, p := range []int{r.lo - 1, r.lo, r.hi, r.hi + 1} {
			s := fmt.Sprint(p)
			if len(s) != r.width {
				continue
			}
			out = append(out, s+strings.Repeat("0", 16-len(s)), s+strings.Repeat("9", 16-len(s)))
		}
	}
	return out
}
