//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/stripemock"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/stripetest"
	"github.com/payreq/payreq/internal/wire/batchwire"
)

// TestBenchAcquirerShare is the proof under load of docs/batch.md ("Shoppers
// first, merchants fair"): a local production stack whose Stripe
// (stripe-mock) sits behind a front that allows PAYREQ_BENCH_ACQUIRER_RPS
// requests a second and answers Stripe's 429 rate_limit beyond; steady
// hosted-page card payments (PAYREQ_BENCH_SHOPPERS_PER_S a second) measured
// for PAYREQ_BENCH_BASELINE alone, then while PAYREQ_BENCH_MERCHANTS
// merchants each upload a PAYREQ_BENCH_FILE_ROWS-row file over SFTP at the
// same moment, until every result file exists. It reports the shoppers'
// p50/p95 and error rate with and without the batch load, the 429s shoppers
// saw (must be 0), the 429s the acquirer answered (absorbed by the
// connector's retries), rows charged exactly once, exact result files and
// each merchant's completion time.
//
// Defaults are the issue's: 5 merchants × 20,000 rows. The acquirer limit
// defaults to 400 requests a second, Stripe's live 100 scaled ×4 so that
// 100,000 rows fit a bench run (batch gets 50%: 100 rows a second); the
// template parameters follow the same numbers, so the shares are the ones
// production has.
//
//	make bench   # or, smaller while developing:
//	PAYREQ_BENCH_FILE_ROWS=500 go test -tags bench -count=1 -run '^TestBenchAcquirerShare$' -v -timeout 90m ./internal/testing/bench/
func TestBenchAcquirerShare(t *testing.T) {
	var (
		merchants = envInt("PAYREQ_BENCH_MERCHANTS", 5)
		rows      = envInt("PAYREQ_BENCH_FILE_ROWS", 20_000)
		rps       = envInt("PAYREQ_BENCH_ACQUIRER_RPS", 400)
		shoppers  = envInt("PAYREQ_BENCH_SHOPPERS_PER_S", 4)
		baseline  = time.Duration(envInt("PAYREQ_BENCH_BASELINE_S", 60)) * time.Second
		queueConc = envInt("PAYREQ_BENCH_QUEUE_CONCURRENCY", 4)
	)
	mock := stripetest.Start(t, stripemock.Succeeded)
	front, err := stripetest.NewFront(mock)
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	front.SetRate(float64(rps))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	stack, err := devstack.Start(ctx, devstack.Options{StateDir: t.TempDir(), Stage: "production",
		Env: map[string]string{"LOG_LEVEL": "WARN"}, Params: map[string]string{
			"LocalStripeSecretKey": "sk_test_local", "LocalStripeApiBase": front.URL, "LocalStripeWebhookSecrets": "whsec_bench",
			"AcquirerRequestsPerSecond": strconv.Itoa(rps), "AcquirerEndpointRequestsPerSecond": "0", "BatchAcquirerShare": "50",
			"BatchQueueConcurrency": strconv.Itoa(queueConc)}})
	cancel()
	if err != nil {
		t.Fatalf("start production stack: %v", err)
	}
	defer stack.Close()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	objects := s3store.New(s3store.NewClient(cfg), stack.Resources.Buckets["BatchBucket"])
	share := batchwire.BatchShare{GlobalPerSecond: float64(rps), SharePercent: 50, QueueConcurrency: queueConc}

	// Merchants made from the seeded production one, each with its own key.
	newMerchant := func(tag string) (id, apiKey string) {
		seed, err := stack.Store.Merchant(context.Background(), stack.Info.Merchant.ID)
		if err != nil {
			t.Fatal(err)
		}
		m := *seed
		apiKey = merchant.NewAPIKey(false)
		m.ID, m.Name, m.RateLimitPerMinute = merchant.NewID(), "Bench "+tag, 1_000_000
		m.APIKeyHash, m.APIKeyPrefix = merchant.HashAPIKey(apiKey), merchant.KeyPrefix(apiKey)
		if err := stack.Store.CreateMerchant(context.Background(), &m); err != nil {
			t.Fatal(err)
		}
		return m.ID, apiKey
	}
	_, shopKey := newMerchant("shop")
	base := stack.Info.APIBase
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	// One shopper: a payment request, its hosted checkout, a card payment.
	// The latency is the payment's (the call that reaches the acquirer).
	type outcome struct {
		lat    time.Duration
		status int
	}
	var n atomic.Int64
	shop := func() outcome {
		i := n.Add(1)
		cr := testenv.Do(t, "POST", base+"/payment-requests", shopKey, fmt.Sprintf(`{"amount":12.5,"unit":"EUR","referenceId":"shop-%d"}`, i))
		if cr.Status != 201 {
			return outcome{status: cr.Status}
		}
		id := strconv.FormatInt(int64(cr.JSON(t)["id"].(float64)), 10)
		s := testenv.Do(t, "POST", base+"/payment-requests/"+id+"/checkout-session", shopKey, nil)
		if s.Status != 201 && s.Status != 200 {
			return outcome{status: s.Status}
		}
		tok := s.JSON(t)["token"].(string)
		req, _ := http.NewRequest("POST", base+"/checkout/api/pay/card",
			strings.NewReader(`{"holderName":"Ann Lee","number":"4242 4242 4242 4242","expiry":"12/30","cvc":"123"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Checkout-Token", tok)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return outcome{lat: time.Since(start), status: 599}
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		o := outcome{lat: time.Since(start), status: resp.StatusCode}
		if o.status == 200 && !strings.Contains(string(raw), `"transactionStatusId":1`) {
			o.status = 299 // answered, but not approved: a decline
		}
		return o
	}
	// steady runs shoppers at a fixed rate until stop is closed.
	steady := func(stop <-chan struct{}) []outcome {
		var mu sync.Mutex
		var out []outcome
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / time.Duration(shoppers))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				wg.Wait()
				return out
			case <-tick.C:
				wg.Add(1)
				go func() {
					defer wg.Done()
					o := shop()
					mu.Lock()
					out = append(out, o)
					mu.Unlock()
				}()
			}
		}
	}
	summary := func(os []outcome) (p50, p95 time.Duration, errRate float64, got429, declined int, statuses map[int]int) {
		var lat []time.Duration
		errs := 0
		statuses = map[int]int{}
		for _, o := range os {
			statuses[o.status]++
			if o.status != 200 {
				errs++
			}
			if o.status == 429 {
				got429++
			}
			if o.status == 299 {
				declined++
			}
			if o.lat > 0 {
				lat = append(lat, o.lat)
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		if len(lat) > 0 {
			p50, p95 = lat[(len(lat)-1)/2], lat[int(float64(len(lat)-1)*0.95)]
		}
		if len(os) > 0 {
			errRate = float64(errs) / float64(len(os))
		}
		return
	}

	// 1. Shoppers alone.
	stop := make(chan struct{})
	time.AfterFunc(baseline, func() { close(stop) })
	alone := steady(stop)

	// 2. The batch merchants upload at the same moment; shoppers go on.
	dir := t.TempDir()
	type bm struct {
		id, user, password, file, path string
		uploaded, done                 time.Time
	}
	bms := make([]*bm, merchants)
	for i := range bms {
		id, _ := newMerchant(fmt.Sprintf("batch-%d", i))
		b := &bm{id: id, user: dynamo.SFTPUsername(id), password: "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36), file: fmt.Sprintf("pay-%d.csv", i)}
		hash, err := sftpauth.HashPassword(b.password)
		if err != nil {
			t.Fatal(err)
		}
		if err := stack.Store.SetSFTPPassword(context.Background(), id, b.user, hash, time.Now()); err != nil {
			t.Fatal(err)
		}
		b.path = filepath.Join(dir, b.file)
		writeBatchFile(t, b.path, i, rows)
		bms[i] = b
	}
	lim0, lookups0 := front.Limited.Load(), front.Lookups.Load()
	stop = make(chan struct{})
	var loaded []outcome
	var sw sync.WaitGroup
	sw.Add(1)
	go func() { defer sw.Done(); loaded = steady(stop) }()
	batchStart := time.Now()
	var uw sync.WaitGroup
	for _, b := range bms {
		uw.Add(1)
		go func() {
			defer uw.Done()
			sftpPut(t, stack.Info.SFTPAddr, b.user, b.password, b.path)
			b.uploaded = time.Now()
		}()
	}
	uw.Wait()
	expect := time.Duration(float64(merchants*rows)/share.RowsPerSecond()*float64(time.Second)) + 5*time.Minute
	for left := merchants; left > 0 && time.Since(batchStart) < 2*expect; {
		left = 0
		for _, b := range bms {
			if b.done.IsZero() {
				if _, err := objects.Head(context.Background(), batchproc.ResultKey(b.id, b.file)); err == nil {
					b.done = time.Now()
				} else {
					left++
				}
			}
		}
		time.Sleep(time.Second)
	}
	close(stop)
	sw.Wait()
	batchTook := time.Since(batchStart)

	// 3. Exact results, each row charged once.
	charges := front.Charges()
	twice, total := 0, 0
	for _, b := range bms {
		if b.done.IsZero() {
			t.Errorf("merchant %s: no result file after %v", b.id, batchTook)
			continue
		}
		ids := checkBatchResult(t, objects, batchproc.ResultKey(b.id, b.file), rows)
		for _, id := range ids {
			total++
			if charges[id] != 1 {
				twice++
			}
		}
	}
	if twice != 0 {
		t.Errorf("%d batch payment requests not confirmed under exactly one key", twice)
	}
	p50a, p95a, erra, r429a, deca, sta := summary(alone)
	p50b, p95b, errb, r429b, decb, stb := summary(loaded)
	var rep strings.Builder
	fmt.Fprintf(&rep, "acquirer limit %d req/s (front), batch share 50%% = %.1f rows/s, queue concurrency %d, %d merchants × %d rows\n",
		rps, share.RowsPerSecond(), queueConc, merchants, rows)
	fmt.Fprintf(&rep, "%-22s %8s %9s %9s %8s %12s\n", "shoppers", "payments", "p50 ms", "p95 ms", "errors", "429 to shop")
	fmt.Fprintf(&rep, "%-22s %8d %9s %9s %7.2f%% %12d\n", "without batch", len(alone), ms(p50a), ms(p95a), 100*erra, r429a)
	fmt.Fprintf(&rep, "%-22s %8d %9s %9s %7.2f%% %12d\n", "with batch", len(loaded), ms(p50b), ms(p95b), 100*errb, r429b)
	fmt.Fprintf(&rep, "answers by status (299 = declined): without batch %v, with batch %v\n", sta, stb)
	fmt.Fprintf(&rep, "acquirer 429s during the batch: %d (absorbed by retries); lookups: %d; batch rows charged once: %d of %d\n",
		front.Limited.Load()-lim0, front.Lookups.Load()-lookups0, total-twice, merchants*rows)
	for _, b := range bms {
		if !b.done.IsZero() {
			fmt.Fprintf(&rep, "merchant %s: result %.0f s after the uploads began (%.1f rows/s)\n", b.id, b.done.Sub(batchStart).Seconds(),
				float64(rows)/b.done.Sub(batchStart).Seconds())
		}
	}
	t.Log("\n" + rep.String())
	if r429a+r429b != 0 {
		t.Errorf("shoppers saw %d 429s, want 0", r429a+r429b)
	}
	// Declines are what a 429 must never become (every card here is
	// approved by stripe-mock). Other errors (timeouts of a loaded machine's
	// emulators) are reported, in both phases, not asserted.
	if deca+decb != 0 {
		t.Errorf("shoppers declined: %d alone, %d with batch; want 0", deca, decb)
	}
}

// writeBatchFile writes rows approved card rows with unique references.
func writeBatchFile(t *testing.T, path string, merchant, rows int) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(w, "Holder %d;4242 4242 4242 4242;12/30;123;payer@example.com;4155550100;1 Main St;Springfield;IL;62701;US;%d.%02d;EUR;m%d-r%d\n",
			i, 1+i%90, i%100, merchant, i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// sftpPut uploads path to /incoming/ with the OpenSSH client.
func sftpPut(t *testing.T, addr, user, password, path string) {
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("sshpass", "-p", password, "sftp", "-o", "BatchMode=no", "-b", "-", "-P", port, "-F", "/dev/null",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "PubkeyAuthentication=no", "-o", "PreferredAuthentications=password", user+"@"+host)
	cmd.Stdin = strings.NewReader("put " + path + " /incoming/\nbye\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sftp put %s: %v %s", path, err, out)
	}
}

// checkBatchResult reads a result file: one approved line per row, in
// order, each with its own payment request; it returns their ids.
func checkBatchResult(t *testing.T, objects *s3store.Store, key string, rows int) []string {
	body, err := objects.GetRange(context.Background(), key, 0, "")
	if err != nil {
		t.Fatalf("result %s: %v", key, err)
	}
	defer body.Close()
	r := csv.NewReader(body)
	r.Comma, r.FieldsPerRecord = ';', -1
	var ids []string
	seen := map[string]bool{}
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			if line-1 != rows {
				t.Errorf("%s: %d lines, want %d", key, line-1, rows)
			}
			return ids
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if len(rec) < 3 || rec[0] != strconv.Itoa(line) || rec[1] != "approved" || rec[2] == "" || seen[rec[2]] {
			t.Errorf("%s line %d: %q", key, line, rec)
			return ids
		}
		seen[rec[2]] = true
		ids = append(ids, rec[2])
	}
}
