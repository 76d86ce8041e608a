package batchproc_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/batch"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/sftpd"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/batchwire"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is the shared local stack seen from a test: a store over every
// table, the batch bucket, and an AWS config (optionally call-counting).
type fixture struct {
	stack *devstack.Stack
	cfg   aws.Config
	// store is the code under test's (the service's client); testStore is
	// the one a test seeds and checks through (testenv.PatientStore): a
	// stalled emulator may fail the service's calls, not the test's own.
	store, testStore *dynamo.Store
	tables           dynamo.Tables
	objects          *s3store.Store
	bucket           string
	sqs              *sqs.Client
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	s := testenv.Stack(t)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fixtureWith(t, s, cfg)
}

func fixtureWith(t testing.TB, s *devstack.Stack, cfg aws.Config) *fixture {
	t.Helper()
	tables := s.Tables()
	bucket := s.Resources.Buckets["BatchBucket"]
	if bucket == "" {
		t.Fatal("the template has no BatchBucket")
	}
	return &fixture{stack: s, cfg: cfg, store: dynamo.New(dynamodb.NewFromConfig(cfg), tables),
		testStore: testenv.PatientStore(t, s), tables: tables,
		objects: s3store.New(s3store.NewClient(cfg), bucket), bucket: bucket, sqs: sqs.NewFromConfig(cfg)}
}

// countingPay wraps the payment service and counts the payments made
// (each one reached the provider: the test merchants have no limits), per
// payment request: every call that returned one, and once a request whose
// call failed yet which has a transaction now — an answer lost after the
// work was done (a timeout, a cancelled run), which a replay answers from
// the stored payment without a second call.
type countingPay struct {
	svc    batchproc.PaymentService
	store  txLister // *dynamo.Store, or memstore in the fast tests
	mu     sync.Mutex
	per    map[int64]int  // calls that returned a payment
	failed map[int64]bool // calls that returned an error
}

type txLister interface {
	TransactionsOfRequest(ctx context.Context, requestID int64) ([]*payment.Transaction, error)
}

func (c *countingPay) note(id int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.per == nil {
		c.per, c.failed = map[int64]int{}, map[int64]bool{}
	}
	if err == nil {
		c.per[id]++
	} else {
		c.failed[id] = true
	}
}

func (c *countingPay) Pay(ctx context.Context, m *merchant.Merchant, id int64, a paycore.Attempt) (paycore.Result, error) {
	res, err := c.svc.Pay(ctx, m, id, a)
	c.note(id, err)
	return res, err
}

func (c *countingPay) PayNew(ctx context.Context, m *merchant.Merchant, r payment.Request, a paycore.Attempt) (paycore.Result, error) {
	res, err := c.svc.PayNew(ctx, m, r, a)
	c.note(r.ID, err)
	return res, err
}

// total is the number of payments made, and the requests paid by more than
// one call.
func (c *countingPay) total() (charges int, twice []int64) {
	paid, twice := c.paid()
	for _, n := range paid {
		charges += n
	}
	return charges, twice
}

// paid is the number of payments per request, and the requests paid by
// more than one call. A request whose calls all failed counts once if it
// has a transaction: whichever call made it (this counter's, as a lost
// answer, or another counter's) — so counters of processors sharing rows
// are joined with merge, not added.
func (c *countingPay) paid() (map[int64]int, []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	paid := map[int64]int{}
	var twice []int64
	for id, n := range c.per {
		paid[id] = n
		if n > 1 {
			twice = append(twice, id)
		}
	}
	for id := range c.failed {
		if c.per[id] > 0 {
			continue
		}
		// A read that fails counts the request: a test expecting exact
		// numbers then fails rather than passing on a guess.
		if txs, err := c.store.TransactionsOfRequest(context.Background(), id); err != nil || len(txs) > 0 {
			paid[id] = 1
		}
	}
	return paid, twice
}

// merge joins counters: per request, the successful calls of all, or one
// payment if only failed calls (a lost answer) made it.
func merge(cs ...*countingPay) (charges int, twice []int64) {
	calls := map[int64]int{}
	for _, c := range cs {
		paid, _ := c.paid()
		c.mu.Lock()
		for id := range paid {
			calls[id] += c.per[id]
		}
		c.mu.Unlock()
	}
	for id, n := range calls {
		charges += max(n, 1)
		if n > 1 {
			twice = append(twice, id)
		}
	}
	return charges, twice
}

