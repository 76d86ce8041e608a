package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"
	"github.com/payreq/payreq/internal/errkind"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/testenv"
)

func batchUniq(prefix string) string { return prefix + strconv.FormatInt(time.Now().UnixNano(), 36) }

// batchStore is a store over the local stack's tables whose calls are counted.
func batchStore(t *testing.T) (*dynamo.Store, *testenv.CallCounter) {
	t.Helper()
	st := testenv.Stack(t)
	cfg, calls := testenv.CountingAWSConfig(t)
	return dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{Merchants: st.Resources.Tables["MerchantsTable"],
		PaymentRequests: st.Resources.Tables["PaymentRequestsTable"], Operations: st.Resources.Tables["OperationsTable"]}), calls
}

// The job lease: one owner at a time, taken over once it lapses, and a
// finished job is never worked on again.
func TestBatchJobLease(t *testing.T) {
	s, calls := batchStore(t)
	ctx := context.Background()
	now := time.Now()
	m := batchUniq("mer_job")
	j := &batch.Job{MerchantID: m, JobID: batch.JobID("a;b #1.csv", "SEQ1"), File: "a;b #1.csv", State: batch.JobHashing,
		NextLine: 1, CreatedAt: now, UpdatedAt: now, Clock: now, ExpiresAt: now.Add(time.Hour).Unix()}
	calls.Reset()
	got, err := s.AcquireBatchJob(ctx, j, "A", now, now.Add(time.Minute))
	if err != nil || got.Owner != "A" || len(calls.Calls()) != 2 {
		t.Fatalf("create (open marker and job): %+v %v (%v)", got, err, calls.Calls())
	}
	// The job is listed open until it is closed.
	isOpen := func() bool {
		open, err := s.OpenBatchJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range open {
			if o.MerchantID == m && o.JobID == j.JobID && !o.Since.IsZero() {
				return true
			}
		}
		return false
	}
	if !isOpen() {
		t.Fatal("a new job is not listed open")
	}
	defer func() {
		if err := s.CloseBatchJob(ctx, m, j.JobID); err != nil || isOpen() {
			t.Errorf("a closed job is still listed open (%v)", err)
		}
	}()
	// The same event again while A works: busy, with A's lease end.
	dup := *j
	busy, err := s.AcquireBatchJob(ctx, &dup, "B", now, now.Add(time.Minute))
	if !errkind.Is(err, errkind.Conflict) || busy.Owner != "A" || busy.LeaseUntil != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("second owner: %+v %v", busy, err)
	}
	// A saves progress; B cannot.
	got.State, got.HashOffset, got.FileHash, got.HashState = batch.JobCharging, 10, "abc", nil
	got.Counts = batch.Counts{Rows: 3, Approved: 1, Declined: 1, Rejected: 1}
	if err := s.SaveBatchJob(ctx, got, now); err != nil {
		t.Fatal(err)
	}
	stolen := *got
	stolen.Owner = "B"
	if err := s.SaveBatchJob(ctx, &stolen, now); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("save by a non-owner: %v", err)
	}
	// A's lease lapses (or A releases it): B takes over and sees A's progress.
	later := now.Add(2 * time.Minute)
	taken, err := s.LeaseBatchJob(ctx, m, j.JobID, "B", later, later.Add(time.Minute))
	if err != nil || taken.Owner != "B" || taken.State != batch.JobCharging || taken.Counts.Approved != 1 ||
		taken.FileHash != "abc" || taken.Invocations != 2 || taken.File != "a;b #1.csv" || taken.MerchantID != m {
		t.Fatalf("take over: %+v %v", taken, err)
	}
	if err := s.SaveBatchJob(ctx, got, later); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("the old owner saved after losing the lease: %v", err)
	}
	if err := s.ReleaseBatchJob(ctx, m, j.JobID, "B"); err != nil {
		t.Fatal(err)
	}
	// The same release again — the SDK's retry of an applied call whose
	// answer was lost — succeeds: B must not take it for a takeover.
	if err := s.ReleaseBatchJob(ctx, m, j.JobID, "B"); err != nil {
		t.Fatalf("release repeated: %v", err)
	}
	if err := s.ReleaseBatchJob(ctx, m, j.JobID, "A"); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("release by an owner who lost the job: %v", err)
	}
	if _, err := s.LeaseBatchJob(ctx, m, j.JobID, "C", later, later.Add(time.Minute)); err != nil {
		t.Fatalf("lease after release: %v", err)
	}
	// B's release repeated late, once C holds the job, fails: C works on it.
	if err := s.ReleaseBatchJob(ctx, m, j.JobID, "B"); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("a late repeat of B's release while C holds the job: %v", err)
	}
	if cur, _ := s.BatchJob(ctx, m, j.JobID); cur.Owner != "C" {
		t.Fatalf("owner after B's late release: %q", cur.Owner)
	}
	// Finished: returned as is, nobody leases it again.
	done, _ := s.BatchJob(ctx, m, j.JobID)
	done.State, done.LeaseUntil = batch.JobDone, 0
	if err := s.SaveBatchJob(ctx, done, later); err != nil {
		t.Fatal(err)
	}
	fin, err := s.LeaseBatchJob(ctx, m, j.JobID, "D", later, later.Add(time.Minute))
	if err != nil || !fin.Finished() || fin.Owner != "C" {
		t.Fatalf("finished job: %+v %v", fin, err)
	}
	if _, err := s.LeaseBatchJob(ctx, m, "file#nope#1", "D", later, later); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	// Listing, by file name (an exact name, not a prefix of another).
	other := &batch.Job{MerchantID: m, JobID: batch.JobID("a;b #1.csv.bak", "S"), File: "a;b #1.csv.bak", State: batch.JobHashing}
	if _, err := s.AcquireBatchJob(ctx, other, "E", now, now); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.BatchJobs(ctx, m, ""); len(all) != 2 {
		t.Errorf("all jobs: %d", len(all))
	}
	if one, _ := s.BatchJobs(ctx, m, "a;b #1.csv"); len(one) != 1 || one[0].JobID != j.JobID {
		t.Errorf("jobs of one file: %+v", one)
	}
}

