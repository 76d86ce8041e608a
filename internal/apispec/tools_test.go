package apispec_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// repoRoot is the repository's top directory (tests run in internal/apispec).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// nodeTool runs one of infra/local's pinned npm tools (`npm ci` there
// installs them; make and .ci/run do it) from the repository root and
// returns its standard output. A missing tool fails the test: the linters
// are part of every machine's toolchain.
func nodeTool(t *testing.T, name string, args ...string) (stdout []byte, err error) {
	t.Helper()
	root := repoRoot(t)
	bin := filepath.Join(root, "infra/local/node_modules/.bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not installed: run `npm ci` in infra/local (make does it): %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	// No telemetry, no update check: the tools must work offline.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	var stderr []byte
	stdout, err = cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Logf("%s stderr:\n%s", name, stderr)
	}
	return stdout, err
}