func (f *fixture) functionEnv(t testing.TB, id string) func(string) string {
	t.Helper()
	env, err := f.stack.Resources.Env(id)
	if err != nil {
		t.Fatal(err)
	}
	env["PAYREQ_LOCAL"] = "1"
	return func(k string) string { return env[k] }
}

// newQueue creates a queue of the test's own, so continuations are
// consumed by the test's processor and not by the stack's poller.
func (f *fixture) newQueue(t testing.TB) string {
	t.Helper()
	name := "batch-test-" + randomHex(6)
	out, err := f.sqs.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// processor builds a batch processor with the service's own wiring of the
// payment service, wrapped to count charges, on a queue of the test's own.
func (f *fixture) processor(t testing.TB, tune func(*batchproc.Config), deps ...func(*batchproc.Deps)) (*batchproc.Processor, *countingPay, string) {
	t.Helper()
	svc, err := batchwire.PaymentService(context.Background(), f.functionEnv(t, "BatchFunction"), wire.Options{AWSConfig: &f.cfg})
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingPay{svc: svc, store: f.testStore}
	queueURL := f.newQueue(t)
	cfg := batchproc.Config{Bucket: f.bucket, ContinueQueueURL: queueURL}
	if tune != nil {
		tune(&cfg)
	}
	d := batchproc.Deps{
		Store: f.store, Objects: f.objects, Queue: queue.New(f.sqs), Currencies: currency.Decimals, FingerprintKey: testFingerprintKey,
		Charger: &batchproc.PaymentsCharger{Service: counting, Store: f.store},
	}
	for _, set := range deps {
		set(&d)
	}
	p, err := batchproc.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return p, counting, queueURL
}

// upload stores content as merchantID's upload name, as the SFTP server
// does, and returns the S3 event S3 would send.
func (f *fixture) upload(t testing.TB, merchantID, name string, content []byte) events.S3Event {
	t.Helper()
	t.Cleanup(func() { f.forgetOpenJobs(t, merchantID) })
	key := batchproc.IncomingPrefix + merchantID + "/" + name
	etag, err := f.objects.PutBytes(context.Background(), key, content)
	if err != nil {
		t.Fatal(err)
	}
	return devstack.UploadNotification(sftpd.UploadEvent{Bucket: f.bucket, Key: key, Size: int64(len(content)), ETag: etag, MerchantID: merchantID})
}

// forgetOpenJobs removes the open markers of merchantID's jobs once its
// test has ended. RecoverStuck resumes every open job of the shared table,
// whoever created it, and the tests call it with clocks minutes ahead: a
// job a failed test left behind (under load, an emulator call can exhaust
// the SDK's attempts) was resumed by the next test's processor and counted
// as its charges ("30 charges (want 24)"), turning one failure into several.
func (f *fixture) forgetOpenJobs(t testing.TB, merchantID string) {
	ctx := context.Background()
	open, err := f.testStore.OpenBatchJobs(ctx)
	if err != nil {
		t.Logf("open batch jobs of %s not forgotten: %v", merchantID, err)
		return
	}
	for _, o := range open {
		if o.MerchantID == merchantID {
			if err := f.testStore.CloseBatchJob(ctx, o.MerchantID, o.JobID); err != nil {
				t.Logf("open batch job %s not forgotten: %v", o.JobID, err)
			}
		}
	}
}

// drain feeds the queue's messages to the processor until the queue stays
// empty, like the event source mapping; it returns how many were consumed.
// An empty queue is the end of the job's chain: every invocation queues its
// continuation before it returns, so the next one is visible to the very
// next receive (no delay, whatever the load). A continuation queued with a
// delay (a rate-limited row's pause; a busy invocation's check, delayed
// until the holder's lease ends) is not: while the queue holds a delayed
// message, drain stops only after two empty one-second waits, so a pause of
// about a second is waited for, and tests drain a check after the job has
// finished. With nothing visible and nothing delayed, nothing can come (the
// queue is the test's own, and its only sender has returned): drain stops
// at once instead of waiting out two empty receives.
func (f *fixture) drain(t testing.TB, p *batchproc.Processor, queueURL string) int {
	t.Helper()
	ctx := context.Background()
	n, empty, receiveErrors := 0, 0, 0
	// patient: the queue holds a delayed message (or a short poll missed
	// one), so emptiness is two empty one-second receives, as it always
	// was; otherwise a short poll and the queue's counts tell.
	patient := false
	for empty < 2 {
		wait := int32(0)
		if patient {
			wait = 1
		}
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 1, WaitTimeSeconds: wait})
		if err != nil {
			// A receive timing out on a loaded emulator is polled again,
			// as Lambda's poller does; it is not an empty queue.
			if receiveErrors++; receiveErrors == 5 {
				t.Fatal(err)
			}
			t.Logf("receive failed; polling again: %v", err)
			continue
		}
		if len(out.Messages) == 0 {
			if patient {
				empty++
				continue
			}
			visible, delayed, err := f.queueCounts(ctx, queueURL)
			if err != nil {
				if receiveErrors++; receiveErrors == 5 {
					t.Fatal(err)
				}
				t.Logf("queue attributes failed; polling again: %v", err)
				continue
			}
			if visible == 0 && delayed == 0 {
				break
			}
			patient = true
			continue
		}
		empty, patient = 0, false
		m := out.Messages[0]
		// A failed continuation (a store call timing out on a loaded
		// emulator) is what SQS redelivers: it is invoked again.
		for attempt := 1; ; attempt++ {
			ictx, cancel := context.WithTimeout(ctx, 60*time.Second)
			resp, err := p.HandleSQS(ictx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId),
				Body: aws.ToString(m.Body), EventSource: "aws:sqs"}}})
			cancel()
			if err == nil && len(resp.BatchItemFailures) == 0 {
				break
			}
			if attempt == 3 {
				t.Fatalf("continuation failed %d times: %v %+v", attempt, err, resp)
			}
			t.Logf("continuation failed; SQS delivers it again: %v %+v", err, resp)
		}
		if _, err := f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		n++
		if n > 2000 {
			t.Fatal("continuations never end")
		}
	}
	return n
}

