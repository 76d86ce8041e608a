package batchproc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testing/needs"
	"github.com/payreq/payreq/internal/testing/stripetest"
)

// TestSmallFileIsNotStuckBehindALargeOne runs a local production stack of
// its own (the Stripe connector against stripe-mock) with the template's
// sharing controls at small values: an acquirer budget of 20 requests a
// second of which batch gets 50% (5 rows a second), a continuation queue of
// maximum concurrency 2 (so 2.5 rows a second per invocation while two
// merchants have files open, 5 for a lone one) and slices of 2 s. The local
// stack's poller keeps the queue's MaximumConcurrency as Lambda does.
//
// Merchant A uploads a 60-row file (at least 12 s at 5 rows a second)
// and then a 3-row file; merchant B uploads a 5-row file right after A's
// large one. B's file must finish while A's large file is still running,
// within the bound docs/batch.md states (⌈J/Q⌉ slices of waiting, J jobs
// with work queued, Q the queue concurrency, plus its own rows at the
// per-invocation pace); A's small file must not start before A's large file
// is done (upload order). Every row is charged once.
func TestSmallFileIsNotStuckBehindALargeOne(t *testing.T) {
	needs.External(t, "a local stack of its own")
	if os.Getenv("PAYREQ_OWN_STACK") == "" {
		// A process of its own, without the endpoint variables the
		// package's shared sandbox stack set in this one
		// (devstack.UseEndpoints): with them the stack below runs on the
		// shared stack's emulators, whose queue pollers then take this
		// test's continuations (seen: 8 of 68 rows reached its Stripe).
		cmd := exec.Command(os.Args[0], "-test.run=^TestSmallFileIsNotStuckBehindALargeOne$", "-test.v", "-test.count=1", "-test.timeout=8m")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PAYREQ_OWN_STACK=1")
		out, err := cmd.CombinedOutput()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "fairness_test.go") {
				t.Log(strings.TrimSpace(l))
			}
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSmallFileIsNotStuckBehindALargeOne") {
			t.Fatalf("the test in its own process: %v\n%s", err, out[max(0, len(out)-6000):])
		}
		return
	}
	mock := stripetest.Start(t, stripemock.Succeeded)
	front, err := stripetest.NewFront(mock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	state := t.TempDir()
	stack, err := devstack.Start(ctx, devstack.Options{StateDir: state, Stage: "production", Params: map[string]string{
		"LocalStripeSecretKey": "sk_test_local", "LocalStripeApiBase": front.URL, "LocalStripeWebhookSecrets": "whsec_fair",
		"AcquirerRequestsPerSecond": "20", "AcquirerEndpointRequestsPerSecond": "0", "BatchAcquirerShare": "50",
		"BatchQueueConcurrency": "2", "BatchSliceSeconds": "2"}})
	if err != nil {
		t.Fatalf("start production stack: %v", err)
	}
	t.Cleanup(stack.Close)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := fixtureWith(t, stack, cfg)

	// Two production merchants with SFTP passwords, made from the seeded one.
	newMerchant := func(tag string) (id, user, password string) {
		seed, err := stack.Store.Merchant(context.Background(), stack.Info.Merchant.ID)
		if err != nil {
			t.Fatal(err)
		}
		m := *seed
		m.ID, m.Name = merchant.NewID(), "Shop "+tag
		key := merchant.NewAPIKey(false) // never the seed's key: keys identify merchants
		m.APIKeyHash, m.APIKeyPrefix = merchant.HashAPIKey(key), merchant.KeyPrefix(key)
		if err := stack.Store.CreateMerchant(context.Background(), &m); err != nil {
			t.Fatal(err)
		}
		user, password = dynamo.SFTPUsername(m.ID), "pw-"+randomHex(12)
		hash, err := sftpauth.HashPassword(password)
		if err != nil {
			t.Fatal(err)
		}
		if err := stack.Store.SetSFTPPassword(context.Background(), m.ID, user, hash, time.Now()); err != nil {
			t.Fatal(err)
		}
		return m.ID, user, password
	}
	file := func(tag string, n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(line("Holder "+tag, "4242 4242 4242 4242", "12/30", "123", "10.00", "EUR", fmt.Sprintf("%s-%d", tag, i)) + "\n")
		}
		p := filepath.Join(t.TempDir(), tag+".csv")
		if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	aID, aUser, aPass := newMerchant("A")
	bID, bUser, bPass := newMerchant("B")
	big, smallA, smallB := file("a-big", 60), file("a-small", 3), file("b-small", 5)

	sa := openSFTP(t, stack.Info.SFTPAddr, aUser, aPass, "")
	sb := openSFTP(t, stack.Info.SFTPAddr, bUser, bPass, "")
	start := time.Now()
	sa.run("put " + big + " /incoming/")
	sb.run("put " + smallB + " /incoming/")
	bUploaded := time.Now()
	sa.run("put " + smallA + " /incoming/")
	sa.close()
	sb.close()

	// When each result appears (and when the large file's job is done).
	done := map[string]time.Duration{}
	keys := map[string]string{"a-big": batchproc.ResultKey(aID, "a-big.csv"), "a-small": batchproc.ResultKey(aID, "a-small.csv"),
		"b-small": batchproc.ResultKey(bID, "b-small.csv")}
	for len(done) < len(keys) && time.Since(start) < 3*time.Minute {
		for tag, key := range keys {
			if _, ok := done[tag]; ok {
				continue
			}
			if _, err := f.objects.Head(context.Background(), key); err == nil {
				done[tag] = time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(done) < len(keys) {
		t.Fatalf("results after 3 min: %v", done)
	}
	t.Logf("results after: A large (60 rows) %.1fs, B small (5 rows) %.1fs, A small (3 rows) %.1fs",
		done["a-big"].Seconds(), done["b-small"].Seconds(), done["a-small"].Seconds())

	// B's small file finished while A's large one was still running, and
	// its wait for a turn is within the stated bound: J = 2 jobs with work
	// (A's small one waits without charging), Q = 2, so ⌈J/Q⌉ = 1 slice
	// (2 s) before its first row is charged; plus what this machine and
	// emulator take to bring an upload to its first charge when nothing is
	// in the way (measured on A's large file in the same run: intake,
	// hashing, queue polling), counted twice for a loaded machine, and 1 s.
	// How fast the rows then go is the machine's (a loaded emulator runs
	// below the pace), so the bound is on the wait, not on the rows.
	if done["b-small"] >= done["a-big"] {
		t.Errorf("B's small file finished after A's large one (%v ≥ %v)", done["b-small"], done["a-big"])
	}
	intake := firstCharge(t, f, aID, "a-big").Sub(start)
	bound := 2*time.Second + 2*intake + time.Second
	if w := firstCharge(t, f, bID, "b-small").Sub(bUploaded); w > bound {
		t.Errorf("B's small file waited %v for its first charge, bound %v (1 slice of 2 s + 2 × %v intake + 1 s)", w, bound, intake)
	} else {
		t.Logf("B's small file: first charge %v after its upload (bound %v), result %v after it", w, bound, done["b-small"]-bUploaded.Sub(start))
	}
	// A's files in upload order: the small one after the large one.
	if done["a-small"] < done["a-big"] {
		t.Errorf("A's second file finished before its first (%v < %v)", done["a-small"], done["a-big"])
	}
	big1 := f.jobs(t, aID, "a-big.csv")
	small1 := f.jobs(t, aID, "a-small.csv")
	if len(big1) != 1 || len(small1) != 1 || big1[0].CompletedAt == nil {
		t.Fatalf("jobs: %+v %+v", big1, small1)
	}
	txs := firstCharge(t, f, aID, "a-small")
	if txs.Before(*big1[0].CompletedAt) {
		t.Errorf("A's second file charged its first row at %v, before its first file was done at %v", txs, *big1[0].CompletedAt)
	}
	// Every row charged once (one key per payment request at "Stripe").
	charges := front.Charges()
	if len(charges) != 68 {
		t.Errorf("payment requests charged: %d, want 68", len(charges))
	}
	for pr, n := range charges {
		if n != 1 {
			t.Errorf("payment request %s charged under %d keys", pr, n)
		}
	}
	for tag, id := range map[string]string{"a-big": aID, "a-small": aID, "b-small": bID} {
		for _, l := range parseResult(t, f.result(t, id, tag+".csv")) {
			if l.status != "approved" {
				t.Errorf("%s: %+v", tag, l)
			}
		}
	}
}

// firstCharge is when the first row of merchantID's file tag was charged
// (its transaction's creation).
func firstCharge(t *testing.T, f *fixture, merchantID, tag string) time.Time {
	t.Helper()
	for _, l := range parseResult(t, f.result(t, merchantID, tag+".csv")) {
		var id int64
		fmt.Sscan(l.txID, &id)
		tx, err := f.testStore.Transaction(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return tx.CreatedAt
	}
	t.Fatalf("%s: no rows", tag)
	return time.Time{}
}
