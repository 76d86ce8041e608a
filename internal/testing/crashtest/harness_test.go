// Package crashtest kills the local stack at each named crash point of the
// money paths (internal/crashpoint), restarts it, retries as the docs tell
// merchants to, and checks that nothing was charged twice, nothing was lost
// and every invariant holds. The stack runs as a separate process, built
// with the crashtest tag (the only build in which a crash point can fire),
// against emulators that outlive it, as DynamoDB outlives a Lambda sandbox.
package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

var (
	paydevBin string
	emu       *devstack.Emulators
	faults    *devstack.FaultProxy // in front of emu's DynamoDB
	stateRoot string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // every test skips (needs.External): no build, no emulators
	}
	var err error
	if stateRoot, err = os.MkdirTemp("", "payreq-crash-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(stateRoot)
	paydevBin = filepath.Join(stateRoot, "paydev")
	build := exec.Command("go", "build", "-tags", "crashtest", "-o", paydevBin, "github.com/payreq/payreq/cmd/paydev")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build paydev with crash points:", err)
		return 1
	}
	infra, err := devstack.InfraDir()
	if err == nil {
		err = devstack.EnsureNodeModules(infra, io.Discard)
	}
	if err == nil {
		// Room for the first start after npm ci, which also builds
		// DynamoDB Local's launcher (devstack), on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		emu, err = devstack.StartEmulators(ctx, infra, filepath.Join(stateRoot, "logs"), 0, 0)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "start emulators:", err)
		return 1
	}
	defer emu.Stop()
	// Every stack reaches DynamoDB through the fault proxy: make chaos loses
	// answers and answers transaction conflicts while it kills.
	if faults, err = devstack.StartFaultProxy(emu.DynamoDB); err != nil {
		fmt.Fprintln(os.Stderr, "start the fault proxy:", err)
		return 1
	}
	defer faults.Close()
	devstack.UseEndpoints(devstack.Endpoints{DynamoDB: faults.URL, SQS: emu.SQS, S3: emu.S3})
	return m.Run()
}

// proc is one run of the local stack.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	info   devstack.Info
	exited chan error
	logs   *bytes.Buffer
	// out: the tail of the functions' own logs (stdout, as on Lambda),
	// shown when the stack never reached its crash point.
	out      *tailWriter
	stateDir string
	// production: started with -stage production (Stripe, no sandbox
	// ledger for the audit to check).
	production bool
}

// startStack runs the stack on stateDir (kept across restarts: same seal
// key, same merchant) and dies at crashAt ("" = never).
func startStack(t *testing.T, stateDir, crashAt string, extra ...string) *proc {
	t.Helper()
	// A free port can be taken by another process before the stack binds
	// it (tests run side by side): then the stack starts again on new ones.
	for attempt := 1; ; attempt++ {
		port, err := devstack.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		sftpPort, err := devstack.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		p, logs := tryStartStackOn(t, stateDir, crashAt, port, sftpPort, extra...)
		if p != nil {
			return p
		}
		if attempt == 3 || !strings.Contains(logs, "address already in use") {
			t.Fatalf("stack exited during start-up\n%s", logs)
		}
		t.Logf("ports %d/%d were taken before the stack bound them; starting again", port, sftpPort)
	}
}

// startStackOn is startStack on fixed ports (restarts keep the address).
func startStackOn(t *testing.T, stateDir, crashAt string, port, sftpPort int, extra ...string) *proc {
	t.Helper()
	p, logs := tryStartStackOn(t, stateDir, crashAt, port, sftpPort, extra...)
	if p == nil {
		t.Fatalf("stack exited during start-up\n%s", logs)
	}
	return p
}

// tryStartStackOn starts the stack, or returns nil and its logs when it
// exited during start-up.
func tryStartStackOn(t *testing.T, stateDir, crashAt string, port, sftpPort int, extra ...string) (*proc, string) {
	t.Helper()
	_ = os.Remove(filepath.Join(stateDir, "stack.json"))
	cmd := exec.Command(paydevBin, "-port", strconv.Itoa(port), "-sftp-port", strconv.Itoa(sftpPort), "-state-dir", stateDir,
		// Stacks run side by side on the same emulators: each its own
		// tables, queues and buckets, or one stack's poller takes another's
		// continuation messages and charges them where no crash point is set.
		"-stack-name", stackNameOf(stateDir),
		// A key whose request died blocks its retries for one lease: 60 s
		// deployed, 2 s here, so the retries below need not wait a minute.
		"-param", "IdempotencyLease=2s")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), crashpoint.EnvVar+"="+crashAt, "SANDBOX_UPI_DELAY=1s", "SANDBOX_QR_DELAY=1s")
	logs, out := &bytes.Buffer{}, &tailWriter{max: 256 << 10}
	cmd.Stdout, cmd.Stderr = out, &lockedWriter{w: logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, exited: make(chan error, 1), logs: logs, out: out, stateDir: stateDir,
		production: slices.Contains(extra, "production")}
	go func() { p.exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if info, err := devstack.ReadInfo(stateDir); err == nil {
			p.info = info
			break
		}
		select {
		case err := <-p.exited:
			return nil, fmt.Sprintf("%v\n%s", err, logs)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack did not start\n%s", logs)
		}
	}
	t.Cleanup(p.stop)
	return p, ""
}

// stackNameOf names the stack of a state directory: the same across the
// restarts of one test, different between tests.
func stackNameOf(stateDir string) string {
	h := fnv.New32a()
	h.Write([]byte(stateDir))
	return fmt.Sprintf("crash%08x", h.Sum32())
}

