package sandbox

import (
	"os"
	"strings"
	"testing"
)

// TestDocsPublishEveryInput keeps docs/sandbox.md in step with TestData: each
// input must appear on a line that also states its final code.
func TestDocsPublishEveryInput(t *testing.T) {
	b, err := os.ReadFile("../../../docs/sandbox.md")
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}
	lines := strings.Split(string(b), "\n")
	for _, tc := range TestData() {
		found := false
		for _, l := range lines {
			if strings.Contains(l, tc.Input) && (tc.Code == "" || strings.Contains(l, string(tc.Code))) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/sandbox.md has no line with %q and code %q (%s, %s)", tc.Input, tc.Code, tc.Method, tc.Class)
		}
	}
}
