package memstore_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/memstore"
)

var (
	_ batchproc.Store = (*memstore.Store)(nil)
	_ batchproc.Store = (*dynamo.Store)(nil)
)

// TestBatchStoreContract runs the batch processor's store (batchproc.Store:
// jobs and their lease, row records, open-job markers) through the same
// assertions on the in-memory fake and on internal/dynamo over the
// emulator (skipped under -short; make test runs it on both backends).
func TestBatchStoreContract(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { runBatchContract(t, func(*testing.T) batchproc.Store { return memstore.New() }) })
	t.Run("dynamo", func(t *testing.T) {
		runBatchContract(t, func(t *testing.T) batchproc.Store {
			st := testenv.Stack(t)
			cfg, _ := testenv.CountingAWSConfig(t)
			return dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{
				Merchants: st.Resources.Tables["MerchantsTable"], PaymentRequests: st.Resources.Tables["PaymentRequestsTable"],
				Operations: st.Resources.Tables["OperationsTable"], Transactions: st.Resources.Tables["TransactionsTable"],
			})
		})
	})
}

// ms is a time as the store's millisecond fields keep it.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

func newJob(merchantID, file string, now time.Time) *batch.Job {
	return &batch.Job{MerchantID: merchantID, JobID: batch.JobID(file, fmt.Sprint(now.UnixNano())), File: file, Bucket: "b",
		Key: "incoming/" + merchantID + "/" + file, ETag: "e1", Size: 10, Sequencer: "s", ResultKey: "results/" + merchantID + "/" + file,
		State: batch.JobHashing, NextLine: 1, Clock: now, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour).Unix()}
}

