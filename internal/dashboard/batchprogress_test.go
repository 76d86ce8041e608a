package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/dashuser"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/testenv"
)

// A running batch file shows lines done of lines total as a progress bar,
// its counts by outcome and an estimated finish, and the page follows the
// job's progress without reloading (dashboard.js fetches the page and swaps
// the block), until the file is done. The job item stands for a file in
// the middle of its charging phase, as the batch function saves it.
func TestBrowserBatchProgressUpdatesWithoutReload(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	st := testenv.Stack(t).Store
	ctx := context.Background()
	now := time.Now().UTC()
	file := "big-" + dashuser.NewToken()[:6] + ".csv"
	job := &batch.Job{MerchantID: m.ID, JobID: batch.JobID(file, "0001"), File: file, State: batch.JobCharging,
		NextLine: 30_001, Lines: 100_000, Counts: batch.Counts{Rows: 30_000, Approved: 27_000, Declined: 2_500, Rejected: 500},
		CreatedAt: now.Add(-time.Minute), UpdatedAt: now}
	const owner = "progress-test"
	if _, err := st.AcquireBatchJob(ctx, job, owner, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Not an open job: no recovery takes this stand-in up.
	if err := st.CloseBatchJob(ctx, m.ID, job.JobID); err != nil {
		t.Fatal(err)
	}
	save := func(next int, counts batch.Counts, state string) {
		t.Helper()
		job.NextLine, job.Counts, job.State, job.Owner = next, counts, state, owner
		if err := st.SaveBatchJob(ctx, job, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	save(30_001, job.Counts, batch.JobCharging)

	tab := bt.New(t)
	viewerLanguage(t, tab, "en-US")
	signInTab(t, tab, u)
	bt.Navigate(t, tab, u.base+u.at("/dashboard/batches"))
	row := `document.querySelector('#batches tr[data-file="` + file + `"]')`
	got := bt.Eval[map[string]string](t, tab, `(() => { const r = `+row+`; const p = r.querySelector("progress");
		return {max: p.getAttribute("max"), value: p.getAttribute("value"), text: r.querySelector(".lines-text").textContent,
			eta: (r.querySelector(".eta") || {}).textContent || "", state: r.querySelector(".state").textContent,
			approved: r.children[5].textContent, declined: r.children[6].textContent, rejected: r.children[8].textContent}; })()`)
	for k, want := range map[string]string{"max": "100000", "value": "30000", "text": "30,000 of 100,000 lines", "state": "charging",
		"approved": "27,000", "declined": "2,500", "rejected": "500"} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
	// 30,000 lines in about a minute: 70,000 more in about 2 min 20 s.
	if len(got["eta"]) < len("done at about 00:00:00 UTC") {
		t.Errorf("no estimated finish: %q", got["eta"])
	}
	axeClean(t, tab, "batches with a running file")

	// The job moves on; the page follows without a reload.
	bt.Eval[bool](t, tab, `(() => { window.__samePage = true; return true; })()`)
	save(80_001, batch.Counts{Rows: 80_000, Approved: 72_000, Declined: 7_000, Rejected: 1_000}, batch.JobCharging)
	bt.WaitJS(t, tab, row+`.querySelector("progress").getAttribute("value") === "80000"`, 20*time.Second)
	if !bt.Eval[bool](t, tab, `window.__samePage === true`) {
		t.Error("the page was reloaded")
	}
	if g := bt.Eval[string](t, tab, row+`.children[5].textContent`); g != "72,000" {
		t.Errorf("approved after the update: %q", g)
	}
	// Done: the bar is full and the polling stops.
	job.ResultKey = "results/" + m.ID + "/" + file + ".result.csv"
	now2 := time.Now()
	job.CompletedAt = &now2
	save(100_001, batch.Counts{Rows: 100_000, Approved: 90_000, Declined: 9_000, Rejected: 1_000}, batch.JobDone)
	bt.WaitJS(t, tab, row+`.querySelector(".state").textContent === "done"`, 20*time.Second)
	if g := bt.Eval[string](t, tab, row+`.querySelector(".lines-text").textContent`); g != "100,000 of 100,000 lines" || !bt.Eval[bool](t, tab, `window.__samePage === true`) {
		t.Errorf("done: %q (same page: %v)", g, bt.Eval[bool](t, tab, `window.__samePage === true`))
	}
	if bt.Eval[bool](t, tab, `!!document.querySelector("[data-live-refresh][data-running]")`) {
		t.Error("still marked running")
	}
	// The overview lists no file in progress now.
	bt.Navigate(t, tab, u.base+u.at("/dashboard/overview"))
	if g := bt.Eval[string](t, tab, `document.querySelector("#batches-running").textContent`); g != "0" {
		t.Errorf("overview: %s files in progress", g)
	}
}
