package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/payreq/payreq/internal/audit"
)

// exitViolations is audit's exit code when an invariant is broken (1 stays
// "the command failed", 2 "usage"), so scripts tell the cases apart.
const exitViolations = 3

// auditCmd: `audit` scans the tables, prints the JSON report and exits
// non-zero on any violation.
func auditCmd(ctx context.Context, g globals, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	grace := fs.Duration("grace", audit.DefaultGrace, "how long past a deadline or since a change before a record counts as broken")
	timeout := fs.Duration("timeout", 10*time.Minute, "overall time limit (full table scans)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return report(usageError("usage: payctl audit [--grace 5m] [--timeout 10m]"), stderr)
	}
	if *grace < 0 || *timeout <= 0 {
		return report(usageError("--grace must be >= 0 and --timeout > 0"), stderr)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	e, err := connect(ctx, g)
	if err != nil {
		return report(err, stderr)
	}
	d, err := e.store.AuditData(ctx)
	if err != nil {
		return report(err, stderr)
	}
	r := audit.Check(d, time.Now(), *grace)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		fmt.Fprintln(stderr, "payctl:", err)
		return 1
	}
	if !r.OK() {
		fmt.Fprintf(stderr, "payctl: audit found %d violation(s)\n", len(r.Violations))
		return exitViolations
	}
	return 0
}