// sameJob compares jobs field by field, times by instant.
func sameJob(t *testing.T, what string, got, want *batch.Job) {
	t.Helper()
	norm := func(j batch.Job) batch.Job {
		j.Clock, j.CreatedAt, j.UpdatedAt = j.Clock.UTC().Round(0), j.CreatedAt.UTC().Round(0), j.UpdatedAt.UTC().Round(0)
		if j.CompletedAt != nil {
			c := j.CompletedAt.UTC().Round(0)
			j.CompletedAt = &c
		}
		if len(j.HashState) == 0 {
			j.HashState = nil
		}
		return j
	}
	if g, w := norm(*got), norm(*want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func newRow(merchantID, key, owner string, line int, now time.Time) *batch.RowRecord {
	return &batch.RowRecord{MerchantID: merchantID, Key: key, JobID: "file#a.csv#1", File: "a.csv", Row: line,
		PaymentRequestID: newID(), Owner: owner, LeaseUntil: now.Add(2 * time.Minute).UnixMilli(),
		CreatedAt: now.UTC().Round(time.Second), ExpiresAt: now.Add(time.Hour).Unix()}
}

func sameRow(t *testing.T, what string, got, want *batch.RowRecord) {
	t.Helper()
	g, w := *got, *want
	g.CreatedAt, w.CreatedAt = g.CreatedAt.UTC().Round(0), w.CreatedAt.UTC().Round(0)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func openOf(t *testing.T, s batchproc.Store, merchantID string) (all, of []batch.OpenJob) {
	t.Helper()
	everyone, err := s.OpenBatchJobs(context.Background())
	ok(t, "open jobs", err)
	for _, o := range everyone {
		if o.MerchantID == merchantID {
			all = append(all, o)
		}
	}
	of, err = s.OpenBatchJobsOf(context.Background(), merchantID)
	ok(t, "open jobs of", err)
	return all, of
}

func runBatchContract(t *testing.T, open func(*testing.T) batchproc.Store) {
	ctx := context.Background()

	t.Run("job lease", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		j := newJob(m, "a.csv", now)
		until := now.Add(time.Minute)
		_, err := s.LeaseBatchJob(ctx, m, j.JobID, "o1", now, until)
		is(t, "lease of an unknown job", err, errkind.NotFound)
		_, err = s.BatchJob(ctx, m, j.JobID)
		is(t, "unknown job", err, errkind.NotFound)

		got, err := s.AcquireBatchJob(ctx, j, "o1", now, until)
		ok(t, "acquire", err)
		want := *j
		want.Owner, want.LeaseUntil, want.Invocations = "o1", until.UnixMilli(), 1
		sameJob(t, "acquired", got, &want)
		if j.Owner != "o1" || j.Invocations != 1 {
			t.Fatalf("the acquired job given was not updated: %+v", j)
		}
		stored, err := s.BatchJob(ctx, m, j.JobID)
		ok(t, "read", err)
		sameJob(t, "stored", stored, &want)
		got.State = "changed" // a copy out
		if again, _ := s.BatchJob(ctx, m, j.JobID); again.State != batch.JobHashing {
			t.Fatalf("the returned job aliases the stored one: %s", again.State)
		}

		// Another owner, while the lease lives: busy, with the holder's job.
		j2 := newJob(m, "a.csv", now)
		j2.JobID = j.JobID
		busy, err := s.AcquireBatchJob(ctx, j2, "o2", now.Add(time.Second), now.Add(2*time.Minute))
		is(t, "acquire of a leased job", err, errkind.Conflict)
		if busy == nil || busy.Owner != "o1" || busy.LeaseUntil != until.UnixMilli() {
			t.Fatalf("busy answer %+v, want the holder's lease", busy)
		}
		busy, err = s.LeaseBatchJob(ctx, m, j.JobID, "o2", now.Add(time.Second), now.Add(2*time.Minute))
		is(t, "lease of a leased job", err, errkind.Conflict)
		if busy == nil || busy.Owner != "o1" {
			t.Fatalf("busy answer %+v", busy)
		}
		// The holder again (its own retry): leased, invocations counted.
		got, err = s.LeaseBatchJob(ctx, m, j.JobID, "o1", now.Add(2*time.Second), until.Add(time.Minute))
		ok(t, "the holder's lease again", err)
		if got.Owner != "o1" || got.LeaseUntil != until.Add(time.Minute).UnixMilli() || got.Invocations != 2 ||
			!got.UpdatedAt.Equal(now.Add(2*time.Second)) {
			t.Fatalf("re-leased %+v", got)
		}
		// Once the lease lapsed, another owner takes it; the acquire of
		// a redelivered event too, and the marker keeps its first time.
		later := until.Add(2 * time.Minute)
		got, err = s.AcquireBatchJob(ctx, j2, "o3", later, later.Add(time.Minute))
		ok(t, "acquire of a lapsed lease", err)
		if got.Owner != "o3" || got.Invocations != 3 || got.State != batch.JobHashing || got.File != "a.csv" {
			t.Fatalf("taken over %+v", got)
		}
		all, of := openOf(t, s, m)
		if len(all) != 1 || len(of) != 1 || all[0] != of[0] || of[0].JobID != j.JobID || !of[0].Since.Equal(ms(now)) {
			t.Fatalf("open markers %+v / %+v, want one since %v", all, of, ms(now))
		}
	})

	t.Run("save and release", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		j := newJob(m, "b.csv", now)
		_, err := s.AcquireBatchJob(ctx, j, "o1", now, now.Add(time.Minute))
		ok(t, "acquire", err)
		mine := *j
		mine.State, mine.HashOffset, mine.Offset, mine.NextLine, mine.Parts = batch.JobCharging, 10, 7, 3, 2
		mine.Counts = batch.Counts{Rows: 2, Approved: 1, Rejected: 1}
		mine.Lines, mine.Recoveries, mine.LeaseUntil = 9, 1, now.Add(3*time.Minute).UnixMilli()
		mine.HashState, mine.FileHash, mine.Snapshot, mine.Error = []byte{1, 2}, "abc", "work/x/input", "oops"
		mine.File, mine.ETag, mine.Invocations = "ignored.csv", "ignored", 99 // not the save's
		saveAt := now.Add(time.Second)
		ok(t, "save", s.SaveBatchJob(ctx, &mine, saveAt))
		if !mine.UpdatedAt.Equal(saveAt) {
			t.Fatalf("the saved job's UpdatedAt %v, want %v", mine.UpdatedAt, saveAt)
		}
		want := mine
		want.File, want.ETag, want.Invocations = j.File, j.ETag, 1
		got, err := s.BatchJob(ctx, m, j.JobID)
		ok(t, "read", err)
		sameJob(t, "saved", got, &want)

		// Removed when empty; CompletedAt set.
		mine.HashState, mine.Error, mine.Snapshot, mine.FileHash = nil, "", "", ""
		done := now.Add(2 * time.Second).UTC()
		mine.State, mine.CompletedAt = batch.JobDone, &done
		ok(t, "save done", s.SaveBatchJob(ctx, &mine, done))
		want = mine
		want.File, want.ETag, want.Invocations = j.File, j.ETag, 1
		got, _ = s.BatchJob(ctx, m, j.JobID)
		sameJob(t, "saved done", got, &want)
		// A finished job is returned to a lease, unleased, without error.
		fin, err := s.LeaseBatchJob(ctx, m, j.JobID, "o9", now.Add(time.Hour), now.Add(2*time.Hour))
		if err != nil || !fin.Finished() || fin.Owner != "o1" {
			t.Fatalf("lease of a finished job: %+v %v", fin, err)
		}
		fin, err = s.AcquireBatchJob(ctx, newJobWithID(j), "o9", now.Add(time.Hour), now.Add(2*time.Hour))
		if err != nil || !fin.Finished() || fin.Owner != "o1" {
			t.Fatalf("acquire of a finished job: %+v %v", fin, err)
		}

		// Another owner's save and release fail and change nothing.
		j2 := newJob(m, "c.csv", now)
		_, err = s.AcquireBatchJob(ctx, j2, "o1", now, now.Add(time.Minute))
		ok(t, "acquire", err)
		other := *j2
		other.Owner, other.Offset = "o2", 50
		is(t, "save by another owner", s.SaveBatchJob(ctx, &other, now), errkind.Conflict)
		is(t, "release by another owner", s.ReleaseBatchJob(ctx, m, j2.JobID, "o2"), errkind.Conflict)
		is(t, "release of an unknown job", s.ReleaseBatchJob(ctx, m, "file#none#1", "o1"), errkind.Conflict)
		missing := newJob(m, "none.csv", now)
		missing.Owner = "o1"
		is(t, "save of an unknown job", s.SaveBatchJob(ctx, missing, now), errkind.Conflict)
		got, _ = s.BatchJob(ctx, m, j2.JobID)
		if got.Offset != 0 || got.Owner != "o1" {
			t.Fatalf("changed by another owner: %+v", got)
		}
		// The holder's release, twice (a retried call); then its save
		// fails (it no longer holds the job), and a new owner leases at once.
		ok(t, "release", s.ReleaseBatchJob(ctx, m, j2.JobID, "o1"))
		ok(t, "the same release again", s.ReleaseBatchJob(ctx, m, j2.JobID, "o1"))
		got, _ = s.BatchJob(ctx, m, j2.JobID)
		if got.Owner != "" || got.LeaseUntil != 0 {
			t.Fatalf("released job %+v", got)
		}
		is(t, "save after release", s.SaveBatchJob(ctx, j2, now), errkind.Conflict)
		got, err = s.LeaseBatchJob(ctx, m, j2.JobID, "o2", now, now.Add(time.Minute))
		if err != nil || got.Owner != "o2" {
			t.Fatalf("lease after release: %+v %v", got, err)
		}
		is(t, "the old owner's release after a new lease", s.ReleaseBatchJob(ctx, m, j2.JobID, "o1"), errkind.Conflict)
		// A saved lease of 0 (a finished run's) is free to anyone.
		mine2 := *got
		mine2.LeaseUntil = 0
		ok(t, "save without lease", s.SaveBatchJob(ctx, &mine2, now))
		got, err = s.LeaseBatchJob(ctx, m, j2.JobID, "o3", now, now.Add(time.Minute))
		if err != nil || got.Owner != "o3" {
			t.Fatalf("lease of a job saved without lease: %+v %v", got, err)
		}
	})

	t.Run("30 acquires of one job at once: one holds it", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		j := newJob(m, "race.csv", now)
		var mu sync.Mutex
		busy := 0
		oks := concurrently(30, func(i int) error {
			c := *j
			_, err := s.AcquireBatchJob(ctx, &c, fmt.Sprintf("owner-%d", i), now, now.Add(time.Minute))
			if errkind.Is(err, errkind.Conflict) {
				mu.Lock()
				busy++
				mu.Unlock()
			}
			return err
		})
		if oks != 1 || busy != 29 {
			t.Fatalf("%d acquired, %d busy; want 1 and 29", oks, busy)
		}
		got, _ := s.BatchJob(ctx, m, j.JobID)
		if got.Invocations != 1 {
			t.Fatalf("invocations %d, want 1", got.Invocations)
		}
	})

	t.Run("open markers", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		var ids []string
		for _, f := range []string{"z.csv", "a.csv", "m.csv"} {
			j := newJob(m, f, now)
			_, err := s.AcquireBatchJob(ctx, j, "o", now, now.Add(time.Minute))
			ok(t, "acquire", err)
			ids = append(ids, j.JobID)
		}
		all, of := openOf(t, s, m)
		if !reflect.DeepEqual(all, of) || len(of) != 3 || of[0].JobID != ids[1] || of[1].JobID != ids[2] || of[2].JobID != ids[0] {
			t.Fatalf("open %+v / %+v, want three in job id order", all, of)
		}
		if other, _ := s.OpenBatchJobsOf(ctx, m+"x"); len(other) != 0 {
			t.Fatalf("another merchant's markers: %+v", other)
		}
		ok(t, "close", s.CloseBatchJob(ctx, m, ids[1]))
		ok(t, "close again", s.CloseBatchJob(ctx, m, ids[1]))
		ok(t, "close of an unknown job", s.CloseBatchJob(ctx, m, "file#none#1"))
		all, of = openOf(t, s, m)
		if len(all) != 2 || len(of) != 2 || of[0].JobID != ids[2] || of[1].JobID != ids[0] {
			t.Fatalf("after close: %+v / %+v", all, of)
		}
		if _, err := s.BatchJob(ctx, m, ids[1]); err != nil {
			t.Fatalf("closing removed the job: %v", err)
		}
	})

	t.Run("row claims", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		_, err := s.BatchRowRecord(ctx, m, "ref#none", now)
		is(t, "unknown row", err, errkind.NotFound)
		r := newRow(m, "ref#1", "o1", 1, now)
		got, err := s.ClaimBatchRow(ctx, r, now)
		ok(t, "claim", err)
		sameRow(t, "claimed", got, r)
		stored, err := s.BatchRowRecord(ctx, m, "ref#1", now)
		ok(t, "read", err)
		sameRow(t, "stored", stored, r)
		stored.Owner = "changed"
		if again, _ := s.BatchRowRecord(ctx, m, "ref#1", now); again.Owner != "o1" {
			t.Fatal("the returned row aliases the stored one")
		}
		// A second line with the key: the holder comes back.
		r2 := newRow(m, "ref#1", "o2", 7, now)
		held, err := s.ClaimBatchRow(ctx, r2, now)
		is(t, "claim of a held key", err, errkind.Exists)
		sameRow(t, "held", held, r)
		// An expired record counts as absent, for reads and claims.
		old := newRow(m, "fp#old", "o1", 2, now)
		old.ExpiresAt = now.Add(-time.Minute).Unix()
		_, err = s.ClaimBatchRow(ctx, old, now.Add(-2*time.Minute))
		ok(t, "claim (then valid)", err)
		_, err = s.BatchRowRecord(ctx, m, "fp#old", now)
		is(t, "expired row", err, errkind.NotFound)
		fresh := newRow(m, "fp#old", "o3", 3, now)
		got, err = s.ClaimBatchRow(ctx, fresh, now)
		ok(t, "claim over an expired record", err)
		sameRow(t, "claimed over expired", got, fresh)

		// Thirty lines claim one key at once: one wins.
		oks := concurrently(30, func(i int) error {
			_, err := s.ClaimBatchRow(ctx, newRow(m, "ref#race", fmt.Sprintf("o%d", i), i+1, now), now)
			return err
		})
		if oks != 1 {
			t.Fatalf("%d claims of one key won, want 1", oks)
		}
	})

	t.Run("row claims in one transaction", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		rows := []*batch.RowRecord{newRow(m, "ref#a", "o1", 1, now), newRow(m, "ref#b", "o1", 2, now), newRow(m, "ref#c", "o1", 3, now)}
		held, err := s.ClaimBatchRows(ctx, rows, now)
		if err != nil || held != nil {
			t.Fatalf("claim of free keys: %v %v", held, err)
		}
		for _, r := range rows {
			got, err := s.BatchRowRecord(ctx, m, r.Key, now)
			ok(t, "read", err)
			sameRow(t, "claimed "+r.Key, got, r)
		}
		next := []*batch.RowRecord{newRow(m, "ref#d", "o2", 4, now), newRow(m, "ref#b", "o2", 5, now), newRow(m, "ref#e", "o2", 6, now), newRow(m, "ref#a", "o2", 7, now)}
		held, err = s.ClaimBatchRows(ctx, next, now)
		is(t, "claim with held keys", err, errkind.Exists)
		if !reflect.DeepEqual(held, []int{1, 3}) {
			t.Fatalf("held %v, want [1 3]", held)
		}
		for _, k := range []string{"ref#d", "ref#e"} {
			_, err := s.BatchRowRecord(ctx, m, k, now)
			is(t, "a free key of a refused transaction ("+k+")", err, errkind.NotFound)
		}
		if got, _ := s.BatchRowRecord(ctx, m, "ref#b", now); got.Owner != "o1" {
			t.Fatalf("a held key changed hands: %+v", got)
		}
	})

	t.Run("row takeover, release, reassign, forget", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		r := newRow(m, "ref#t", "o1", 1, now)
		_, err := s.ClaimBatchRow(ctx, r, now)
		ok(t, "claim", err)

		mine := *r
		mine.Owner, mine.JobID, mine.File, mine.Row, mine.LeaseUntil = "o2", "file#b.csv#2", "b.csv", 9, now.Add(time.Hour).UnixMilli()
		mine.PaymentRequestID = 1 // not the takeover's
		is(t, "takeover from the wrong owner", s.TakeOverBatchRow(ctx, &mine, "o9"), errkind.Conflict)
		ghost := mine
		ghost.Key = "ref#ghost"
		is(t, "takeover of an unknown row", s.TakeOverBatchRow(ctx, &ghost, "o1"), errkind.Conflict)
		// Thirty takeovers from the same holder at once: one wins.
		oks := concurrently(30, func(i int) error {
			c := mine
			c.Owner = fmt.Sprintf("t%d", i)
			return s.TakeOverBatchRow(ctx, &c, "o1")
		})
		if oks != 1 {
			t.Fatalf("%d takeovers won, want 1", oks)
		}
		got, _ := s.BatchRowRecord(ctx, m, r.Key, now)
		if got.Owner[0] != 't' || got.JobID != mine.JobID || got.File != "b.csv" || got.Row != 9 ||
			got.LeaseUntil != mine.LeaseUntil || got.PaymentRequestID != r.PaymentRequestID {
			t.Fatalf("taken over %+v", got)
		}
		holder := *got

		// Release: the holder's only; the lease ends, the id stays.
		wrong := holder
		wrong.Owner = "o1"
		is(t, "release by a former holder", s.ReleaseBatchRow(ctx, &wrong), errkind.Conflict)
		ok(t, "release", s.ReleaseBatchRow(ctx, &holder))
		got, _ = s.BatchRowRecord(ctx, m, r.Key, now)
		if got.LeaseUntil != 0 || got.Owner != holder.Owner || got.PaymentRequestID != r.PaymentRequestID {
			t.Fatalf("released %+v", got)
		}

		// Reassign: the holder's, from the id it holds.
		stale := holder
		stale.PaymentRequestID = 42
		is(t, "reassign from another id", s.ReassignBatchRow(ctx, &stale, 43), errkind.Conflict)
		is(t, "reassign by another owner", s.ReassignBatchRow(ctx, &wrong, 43), errkind.Conflict)
		newPR := newID()
		ok(t, "reassign", s.ReassignBatchRow(ctx, &holder, newPR))
		if holder.PaymentRequestID != newPR {
			t.Fatalf("the reassigned row given keeps id %d", holder.PaymentRequestID)
		}
		got, _ = s.BatchRowRecord(ctx, m, r.Key, now)
		if got.PaymentRequestID != newPR {
			t.Fatalf("reassigned %+v", got)
		}

		// Forget: the holder's unfinished row only.
		is(t, "forget by another owner", s.ForgetBatchRow(ctx, &wrong), errkind.Conflict)
		ok(t, "forget", s.ForgetBatchRow(ctx, &holder))
		_, err = s.BatchRowRecord(ctx, m, r.Key, now)
		is(t, "forgotten row", err, errkind.NotFound)
		is(t, "forget again", s.ForgetBatchRow(ctx, &holder), errkind.Conflict)
		// The key is free again.
		_, err = s.ClaimBatchRow(ctx, newRow(m, r.Key, "o5", 1, now), now)
		ok(t, "claim after forget", err)
	})

	t.Run("complete rows", func(t *testing.T) {
		s := open(t)
		m, now := merchantID(), time.Now().UTC()
		var rows []*batch.RowRecord
		for i := range 30 { // more than one BatchWriteItem call
			r := newRow(m, fmt.Sprintf("ref#%d", i), "o1", i+1, now)
			_, err := s.ClaimBatchRow(ctx, r, now)
			ok(t, "claim", err)
			r.Status, r.TransactionID, r.Code, r.Message = string(batch.StatusDeclined), fmt.Sprint(1000+i), "999", "Declined"
			rows = append(rows, r)
		}
		rows[0].Code, rows[0].Message, rows[0].Status = "", "", string(batch.StatusApproved)
		ok(t, "complete", s.CompleteBatchRows(ctx, rows))
		for _, r := range rows {
			if !r.Done || r.LeaseUntil != 0 {
				t.Fatalf("the completed row given is not done: %+v", r)
			}
			got, err := s.BatchRowRecord(ctx, m, r.Key, now)
			ok(t, "read", err)
			sameRow(t, "completed "+r.Key, got, r)
		}
		// A done row is nobody's to take over, release, reassign or forget.
		d := *rows[1]
		is(t, "takeover of a done row", s.TakeOverBatchRow(ctx, &d, "o1"), errkind.Conflict)
		is(t, "release of a done row", s.ReleaseBatchRow(ctx, &d), errkind.Conflict)
		is(t, "reassign of a done row", s.ReassignBatchRow(ctx, &d, 5), errkind.Conflict)
		is(t, "forget of a done row", s.ForgetBatchRow(ctx, &d), errkind.Conflict)
		_, err := s.ClaimBatchRow(ctx, newRow(m, d.Key, "o2", 1, now), now)
		is(t, "claim of a done row", err, errkind.Exists)
	})
}

func newJobWithID(j *batch.Job) *batch.Job {
	c := *j
	c.Owner, c.LeaseUntil, c.Invocations = "", 0, 0
	return &c
}
