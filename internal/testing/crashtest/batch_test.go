package crashtest

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/crashpoint"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testing/needs"
)

// batchParams shorten what a dead batch invocation leaves locked: its job
// lease is the function's timeout (5 min deployed) and a claimed line's
// lease 2 min; the schedule that recovers stuck jobs runs every 2 s here.
var batchParams = []string{"-schedule-every", "2s", "-param", "BatchTimeout=20", "-param", "BatchTimeReserve=3s",
	"-param", "BatchRowLease=3s", "-param", "BatchPartSize=300"} // a part every few lines

// A batch file whose processing dies at each batch phase: after a restart
// the schedule resumes the job; every line is charged exactly once, the
// result file has one line per input line, and no card data is left in S3.
func TestCrashDuringBatchFile(t *testing.T) {
	needs.External(t, "paydev with crash points on the emulators")
	t.Parallel() // mostly waits for the dead invocation's lease: side by side with the other waits
	var last *proc
	t.Run("points", func(t *testing.T) { crashBatchAtEveryPoint(t, &last) })
	if last != nil && !t.Failed() {
		auditClean(t, last) // every job has ended by now
	}
}

func crashBatchAtEveryPoint(t *testing.T, last **proc) {
	var mu sync.Mutex
	// Every point at once, not -parallel's two at a time (GOMAXPROCS on
	// the 2-core machine): each spends most of its time waiting out the
	// dead invocation's lease, which four wait as well as one.
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, point := range []string{
		crashpoint.BatchAfterSnapshot, crashpoint.BatchAfterRowCharge + "@6", crashpoint.BatchAfterPart, crashpoint.BatchBeforeDone,
	} {
		wg.Add(1)
		go func() { defer wg.Done(); t.Run(point, func(t *testing.T) { crashBatchAt(t, point, &mu, last) }) }()
	}
}

// crashBatchAt kills the stack at point while it charges a file, restarts
// it and checks the result file, the charges and the clean-up.
func crashBatchAt(t *testing.T, point string, mu *sync.Mutex, last **proc) {
	dir := t.TempDir()
	port, _ := devstack.FreePort()
	sftpPort, _ := devstack.FreePort()
	p := startStackOn(t, dir, point, port, sftpPort, batchParams...)
	const rows = 12
	file := "crash-" + strings.NewReplacer("@", "-").Replace(point) + ".csv"
	var b strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "Ann Lee;4111111111111111;12/30;123;ann@example.com;4915112345678;1 Main St;Berlin;BE;10115;DE;1.%02d;EUR;%s-%d\n",
			i, file, i)
	}
	upload(t, p, file, b.String())
	p.died()

	p = startStackOn(t, dir, "", port, sftpPort, batchParams...)
	lines := waitResult(t, p, file, 5*time.Minute)
	if len(lines) != rows {
		t.Fatalf("result file has %d lines for %d input lines", len(lines), rows)
	}
	for i, l := range lines {
		// A charge the death cut off before it reached the acquirer
		// is closed there on the replay's lookup and reported
		// declined 001, with no money moved (a loaded run cut one
		// off); every other line is approved, and paid once.
		cutOff := len(l) > 5 && l[1] == "declined" && l[5] == "001"
		if l[0] != strconv.Itoa(i+1) || l[1] != "approved" && !cutOff {
			t.Fatalf("line %d: %v, want row %d approved", i+1, l, i+1)
		}
		id, err := strconv.ParseInt(l[2], 10, 64)
		if err != nil {
			t.Fatalf("line %d has no payment request id: %v", i+1, l)
		}
		if cutOff {
			t.Logf("line %d: its charge was cut off before the acquirer: %v", i+1, l)
			checkNotPaid(t, p, id)
			continue
		}
		checkPaidOnceNoAudit(t, p, id)
	}
	mu.Lock()
	*last = p
	mu.Unlock()
	// The job ends right after its result file: its card-bearing
	// files (upload, snapshot, parts) go with it.
	deadline := time.Now().Add(4 * time.Minute) // a job cut off before it closed is closed by recovery: lease (20 s + 15 s margin here) + schedule, slower under load
	for {
		keys := objects(t, p, batchproc.WorkPrefix+p.info.Merchant.ID+"/", "incoming/"+p.info.Merchant.ID+"/")
		if len(keys) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("card-bearing files left in S3 4 minutes after the result file: %v", keys)
		}
		time.Sleep(time.Second)
	}
}

func upload(t *testing.T, p *proc, name, content string) {
	t.Helper()
	conn, err := ssh.Dial("tcp", p.info.SFTPAddr, &ssh.ClientConfig{User: p.info.Merchant.SFTPUser,
		Auth: []ssh.AuthMethod{ssh.Password(p.info.Merchant.SFTPPassword)}, HostKeyCallback: ssh.InsecureIgnoreHostKey(),
		Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.Create("/incoming/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close() // the stack may die while it processes the upload
}

func s3Client(t *testing.T) *s3.Client {
	t.Helper()
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle, o.DisableLogOutputChecksumValidationSkipped = true, true })
}

func waitResult(t *testing.T, p *proc, file string, within time.Duration) [][]string {
	t.Helper()
	c := s3Client(t)
	bucket := p.info.Buckets["BatchBucket"]
	key := batchproc.ResultKey(p.info.Merchant.ID, file)
	deadline := time.Now().Add(within)
	for {
		out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err == nil {
			body, _ := io.ReadAll(out.Body)
			out.Body.Close()
			r := csv.NewReader(bytes.NewReader(body))
			r.Comma, r.FieldsPerRecord = ';', -1
			lines, err := r.ReadAll()
			if err != nil {
				t.Fatalf("result file: %v\n%s", err, body)
			}
			if len(lines) > 0 && lines[0][0] == "row" {
				lines = lines[1:] // a header, if any
			}
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result file %s after %s\n%s", key, within, p.logs)
		}
		time.Sleep(time.Second)
	}
}

func objects(t *testing.T, p *proc, prefixes ...string) []string {
	t.Helper()
	c := s3Client(t)
	bucket := p.info.Buckets["BatchBucket"]
	var keys []string
	for _, prefix := range prefixes {
		out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}
