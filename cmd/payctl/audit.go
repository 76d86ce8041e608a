package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/dynamo"
)

// exitViolations is audit's exit code when an invariant is broken (1 stays
// "the command failed", 2 "usage"), so scripts tell the cases apart.
const exitViolations = 3

// auditCmd: `audit` reads the tables in parallel segments (the audit
// function's full pass, run to its end here), prints the JSON report and
// exits non-zero on any violation; `--recorded` lists the violations the
// audit function has recorded instead.
func auditCmd(g *globals) *cobra.Command {
	var (
		grace, timeout, every time.Duration
		segments, workers     int
		recorded              bool
	)
	c := &cobra.Command{
		Use:   "audit [--grace 5m] [--timeout 10m] [--segments 8] [--workers 8] [--recorded]",
		Short: "Check the invariants over every table: JSON report, exit 3 on any violation",
		Long: `audit reads the payment requests, transactions and (sandbox) ledger in
parallel segments and checks the service's invariants for every payment it
finds, each with its own consistent reads. Progress goes to stderr as JSON
lines; the report to stdout. It exits 3 when an invariant is broken (1 means
the audit itself failed). It changes nothing.

--recorded prints instead the violations the audit function has found and
keeps (what AuditViolationsAlarm counts), without reading the tables.`,
		Example: `  payctl --local audit
  payctl --stack payreq-sandbox audit --grace 10m --segments 32 --workers 16 --timeout 2h
  payctl --stack payreq-sandbox audit --recorded`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 || timeout <= 0 || segments < 1 || segments > 1000 || workers < 1 || every < 0 {
				return usageError("--grace and --progress must be >= 0, --timeout > 0, --segments 1..1000, --workers >= 1")
			}
			// Whole tables: its own --timeout, not the common one.
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			e, err := connect(ctx, *g)
			if err != nil {
				return err
			}
			a := e.store.Audit()
			if recorded {
				open, err := a.OpenViolations(ctx)
				if err != nil {
					return err
				}
				if open == nil {
					open = []audit.RecordedViolation{}
				}
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"violations": open}); err != nil {
					return err
				}
				if len(open) > 0 {
					return exitError{code: exitViolations, msg: fmt.Sprintf("%d recorded violation(s)", len(open))}
				}
				return nil
			}
			r, err := sweepTables(ctx, a, e.sandbox, time.Now(), grace, segments, workers, every, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
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
	c.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "overall time limit (large tables: about 1 minute per 100,000 payments at 8 workers)")
	c.Flags().IntVar(&segments, "segments", 8, "parallel scan segments per table")
	c.Flags().IntVar(&workers, "workers", 8, "segments read at once")
	c.Flags().DurationVar(&every, "progress", 5*time.Second, "how often a progress line goes to stderr (0: none)")
	c.Flags().BoolVar(&recorded, "recorded", false, "list the violations the audit function keeps instead of reading the tables")
	return c
}

// sweepTables sweeps the tables at now, a progress line at most every `every`
// on progress.
func sweepTables(ctx context.Context, a *dynamo.AuditStore, sandbox bool, now time.Time, grace time.Duration, segments, workers int,
	every time.Duration, progress io.Writer) (audit.Report, error) {
	var (
		mu      sync.Mutex
		printed time.Time
		latest  audit.SweepProgress
	)
	print := func(p audit.SweepProgress) {
		b, _ := json.Marshal(map[string]any{"progress": p})
		fmt.Fprintln(progress, string(b))
	}
	r, err := a.Sweep(ctx, sandbox, now, grace, segments, workers, func(p audit.SweepProgress) {
		mu.Lock()
		defer mu.Unlock()
		latest = p
		if every > 0 && time.Since(printed) >= every {
			printed = time.Now()
			print(p)
		}
	})
	if err == nil && every > 0 {
		mu.Lock()
		print(latest)
		mu.Unlock()
	}
	return r, err
}