// queueCounts is the queue's visible and delayed messages (not those
// received and not yet deleted).
func (f *fixture) queueCounts(ctx context.Context, queueURL string) (visible, delayed int, err error) {
	out, err := f.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, 0, err
	}
	count := func(name sqstypes.QueueAttributeName) int {
		n, _ := strconv.Atoi(out.Attributes[string(name)])
		return n
	}
	return count(sqstypes.QueueAttributeNameApproximateNumberOfMessages), count(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed), nil
}

func (f *fixture) result(t testing.TB, merchantID, name string) string {
	t.Helper()
	rc, err := f.objects.Get(context.Background(), batchproc.ResultKey(merchantID, name))
	if err != nil {
		t.Fatalf("result of %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) jobs(t testing.TB, merchantID, name string) []*batch.Job {
	t.Helper()
	jobs, err := f.testStore.BatchJobs(context.Background(), merchantID, name)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// ---- batch file content -----------------------------------------------------

// line is one row of the spec format.
func line(holder, number, expiry, cvc, amount, unit, ref string) string {
	fields := []string{holder, number, expiry, cvc, "payer@example.com", "4155550100", "1 Main St", "Springfield", "IL",
		"62701", "US", amount, unit}
	if ref != "" {
		fields = append(fields, ref)
	}
	return strings.Join(fields, ";")
}

// mixedFile is a spreadsheet-style file (BOM, CRLF) with every kind of line,
// and the result each line must get: status, transactionStatusId, code and
// the start of the message ("" = empty).
type expect struct {
	status, tsID, code, msg string
}

func mixedFile(tag string) (string, []expect) {
	lines := []struct {
		text string
		want expect
	}{
		{line("Jane Doe", "4111 1111 1111 1111", "12/30", "123", "10.50", "USD", "A-"+tag), expect{"approved", "1", "", ""}},
		{line("Max Mustermann", "4000 0000 0000 0002", "03/29", "321", "99.90", "EUR", "B-"+tag), expect{"declined", "2", "999", "Declined, contact the card issuer"}},
		{line("Three D", "4000 0000 0000 3220", "03/29", "321", "5.00", "EUR", "C-"+tag), expect{"declined", "2", "004", "3-D Secure system decline"}},
		{line("Three D Fail", "4000 0084 0000 1629", "03/29", "321", "5.00", "EUR", "D-"+tag), expect{"declined", "2", "004", "3-D Secure system decline"}},
		{line("Bad Row", "4111 1111 1111 1112", "13/30", "12", "10,50", "USD", "E-"+tag), expect{"rejected", "", "040", "number: number is not a valid card number, expiry: expiry must be MM/YY"}},
		{"too;few;fields", expect{"rejected", "", "", `row: expected 13 or 14 fields separated by ";"`}},
		{line("Proc Error", "4000-0000-0000-0119", "03/29", "321", "1", "USD", "G-"+tag), expect{"declined", "2", "001", "Bank system error"}},
		{line("Expired", "4111111111111111", "01/20", "123", "1", "USD", "H-"+tag), expect{"rejected", "", "041", "expiry:"}},
		{"", expect{"rejected", "", "", "row: empty line"}},
		{line("Ann Lee", "3782 822463 10005", "06/29", "1234", "1250", "JPY", ""), expect{"approved", "1", "", ""}},
		{line("=cmd|' /C calc'!A0", "4111111111111111", "12/30", "123", "2", "USD", "@SUM-"+tag), expect{"approved", "1", "", ""}},
		{line("Crypto", "5555 5555 5555 4444", "12/30", "123", "0.00012345", "BTC", "J-"+tag), expect{"approved", "1", "", ""}},
	}
	var b strings.Builder
	b.WriteString("\xEF\xBB\xBF")
	var want []expect
	for _, l := range lines {
		b.WriteString(l.text + "\r\n")
		want = append(want, l.want)
	}
	b.WriteString("\r\n") // the tolerated trailing empty line
	return b.String(), want
}

// resultLine is one parsed line of a result file.
type resultLine struct {
	row                                     int
	status, prID, txID, tsID, code, message string
}

func parseResult(t testing.TB, s string) []resultLine {
	t.Helper()
	var out []resultLine
	for i, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if s == "" {
			break
		}
		// CSV with ';' as separator: a value holding ';' or '"' is quoted.
		r := csv.NewReader(strings.NewReader(l))
		r.Comma, r.FieldsPerRecord = ';', 7
		f, err := r.Read()
		if err != nil {
			t.Fatalf("result line %d: %v: %q", i+1, err, l)
		}
		row, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("result line %d: row %q", i+1, f[0])
		}
		out = append(out, resultLine{row, f[1], f[2], f[3], f[4], f[5], f[6]})
	}
	return out
}

// checkMixed checks a result against mixedFile's expectations.
func checkMixed(t testing.TB, got []resultLine, want []expect) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d result lines, want %d: %+v", len(got), len(want), got)
	}
	seen := map[string]bool{}
	closed := 0
	for i, g := range got {
		w := want[i]
		if w.status != "rejected" && g.row == i+1 && g.status == "declined" && g.tsID == "2" && g.code == "001" &&
			g.code != w.code && g.prID != "" && g.txID != "" && !seen[g.prID] {
			// The acquirer call failed (on a loaded machine, the sandbox's
			// ledger write timed out) and the lookup closed the reference:
			// nothing was charged, and the row says so with 001, as it
			// must. Legitimate, but rare: a run where it is common is a
			// fault, not load.
			closed++
			t.Logf("line %d: declined 001 (the acquirer call failed; its reference closed, nothing charged) instead of %+v", i+1, w)
			seen[g.prID] = true
			continue
		}
		if g.row != i+1 || g.status != w.status || g.tsID != w.tsID || g.code != w.code || !strings.HasPrefix(g.message, w.msg) {
			t.Errorf("line %d: got %+v, want %+v", i+1, g, w)
		}
		if (w.msg == "") != (g.message == "") {
			t.Errorf("line %d: message %q, want %q", i+1, g.message, w.msg)
		}
		if w.status == "rejected" {
			if g.prID != "" || g.txID != "" {
				t.Errorf("line %d: rejected line with ids %+v", i+1, g)
			}
			continue
		}
		if g.prID == "" || g.txID == "" || seen[g.prID] {
			t.Errorf("line %d: ids %+v (duplicate payment request: %v)", i+1, g, seen[g.prID])
		}
		seen[g.prID] = true
	}
	if closed > max(1, len(want)/10) {
		t.Errorf("%d of %d lines declined 001 because their acquirer call failed", closed, len(want))
	}
}

