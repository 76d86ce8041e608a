// Package needs is the one switch between the fast suite and the full one:
// a test that needs something outside the test process (the local stack,
// an emulator, Chromium, stripe-mock, an SFTP client, the npm tools of
// infra/local) calls External first, and under `go test -short` it is
// skipped with the reason. `make test` runs without -short, so runs it.
// A leaf on purpose: devstack's own tests use it, and testenv.Stack does.
package needs

import (
	"strings"
	"testing"
)

// External skips tb under -short, saying what it needs ("the local stack"
// when what is empty).
func External(tb testing.TB, what ...string) {
	tb.Helper()
	if testing.Short() {
		reason := "the local stack"
		if len(what) > 0 {
			reason = strings.Join(what, ", ")
		}
		tb.Skipf("needs %s: skipped under -short (make test runs it)", reason)
	}
}
