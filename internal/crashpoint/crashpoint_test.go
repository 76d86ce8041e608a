package crashpoint

import (
	"os/exec"
	"strings"
	"testing"
)

// The kill is compiled only with the crashtest tag: the Lambda binaries
// (built by `make build` / sam build without it) cannot reach it.
func TestKillIsOnlyInCrashtestBuilds(t *testing.T) {
	files := func(tags ...string) string {
		args := append([]string{"list"}, tags...)
		args = append(args, "-f", "{{.GoFiles}}", "github.com/payreq/payreq/internal/crashpoint")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return string(out)
	}
	if got := files("-tags", "lambda.norpc"); strings.Contains(got, "crash_on.go") || !strings.Contains(got, "crash_off.go") {
		t.Fatalf("a Lambda build compiles %s", got)
	}
	if got := files("-tags", "crashtest"); !strings.Contains(got, "crash_on.go") {
		t.Fatalf("a crashtest build compiles %s", got)
	}
	if Enabled {
		t.Fatal("this test binary was built with the crashtest tag")
	}
}
