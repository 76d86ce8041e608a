package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/dynamo"
)

// retentionCmd: `retention backfill` gives the payment requests and
// transactions written before their tables had TTL the expiresAt the
// service writes today (docs/operations.md, Retention).
func retentionCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "retention",
		Short:   "Retention of stored records",
		Long:    "retention keeps stored records' lifetimes as docs/operations.md states them: backfill gives records written before TTL their expiresAt.",
		Example: "  payctl --local retention backfill",
	}
	var (
		timeout, every time.Duration
		segments       int
	)
	backfill := &cobra.Command{
		Use:   "backfill [--segments 8] [--timeout 1h]",
		Short: "Give requests and transactions written before TTL their expiresAt",
		Long: `backfill scans the payment requests and transactions tables in parallel
segments for records without expiresAt (written before the tables had TTL)
and writes the one the service writes today: a transaction and an unpaid
request two years after their creation, a paid request two years after its
payment. Each write is conditional on the record as read, so a record the
service changes meanwhile keeps what its own write gives it. Safe to run
twice, and while the service runs. Progress goes to stderr as JSON lines,
the counts to stdout.`,
		Example: `  payctl --local retention backfill
  payctl --stack payreq-production retention backfill --segments 32 --timeout 4h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 || segments < 1 || segments > 1000 || every < 0 {
				return usageError("--timeout must be > 0, --segments 1..1000, --progress >= 0")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			e, err := connect(ctx, *g)
			if err != nil {
				return err
			}
			var (
				mu      sync.Mutex
				printed time.Time
			)
			counts, err := e.store.BackfillRecordExpiry(ctx, segments, func(c dynamo.BackfillCounts) {
				mu.Lock()
				defer mu.Unlock()
				if every > 0 && time.Since(printed) >= every {
					printed = time.Now()
					b, _ := json.Marshal(map[string]any{"progress": c})
					fmt.Fprintln(cmd.ErrOrStderr(), string(b))
				}
			})
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), counts)
		},
	}
	backfill.Flags().IntVar(&segments, "segments", 8, "parallel scan segments per table")
	backfill.Flags().DurationVar(&timeout, "timeout", time.Hour, "overall time limit")
	backfill.Flags().DurationVar(&every, "progress", 5*time.Second, "how often a progress line goes to stderr (0: none)")
	c.AddCommand(backfill)
	return c
}
