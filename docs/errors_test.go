package docs_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/problem"
)

// docs/errors.md lists every spec code of internal/codes, each once, with the
// message the service sends for it, and HTTP statuses that match the
// problem constructors that carry it.
func TestErrorsPageListsEverySpecCode(t *testing.T) {
	b, err := os.ReadFile("errors.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d{3}) \| ([^|]+) \| ([^|]+) \| [^|]+ \|$`)
	seen := map[codes.Code][]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		c := codes.Code(m[1])
		if _, dup := seen[c]; dup {
			t.Errorf("code %s listed twice", c)
		}
		if !c.Known() {
			t.Errorf("code %s is not a spec code", c)
		}
		if got, want := strings.TrimSpace(m[2]), c.Message(); got != want {
			t.Errorf("code %s: meaning %q, internal/codes says %q", c, got, want)
		}
		var st []int
		for _, s := range strings.Split(m[3], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || http.StatusText(n) == "" {
				t.Errorf("code %s: bad HTTP status %q", c, s)
			}
			st = append(st, n)
		}
		seen[c] = st
	}
	for _, c := range codes.All() {
		if _, ok := seen[c]; !ok {
			t.Errorf("code %s (%s) missing from docs/errors.md", c, c.Message())
		}
	}
	// The statuses of the codes that problem constructors carry.
	for c, p := range map[codes.Code][]*problem.Problem{
		codes.InvalidCredentials:   {problem.From(errkind.UnauthorizedErr(""))},
		codes.EntityNotFound:       {problem.From(errkind.NotFoundErr(""))},
		codes.SystemError:          {problem.From(nil), problem.From(errkind.UnavailableErr(""))},
		codes.TransactionCancelled: {problem.From(errkind.ConflictErr("", codes.TransactionCancelled))},
		codes.InvalidAmount:        {problem.From(errkind.Field("amount", codes.InvalidAmount, ""))},
	} {
		for _, pr := range p {
			if pr.Code != c || !slices.Contains(seen[c], pr.Status) {
				t.Errorf("code %s: docs say %v, the problem it travels in is %d (code %s)", c, seen[c], pr.Status, pr.Code)
			}
		}
	}
	// A decline is a processed attempt: 200.
	for _, c := range []codes.Code{codes.DeclinedContactIssuer, codes.InsufficientFunds, codes.AmountAboveMaximum, codes.CountryNotAllowed} {
		if !slices.Equal(seen[c], []int{http.StatusOK}) {
			t.Errorf("decline code %s: docs say %v, want 200", c, seen[c])
		}
	}
}

// The idempotency and rate-limit pages carry the guide sections of their
// packages' documentation word for word.
func TestGuidePagesMatchTheCode(t *testing.T) {
	for page, src := range map[string]string{
		"idempotency.md": "../internal/idempotency/idempotency.go",
		"ratelimits.md":  "../internal/ratelimit/ratelimit.go",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		_, guide, ok := strings.Cut(string(b), "The section below is meant for the integration guide.\n//\n")
		guide, _, _ = strings.Cut(guide, "\npackage ")
		if !ok || guide == "" {
			t.Fatalf("%s: no guide section", src)
		}
		var lines []string
		for _, l := range strings.Split(guide, "\n") {
			l = strings.TrimPrefix(l, "//")
			if t, ok := strings.CutPrefix(l, "\t"); ok {
				l = t
			} else {
				l = strings.TrimPrefix(l, " ")
			}
			lines = append(lines, l)
		}
		// The page has its own title: compare from the first line after the section heading.
		want := strings.Join(lines[1:], "\n")
		want = strings.TrimSpace(want)
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(md), want) {
			t.Errorf("%s does not contain the guide section of %s:\n%s", page, src, want)
		}
	}
}

// Relative links in README.md and docs/*.md point at files that exist.
func TestDocLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob("*.md")
	pages = append(pages, "../README.md")
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), target)); err != nil {
				t.Errorf("%s links %s, which does not exist", p, target)
			}
		}
	}
}

// The "Error kinds" table of docs/errors.md is the one problem.From applies:
// every kind is listed once with the status and problem type it gets.
func TestErrorKindsTable(t *testing.T) {
	b, err := os.ReadFile("errors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Error kinds (inside the service)")
	if !ok {
		t.Fatal("errors.md has no Error kinds section")
	}
	row := regexp.MustCompile("(?m)^\\| ([a-z ()]+?) \\| (\\d{3}) \\| `([a-z-]+)`")
	listed := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		name := strings.TrimSuffix(m[1], " (any other error)")
		listed[name] = true
		var k errkind.Kind = -1
		for c := errkind.Unknown; c <= errkind.Unavailable; c++ {
			if c.String() == name {
				k = c
			}
		}
		if k < 0 {
			t.Errorf("errors.md lists kind %q, which errkind does not have", name)
			continue
		}
		p := problem.From(errkind.New(k, "x", ""))
		if strconv.Itoa(p.Status) != m[2] || p.Type != problem.TypeBase+m[3] {
			t.Errorf("kind %s: errors.md says %s %s, problem.From gives %d %s", name, m[2], m[3], p.Status, p.Type)
		}
	}
	for c := errkind.Unknown; c <= errkind.Unavailable; c++ {
		if !listed[c.String()] {
			t.Errorf("kind %s is not in errors.md's Error kinds table", c)
		}
	}
	if p := problem.From(errkind.Validation([]errkind.FieldError{{Field: "amount"}})); p.Type != problem.TypeBase+"validation" || p.Status != http.StatusBadRequest {
		t.Errorf("invalid with fields: %d %s", p.Status, p.Type)
	}
	// The reasons: one row each, with the type and status the table gives.
	reasons := regexp.MustCompile("(?m)^\\| [^|]+ \\| ([a-z ]+) \\| (\\d{3}) \\| `([a-z-]+)` \\|$")
	rows := map[string]bool{}
	for _, m := range reasons.FindAllStringSubmatch(section, -1) {
		rows[m[1]+" "+m[2]+" "+m[3]] = true
	}
	for _, r := range errkind.Reasons() {
		p := problem.From(errkind.Because(r, "x", ""))
		if key := r.Kind().String() + " " + strconv.Itoa(p.Status) + " " + strings.TrimPrefix(p.Type, problem.TypeBase); !rows[key] {
			t.Errorf("reason %d: errors.md has no row %q", r, key)
		}
	}
	if len(rows) != len(errkind.Reasons()) {
		t.Errorf("errors.md lists %d reasons, errkind has %d", len(rows), len(errkind.Reasons()))
	}
}
