package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/audit"
)

// exitViolations is audit's exit code when an invariant is broken (1 stays
// "the command failed", 2 "usage"), so scripts tell the cases apart.
const exitViolations = 3

// auditCmd: `audit` scans the tables, prints the JSON report and exits
// non-zero on any violation.
func auditCmd(g *globals) *cobra.Command {
	var grace, timeout time.Duration
	c := &cobra.Command{
		Use:   "audit [--grace 5m] [--timeout 10m]",
		Short: "Check the invariants over every table: JSON report, exit 3 on any violation",
		Long: `audit scans the tables (full, consistent scans) and checks the service's
invariants. It prints the JSON report and exits 3 when an invariant is broken
(1 means the audit itself failed).`,
		Example: `  payctl --local audit
  payctl --stack payreq-sandbox audit --grace 10m`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 || timeout <= 0 {
				return usageError("--grace must be >= 0 and --timeout > 0")
			}
			// Full table scans: its own --timeout, not the common one.
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			e, err := connect(ctx, *g)
			if err != nil {
				return err
			}
			d, err := e.store.AuditData(ctx)
			if err != nil {
				return err
			}
			d.SandboxAcquirer = e.sandbox
			r := audit.Check(d, time.Now(), grace)
			if err := printJSON(cmd.OutOrStdout(), r); err != nil {
				return err
			}
			if !r.OK() {
				return exitError{code: exitViolations, msg: fmt.Sprintf("audit found %d violation(s)", len(r.Violations))}
			}
			return nil
		},
	}
	c.Flags().DurationVar(&grace, "grace", audit.DefaultGrace, "how long past a deadline or since a change before a record counts as broken")
	c.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "overall time limit (full table scans)")
	return c
}
