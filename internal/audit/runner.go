package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Runner is the audit's scheduled run (every minute): it sends the
// stream heartbeat, judges the subjects whose checks are due, moves the
// full pass forward with the time left, and publishes the audit's metrics
// (RunMetrics), so that an audit that stopped shows as missing data, an
// alarm (template.yaml treats it as breaching).
type Runner struct {
	Judge     *Judge
	Checks    Checks
	Findings  Findings
	Heartbeat Heartbeat
	Pass      *Passer
	Log       *slog.Logger
	// Budget is how long one run judges (due checks, then the pass),
	// well inside the function's timeout.
	Budget time.Duration
	// DueBatch is how many due checks are taken at a time; Concurrency how
	// many subjects are judged at once.
	DueBatch, Concurrency int
}

// PassSlack is how much longer than its period the full pass's assurance
// may grow before it counts as late (a pass takes hours at volume).
const PassSlack = 24 * time.Hour

// RunStats is what one run did and saw.
type RunStats struct {
	At time.Time
	// Judged: due checks judged; NewViolations recorded by this run;
	// OpenViolations kept after it.
	Judged, NewViolations, OpenViolations int
	// StreamLag is how long the oldest heartbeat the stream consumer has
	// not read waited; CheckLag how long the oldest due check is overdue.
	StreamLag, CheckLag time.Duration
	Pass                Pass
}

// UncheckedAge is how old the oldest change not yet judged may be: the
// larger of the stream's lag and the due checks' (a change is judged
// Grace after its write when neither lags).
func (s RunStats) UncheckedAge() time.Duration { return max(s.StreamLag, s.CheckLag) }

// Run does one scheduled run at now; the metrics go to publish (one log
// line). A failing step is logged and the others still run: the metrics
// are published whatever happened, so only a run that never happens is
// missing data.
func (r *Runner) Run(ctx context.Context, now time.Time, publish func(RunMetrics) error) (RunStats, error) {
	st := RunStats{At: now.UTC()}
	start := time.Now() // the budget is wall time; now is the audit's clock
	until := start.Add(r.Budget)
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	var errs []error
	fail := func(step string, err error) {
		r.Log.Error("audit step failed", "step", step, "error", err.Error())
		errs = append(errs, fmt.Errorf("%s: %w", step, err))
	}
	lag, err := r.Heartbeat.Beat(ctx, now)
	if err != nil {
		fail("heartbeat", err)
	}
	st.StreamLag = lag
	settler := &Settler{Findings: r.Findings, Checks: r.Checks, Log: r.Log}
	if _, err := settler.Load(ctx); err != nil {
		fail("open violations", err)
	} else {
		// Due checks first, with two thirds of the budget while a pass
		// runs: they are what reports a violation within minutes.
		dueUntil := start.Add(r.Budget * 2 / 3)
		if dueUntil.After(until) {
			dueUntil = until
		}
		n, err := r.drain(ctx, settler, now, dueUntil)
		st.Judged = n
		if err != nil {
			fail("due checks", err)
		}
		if r.Pass != nil {
			p, err := r.Pass.Step(ctx, now, until, func(v Verdict) error { return settler.Settle(ctx, v, now) })
			st.Pass = p
			if err != nil {
				fail("full pass", err)
			}
		}
		st.NewViolations, st.OpenViolations = settler.New, settler.OpenCount()
	}
	if oldest, ok, err := r.Checks.OldestDue(ctx, now); err != nil {
		fail("oldest due check", err)
	} else if ok {
		st.CheckLag = max(0, now.Sub(oldest))
	}
	m := RunMetrics{At: now, OpenViolations: st.OpenViolations, UncheckedAge: st.UncheckedAge(),
		PassAge: st.Pass.Age(now), PassPercent: st.Pass.Percent(), Judged: st.Judged}
	if r.Pass != nil {
		m.PassLate = max(0, m.PassAge-r.Pass.Every-PassSlack)
	}
	if err := publish(m); err != nil {
		errs = append(errs, err)
	}
	r.Log.Info("audit run", "judged", st.Judged, "newViolations", st.NewViolations, "openViolations", st.OpenViolations,
		"streamLagSeconds", int64(st.StreamLag/time.Second), "checkLagSeconds", int64(st.CheckLag/time.Second),
		"passId", st.Pass.ID, "passScanned", st.Pass.Scanned(), "passPercent", st.Pass.Percent(), "failedSteps", len(errs))
	if len(errs) > 0 {
		return st, fmt.Errorf("audit run: %d step(s) failed: %w", len(errs), errs[0])
	}
	return st, nil
}

// drain judges due checks until none is due or until.
func (r *Runner) drain(ctx context.Context, st *Settler, now, until time.Time) (int, error) {
	judged := 0
	for time.Now().Before(until) && ctx.Err() == nil {
		dues, err := r.Checks.DueChecks(ctx, now, max(1, r.DueBatch))
		if err != nil {
			return judged, err
		}
		if len(dues) == 0 {
			return judged, nil
		}
		seen := map[string]bool{}
		var subjects []Subject
		for _, d := range dues {
			if k := d.Subject.Key(); !seen[k] {
				seen[k] = true
				subjects = append(subjects, d.Subject)
			}
		}
		if err := judgeAll(ctx, r.Judge, subjects, now, r.Concurrency, func(v Verdict) error { return st.Settle(ctx, v, now) }); err != nil {
			return judged, err
		}
		// Removed only once judged and settled: a run that dies before
		// leaves them for the next.
		if err := r.Checks.DoneChecks(ctx, dues); err != nil {
			return judged, err
		}
		judged += len(subjects)
	}
	return judged, nil
}
