package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/cfn"
)

// ScheduleSource is a scheduled function of the template.
type ScheduleSource struct {
	FunctionID string
	Rule       string // the event's name, as in the rule's ARN
	Every      time.Duration
	Timeout    time.Duration // the function's template Timeout
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
			out = append(out, ScheduleSource{FunctionID: f.LogicalID, Rule: f.LogicalID + ev.Name, Every: time.Duration(n) * unit,
				Timeout: r.functionTimeout(f.LogicalID)})
		}
	}
	return out, nil
}

// RunSchedule invokes the function's Lambda handler every interval until ctx
// ends with EventBridge's "Scheduled Event", like EventBridge.
func RunSchedule(ctx context.Context, src ScheduleSource, every time.Duration, h lambda.Handler, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := Invoke(ctx, h, src.FunctionID, src.Timeout, ScheduledEvent(src.Rule, time.Now()), nil); err != nil && ctx.Err() == nil {
				log.Warn("scheduled function failed", "function", src.FunctionID, "error", err.Error())
			}
		}
	}
}

// ScheduledEvent is the event EventBridge sends for a schedule rule.
func ScheduledEvent(rule string, at time.Time) events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version: "0", ID: newRequestID(), DetailType: "Scheduled Event", Source: "aws.events",
		AccountID: Account, Time: at.UTC().Truncate(time.Second), Region: Region,
		Resources: []string{fmt.Sprintf("arn:aws:events:%s:%s:rule/%s-%s", Region, Account, StackName, rule)},
		Detail:    json.RawMessage("{}"),
	}
}