// died waits for the crash point to kill the process (SIGKILL).
func (p *proc) died() {
	p.t.Helper()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			p.t.Fatalf("stack ended with %v, want death by SIGKILL at the crash point\n%s", err, p.logs)
		}
		if !strings.Contains(p.logs.String(), "crashpoint: SIGKILL at") {
			p.t.Fatalf("the stack died, but not at a crash point\n%s", p.logs)
		}
		p.exited <- err // stop() sees it ended
	case <-time.After(4 * time.Minute): // a bound against a hang: beside another full test run a batch file took over 90 s to reach its point
		p.t.Fatalf("the crash point was never reached\n%s\nthe functions' logs, last %d KB:\n%s", p.logs, p.out.max>>10, p.out)
	}
}

func (p *proc) stop() {
	select {
	case err := <-p.exited:
		p.exited <- err
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// tailWriter keeps the last max bytes (at least) written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, b...)
	if len(w.b) > 2*w.max {
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
	}
	return len(b), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// response of one HTTP call; err is set when the connection broke (the
// process died under it).
type response struct {
	status int
	body   []byte
	err    error
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not JSON: %s", r.status, r.body)
	}
	return m
}

func (p *proc) call(method, path, idemKey, body string, headers ...string) response {
	req, err := http.NewRequest(method, p.info.APIBase+path, strings.NewReader(body))
	if err != nil {
		return response{err: err}
	}
	req.Header.Set("X-API-Key", p.info.Merchant.APIKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: b, err: err}
}

// store reads the tables directly, as the audit does.
func (p *proc) store(t *testing.T) *dynamo.Store {
	t.Helper()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return dynamo.New(dynamodb.NewFromConfig(cfg), dynamo.Tables{
		Merchants: p.info.Tables["MerchantsTable"], PaymentRequests: p.info.Tables["PaymentRequestsTable"],
		Operations: p.info.Tables["OperationsTable"], Transactions: p.info.Tables["TransactionsTable"]})
}

// checkPaidOnce asserts the invariants of one paid request: it is paid by
// exactly one approved transaction, the sandbox acquirer's ledger has
// exactly one live charge for it (no double charge, no charge without its
// transaction), no attempt is left open, and the approved transaction's
// notification is recorded (outbox entry or delivery).
func checkPaidOnce(t *testing.T, p *proc, requestID int64) {
	t.Helper()
	checkPaidOnceNoAudit(t, p, requestID)
	auditClean(t, p)
}

// checkNotPaid: requestID's attempts all ended and none was approved.
func checkNotPaid(t *testing.T, p *proc, requestID int64) {
	t.Helper()
	txs, err := p.store(t).TransactionsOfRequest(context.Background(), requestID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		if tx.Status == payment.TxApproved || !tx.Status.Final() {
			t.Errorf("request %d reported not charged has transaction %d in status %d", requestID, tx.ID, tx.Status)
		}
	}
}

// checkPaidOnceNoAudit is checkPaidOnce without the audit of the whole
// tables (tests running side by side audit once, when all have ended: one
// test's job waiting out its lease is not another's violation).
func checkPaidOnceNoAudit(t *testing.T, p *proc, requestID int64) {
	t.Helper()
	ctx := context.Background()
	s := p.store(t)
	req, err := s.PaymentRequest(ctx, requestID)
	if err != nil {
		t.Fatal(err)
	}
	txs, err := s.TransactionsOfRequest(ctx, requestID)
	if err != nil {
		t.Fatal(err)
	}
	var approved []*payment.Transaction
	refs := map[string]bool{}
	for _, tx := range txs {
		refs[tx.Reference] = true
		if tx.Status == payment.TxApproved {
			approved = append(approved, tx)
		}
		if !tx.Status.Final() {
			t.Errorf("transaction %d left open in status %d", tx.ID, tx.Status)
		}
	}
	if len(approved) != 1 {
		t.Fatalf("request %d has %d approved transactions, want exactly 1 (%d attempts)", requestID, len(approved), len(txs))
	}
	if req.Status != payment.RequestPaid || req.TransactionID != approved[0].ID {
		t.Fatalf("request %d: status %d, transactionId %d; want paid by %d", requestID, req.Status, req.TransactionID, approved[0].ID)
	}
	entries, err := s.LedgerEntries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	charges := 0
	for _, e := range entries {
		if e.Kind == "charge" && refs[e.Reference] && e.Status == provider.Approved && !e.Voided && !e.Abandoned {
			charges++
		}
	}
	if charges != 1 {
		t.Fatalf("the sandbox acquirer holds %d live charges for request %d, want exactly 1", charges, requestID)
	}
	waitNotified(t, s, requestID, approved[0].ID)
}

// waitNotified waits until the transaction's notification is recorded:
// still in the outbox (the reconciler will send it) or delivered.
func waitNotified(t *testing.T, s *dynamo.Store, requestID, txID int64) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ds, err := s.Deliveries(ctx, requestID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if strings.HasPrefix(d.EventID, fmt.Sprintf("evt_%d_", txID)) {
				return
			}
		}
		for shard := 0; shard < payment.OutboxAllShards; shard++ {
			es, err := s.DueOutbox(ctx, shard, time.Now().Add(24*time.Hour), 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if e.Event.TransactionID == txID {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %d has neither an outbox entry nor a delivery: its notification is lost", txID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// auditClean runs the invariant audit (payctl audit's) over the whole
// tables, judging every record as settled (the clock moved past the grace),
// and fails on any violation.
func auditClean(t *testing.T, p *proc) audit.Report {
	t.Helper()
	rep, err := p.store(t).Audit().Sweep(context.Background(), !p.production, time.Now().Add(audit.DefaultGrace+time.Second),
		audit.DefaultGrace, 4, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("audit: %+v", v)
	}
	return rep
}