// A row record is claimed once; later claims see it, its result, and its
// lease; a lapsed lease is taken over with the same payment request id.
func TestBatchRowRecords(t *testing.T) {
	s, calls := batchStore(t)
	ctx := context.Background()
	now := time.Now()
	m, key := batchUniq("mer_row"), batch.RowKeyOfReference("INV #7")
	r := &batch.RowRecord{MerchantID: m, Key: key, JobID: "file#a.csv#1", File: "a.csv", Row: 7, PaymentRequestID: 42, Owner: "A",
		LeaseUntil: now.Add(time.Minute).UnixMilli(), CreatedAt: now, ExpiresAt: now.Add(time.Hour).Unix()}
	calls.Reset()
	if _, err := s.ClaimBatchRow(ctx, r, now); err != nil || len(calls.Calls()) != 1 {
		t.Fatalf("claim: %v (%v)", err, calls.Calls())
	}
	again := *r
	again.Owner, again.PaymentRequestID = "B", 43
	held, err := s.ClaimBatchRow(ctx, &again, now)
	if !errkind.Is(err, errkind.Exists) || held.PaymentRequestID != 42 || held.Owner != "A" || !held.Owns("file#a.csv#1", 7) || held.File != "a.csv" || !held.LeaseActive(now) || held.Done {
		t.Fatalf("second claim: %+v %v", held, err)
	}
	// While A's lease runs, B cannot take over; afterwards it can, once.
	b := *held
	b.Owner = "B"
	if err := s.TakeOverBatchRow(ctx, &b, "X"); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("take over from the wrong holder: %v", err)
	}
	b.JobID, b.File, b.Row = "file#b.csv#2", "b.csv", 3 // another line takes the claim over
	if err := s.TakeOverBatchRow(ctx, &b, "A"); err != nil {
		t.Fatal(err)
	}
	if cur, err := s.BatchRowRecord(ctx, m, key, now); err != nil || !cur.Owns("file#b.csv#2", 3) || cur.File != "b.csv" || cur.Owner != "B" {
		t.Fatalf("taken over: %+v %v", cur, err)
	}
	if err := s.ReassignBatchRow(ctx, &b, 44); err != nil || b.PaymentRequestID != 44 {
		t.Fatalf("reassign: %v", err)
	}
	b.Status, b.TransactionID, b.Code, b.Message = "declined", "900", "999", "Declined, contact the card issuer"
	if err := s.CompleteBatchRows(ctx, []*batch.RowRecord{&b}); err != nil {
		t.Fatal(err)
	}
	got, err := s.BatchRowRecord(ctx, m, key, now)
	if err != nil || !got.Done || got.PaymentRequestID != 44 || got.Status != "declined" || got.Code != "999" || got.LeaseActive(now) {
		t.Fatalf("completed row: %+v %v", got, err)
	}
	if err := s.TakeOverBatchRow(ctx, &b, "B"); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("take over of a done row: %v", err)
	}
	// Many rows at once: more than one BatchWriteItem call.
	var rows []*batch.RowRecord
	for i := 100; i < 160; i++ {
		rows = append(rows, &batch.RowRecord{MerchantID: m, Key: batch.RowKeyOfReference(strconv.Itoa(i)), Row: i, PaymentRequestID: int64(i), Owner: "A",
			Status: "approved", TransactionID: strconv.Itoa(i), CreatedAt: now, ExpiresAt: now.Add(time.Hour).Unix()})
	}
	calls.Reset()
	if err := s.CompleteBatchRows(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if n := len(calls.Calls()); n != 3 {
		t.Errorf("60 rows in %d calls, want 3", n)
	}
	if r159, _ := s.BatchRowRecord(ctx, m, batch.RowKeyOfReference("159"), now); r159 == nil || !r159.Done || r159.TransactionID != "159" {
		t.Errorf("row 159: %+v", r159)
	}
	// An unfinished claim is forgotten only by its holder.
	gone := &batch.RowRecord{MerchantID: m, Key: batch.RowKeyOfReference("gone"), Row: 2, PaymentRequestID: 2, Owner: "A",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour).Unix()}
	if _, err := s.ClaimBatchRow(ctx, gone, now); err != nil {
		t.Fatal(err)
	}
	other := *gone
	other.Owner = "B"
	if err := s.ForgetBatchRow(ctx, &other); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("forgotten by another holder: %v", err)
	}
	if err := s.ForgetBatchRow(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BatchRowRecord(ctx, m, gone.Key, now); !errkind.Is(err, errkind.NotFound) {
		t.Errorf("forgotten record still there: %v", err)
	}
	// An expired record counts as absent.
	fp := batch.RowKeyOfFingerprint("00ff")
	exp := &batch.RowRecord{MerchantID: m, Key: fp, Row: 1, PaymentRequestID: 1, Owner: "A", ExpiresAt: now.Add(-time.Second).Unix()}
	if _, err := s.ClaimBatchRow(ctx, exp, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BatchRowRecord(ctx, m, fp, now); !errkind.Is(err, errkind.NotFound) {
		t.Errorf("an expired record is read back: %v", err)
	}
	fresh := *exp
	fresh.PaymentRequestID, fresh.ExpiresAt = 2, now.Add(time.Hour).Unix()
	if _, err := s.ClaimBatchRow(ctx, &fresh, now); err != nil {
		t.Errorf("claim over an expired record: %v", err)
	}
}

func TestSFTPUsers(t *testing.T) {
	s, calls := batchStore(t)
	ctx := context.Background()
	m := batchUniq("mer_sftp")
	user := dynamo.SFTPUsername(m)
	if _, err := s.SFTPUser(ctx, user); !errkind.Is(err, errkind.NotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	if err := s.SetSFTPPassword(ctx, m, user, "$argon2id$h1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSFTPPassword(ctx, "mer_other", user, "$argon2id$h2", time.Now()); !errkind.Is(err, errkind.Conflict) {
		t.Fatalf("another merchant took the user: %v", err)
	}
	if err := s.AddSFTPKey(ctx, m, user, "ssh-ed25519 AAAA1 a", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSFTPKey(ctx, m, user, "ssh-ed25519 AAAA1 a", time.Now()); !errkind.Is(err, errkind.Exists) {
		t.Fatalf("the same key twice: %v", err)
	}
	if err := s.SetSFTPPassword(ctx, m, user, "$argon2id$h3", time.Now()); err != nil {
		t.Fatal(err)
	}
	calls.Reset()
	u, err := s.SFTPUser(ctx, user)
	if err != nil || u.MerchantID != m || u.PasswordHash != "$argon2id$h3" || len(u.PublicKeys) != 1 || len(calls.Calls()) != 1 {
		t.Fatalf("user: %+v %v (%d calls: the identity provider does one read per login)", u, err, len(calls.Calls()))
	}
	for i := 2; i <= dynamo.MaxSFTPKeys; i++ {
		if err := s.AddSFTPKey(ctx, m, user, "ssh-ed25519 AAAA"+strconv.Itoa(i), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddSFTPKey(ctx, m, user, "ssh-ed25519 AAAA99", time.Now()); !errkind.Is(err, errkind.Conflict) {
		t.Errorf("key beyond the limit: %v", err)
	}
	// A key-only user.
	k := batchUniq("mer_key")
	if err := s.AddSFTPKey(ctx, k, dynamo.SFTPUsername(k), "ssh-ed25519 AAAAk", time.Now()); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.SFTPUser(ctx, dynamo.SFTPUsername(k)); u.PasswordHash != "" || len(u.PublicKeys) != 1 {
		t.Errorf("key-only user: %+v", u)
	}
}

// A group of rows is claimed in one write, all or none: a held key is
// named, nothing else is written, and the others are claimed by the next
// call.
func TestClaimBatchRowsTogether(t *testing.T) {
	s, calls := batchStore(t)
	ctx := context.Background()
	now := time.Now()
	m := batchUniq("mer_rows")
	row := func(i int) *batch.RowRecord {
		return &batch.RowRecord{MerchantID: m, Key: batch.RowKeyOfReference("REF-" + strconv.Itoa(i)), JobID: "file#g.csv#1", File: "g.csv",
			Row: i, PaymentRequestID: int64(100 + i), Owner: "A", LeaseUntil: now.Add(time.Minute).UnixMilli(), CreatedAt: now,
			ExpiresAt: now.Add(time.Hour).Unix()}
	}
	calls.Reset()
	if held, err := s.ClaimBatchRows(ctx, []*batch.RowRecord{row(1), row(2), row(3)}, now); err != nil || held != nil {
		t.Fatalf("claim three: %v %v", held, err)
	}
	if c := calls.Calls(); len(c) != 1 || c[0] != "DynamoDB.TransactWriteItems" {
		t.Fatalf("calls %v, want one TransactWriteItems", c)
	}
	for i := 1; i <= 3; i++ {
		if got, err := s.BatchRowRecord(ctx, m, row(i).Key, now); err != nil || got.PaymentRequestID != int64(100+i) || got.Row != i {
			t.Fatalf("row %d: %+v %v", i, got, err)
		}
	}
	// Row 2 is held: named, and rows 4 and 5 are not written.
	held, err := s.ClaimBatchRows(ctx, []*batch.RowRecord{row(4), row(2), row(5)}, now)
	if !errkind.Is(err, errkind.Exists) || len(held) != 1 || held[0] != 1 {
		t.Fatalf("held key: %v %v", held, err)
	}
	for _, i := range []int{4, 5} {
		if _, err := s.BatchRowRecord(ctx, m, row(i).Key, now); !errkind.Is(err, errkind.NotFound) {
			t.Fatalf("row %d of a refused group was written: %v", i, err)
		}
	}
	if got, err := s.BatchRowRecord(ctx, m, row(2).Key, now); err != nil || got.PaymentRequestID != 102 {
		t.Fatalf("held row changed: %+v %v", got, err)
	}
	if held, err := s.ClaimBatchRows(ctx, []*batch.RowRecord{row(4), row(5)}, now); err != nil || held != nil {
		t.Fatalf("claim the others: %v %v", held, err)
	}
}