func validRows(want []expect) int {
	n := 0
	for _, w := range want {
		if w.status != "rejected" {
			n++
		}
	}
	return n
}

// ---- merchants with SFTP logins ----------------------------------------------

type sftpMerchant struct {
	testenv.Merchant
	user, password, keyPath string
}

func newSFTPMerchant(t testing.TB, f *fixture) sftpMerchant {
	t.Helper()
	m := testenv.NewMerchant(t)
	sm := sftpMerchant{Merchant: m, user: dynamo.SFTPUsername(m.ID), password: "pw-" + randomHex(12)}
	hash, err := sftpauth.HashPassword(sm.password)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.testStore.SetSFTPPassword(ctx, m.ID, sm.user, hash, time.Now()); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "batch-test")
	if err != nil {
		t.Fatal(err)
	}
	sm.keyPath = filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(sm.keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, _ := ssh.NewPublicKey(pub)
	if err := f.testStore.AddSFTPKey(ctx, m.ID, sm.user, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))+" batch-test", time.Now()); err != nil {
		t.Fatal(err)
	}
	return sm
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- the OpenSSH sftp client, interactively ----------------------------------

// sftpSession is one OpenSSH sftp session driven command by command through
// its standard input (batch mode from "-"), so a test can upload, wait for
// the result and download it without disconnecting.
type sftpSession struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *strings.Builder
	seq    int
}

