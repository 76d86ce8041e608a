package payreq_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeLayoutListsEveryPackage: the README's Layout block names every
// Go package of the module, one line each, so a new package cannot go
// unexplained.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Layout\n")
	if i < 0 {
		t.Fatal("README.md has no Layout section")
	}
	start := strings.Index(s[i:], "```\n")
	end := strings.Index(s[i+start+4:], "```")
	if start < 0 || end < 0 {
		t.Fatal("README.md's Layout section has no code block")
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(s[i+start+4:i+start+4+end], "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			listed[f[0]] = true
		}
	}
	for rel := range modulePackages(t) {
		if !listed[rel] {
			t.Errorf("package %s is not in README.md's Layout (one line: path, then what it is)", rel)
		}
	}
}
