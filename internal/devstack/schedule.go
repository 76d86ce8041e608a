package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	"github.com/payreq/payreq/internal/cfn"
)

// ScheduleSource is a scheduled function of the template.
type ScheduleSource struct {
	FunctionID string
	Every      time.Duration
}

var rateExpr = regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)

// Schedules lists the template's Schedule events (rate expressions only).
func (r *Resources) Schedules() ([]ScheduleSource, error) {
	var out []ScheduleSource
	for _, f := range r.Functions {
		for _, ev := range f.Events {
			if ev.Type != "Schedule" {
				continue
			}
			expr := cfn.Path(ev.Properties, "Schedule")
			if expr == nil {
				return nil, fmt.Errorf("function %s event %s has no Schedule", f.LogicalID, ev.Name)
			}
			m := rateExpr.FindStringSubmatch(expr.Value)
			if m == nil {
				return nil, fmt.Errorf("function %s: only rate(...) schedules run locally, got %q", f.LogicalID, expr.Value)
			}
			n, _ := strconv.Atoi(m[1])
			unit := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour,
				"hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}[m[2]]
			out = append(out, ScheduleSource{FunctionID: f.LogicalID, Every: time.Duration(n) * unit})
		}
	}
	return out, nil
}

// RunSchedule invokes run every interval until ctx ends, like EventBridge.
func RunSchedule(ctx context.Context, src ScheduleSource, every time.Duration, run func(context.Context) error, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ictx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := run(ictx); err != nil && ctx.Err() == nil {
				log.Warn("scheduled function failed", "function", src.FunctionID, "error", err.Error())
			}
			cancel()
		}
	}
}