func openSFTP(t testing.TB, addr, user, password, keyPath string) *sftpSession {
	t.Helper()
	sftpBin, err := exec.LookPath("sftp")
	if err != nil {
		t.Fatal("sftp not found: these tests need the real OpenSSH client (apt-get install openssh-client)")
	}
	host, port, _ := strings.Cut(addr, ":")
	// BatchMode=no must come before -b, which would otherwise set it (and
	// forbid typing the password): ssh keeps the first value of an option.
	args := []string{"-o", "BatchMode=no", "-b", "-", "-P", port, "-F", "/dev/null",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"}
	name := sftpBin
	if password != "" {
		sshpass, err := exec.LookPath("sshpass")
		if err != nil {
			t.Fatal("sshpass not found (apt-get install sshpass)")
		}
		name = sshpass
		args = append([]string{"-p", password, sftpBin}, append(args, "-o", "PubkeyAuthentication=no",
			"-o", "PreferredAuthentications=password", "-o", "NumberOfPasswordPrompts=1")...)
	} else {
		args = append(args, "-o", "IdentitiesOnly=yes", "-i", keyPath, "-o", "PreferredAuthentications=publickey")
	}
	args = append(args, user+"@"+host)
	s := &sftpSession{t: t, cmd: exec.Command(name, args...), lines: make(chan string, 1024), stderr: &strings.Builder{}}
	s.cmd.Stderr = &lockedWriter{w: s.stderr}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() { s.close() })
	return s
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run sends one command and returns its output lines. A marker command
// (lpwd, whose output is local) ends the output; a failing command ends the
// session (batch mode), which fails the test.
func (s *sftpSession) run(command string) []string {
	s.t.Helper()
	s.seq++
	if _, err := fmt.Fprintf(s.stdin, "%s\nlpwd\n", command); err != nil {
		s.t.Fatalf("sftp %q: %v (stderr: %s)", command, err, s.stderr.String())
	}
	var out []string
	started := false
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("sftp session ended during %q; stderr:\n%s\noutput: %q", command, s.stderr.String(), out)
			}
			switch {
			case l == "sftp> "+command:
				started = true
			case l == "sftp> lpwd":
			case strings.HasPrefix(l, "Local working directory:"):
				if started {
					return out
				}
			case started:
				out = append(out, l)
			}
		case <-timeout:
			s.t.Fatalf("sftp %q: no answer", command)
		}
	}
}

// waitFor lists dir until name appears (the same session all along). The
// listing is "-ls": in batch mode a failing command ends the session, and
// a listing that fails once (the emulator's S3 timing out under load:
// `remote readdir("/results/"): Failure`) is only polled again.
func (s *sftpSession) waitFor(dir, name string, within time.Duration) time.Duration {
	s.t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		for _, l := range s.run("-ls -1 " + dir) {
			if strings.TrimSpace(l) == name || strings.HasSuffix(strings.TrimSpace(l), "/"+name) {
				return time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("%s/%s did not appear within %s", dir, name, within)
	return 0
}

func (s *sftpSession) close() {
	if s.stdin != nil {
		fmt.Fprintln(s.stdin, "bye")
		s.stdin.Close()
		s.stdin = nil
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// testFingerprintKey keys the fingerprints of rows without a reference.
var testFingerprintKey = batchproc.FingerprintKeyFrom("batch-test-seal-key-0123456789abcdef")
