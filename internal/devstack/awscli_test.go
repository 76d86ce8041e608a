package devstack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testing/needs"
)

// awsCLIBlocks reads the shell blocks of docs/operations.md marked
// <!-- awscli: NAME -->, by name.
func awsCLIBlocks(t *testing.T) map[string]string {
	t.Helper()
	infra, err := InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(infra, "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	re := regexp.MustCompile("(?s)<!-- awscli: (\\w+) -->\n```sh\n(.*?)```")
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks[m[1]] = m[2]
	}
	for _, name := range []string{"setup", "tables", "queues", "bucket"} {
		if blocks[name] == "" {
			t.Fatalf("docs/operations.md has no <!-- awscli: %s --> sh block", name)
		}
	}
	return blocks
}

// awsCLIs are the AWS CLIs on this machine: `aws` on PATH and Debian's
// /usr/bin/aws when it is another one. None is an error: .ci/run installs
// Debian's awscli.
func awsCLIs(t *testing.T) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, c := range []string{"aws", "/usr/bin/aws"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if strings.Contains(p, "/.pyenv/shims/") {
			// pyenv's shim costs a second per call on a loaded machine;
			// the CLI it stands for is the same program.
			if real, err := exec.Command("pyenv", "which", "aws").Output(); err == nil {
				p = strings.TrimSpace(string(real))
			}
		}
		if r, err := filepath.EvalSymlinks(p); err == nil && !seen[r] {
			seen[r] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no AWS CLI: apt-get install awscli (.ci/run does)")
	}
	return out
}

// TestOperatorAWSCLI runs docs/operations.md's AWS CLI blocks, as written,
// with every AWS CLI on the machine against a local stack: tables and bucket
// work with every CLI; queues on fauxqs exactly when the CLI's SQS client
// speaks JSON, as the page says.
func TestOperatorAWSCLI(t *testing.T) {
	needs.External(t, "the emulators and the AWS CLI")
	blocks := awsCLIBlocks(t)
	clis := awsCLIs(t)
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_REGION"} {
		t.Setenv(k, "") // restored after the test; Start sets the emulators'
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, Options{StateDir: filepath.Join(dir, ".paydev")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One object for the bucket block to list and print.
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const content = "payreq-ops-check\n"
	if _, err := s3.NewFromConfig(cfg, s3store.S3Options).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Info.Buckets["BatchBucket"]),
		Key: aws.String("results/ops-check.txt"), Body: strings.NewReader(content)}); err != nil {
		t.Fatal(err)
	}
	for _, cli := range clis {
		v, err := exec.CommandContext(ctx, cli, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v %s", cli, err, v)
		}
		version := strings.TrimSpace(string(v))
		t.Run(strings.Fields(version)[0], func(t *testing.T) {
			// The CLI under test is `aws` in the blocks: first on PATH.
			bin := t.TempDir()
			if err := os.Symlink(cli, filepath.Join(bin, "aws")); err != nil {
				t.Fatal(err)
			}
			path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
			probe := runCLI(ctx, dir, path, blocks["setup"]+`aws --endpoint-url "$SQS" sqs list-queues --debug`)
			json := strings.Contains(probe.out, "X-Amz-Target': b'AmazonSQS.ListQueues'")
			t.Logf("%s: SQS over JSON %v", version, json)
			// The three blocks at once: each CLI call is a Python start-up.
			runs := map[string]cliRun{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, name := range []string{"tables", "bucket", "queues"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := runCLI(ctx, dir, path, blocks["setup"]+blocks[name])
					mu.Lock()
					runs[name] = r
					mu.Unlock()
				}()
			}
			wg.Wait()
			for _, name := range []string{"tables", "bucket", "queues"} {
				t.Logf("%s block: %s", name, runs[name].took.Round(time.Millisecond))
			}
			tables := runs["tables"]
			for _, want := range []string{s.Info.Tables["PaymentRequestsTable"], s.Info.Merchant.ID, "merchantId", `"Items"`} {
				if tables.err != nil || !strings.Contains(tables.out, want) {
					t.Errorf("tables block (%v) lacks %q:\n%s", tables.err, want, tables.out)
				}
			}
			bucket := runs["bucket"]
			for _, want := range []string{s.Info.Buckets["BatchBucket"], "results/ops-check.txt", content} {
				if bucket.err != nil || !strings.Contains(bucket.out, want) {
					t.Errorf("bucket block (%v) lacks %q:\n%s", bucket.err, want, bucket.out)
				}
			}
			queues := runs["queues"]
			if !json {
				// The documented departure: fauxqs serves only JSON.
				if queues.err == nil || !strings.Contains(queues.out, "Unknown action: ListQueues") {
					t.Errorf("queues block with a query-protocol CLI on fauxqs: %v, want the documented failure:\n%s", queues.err, queues.out)
				}
				t.Logf("queues block fails as documented: %s", strings.TrimSpace(queues.out))
				return
			}
			for _, want := range []string{s.Info.Queues["NotificationsDLQ"], "ApproximateNumberOfMessages"} {
				if queues.err != nil || !strings.Contains(queues.out, want) {
					t.Errorf("queues block (%v) lacks %q:\n%s", queues.err, want, queues.out)
				}
			}
		})
	}
}

type cliRun struct {
	out  string
	err  error
	took time.Duration
}

// runCLI runs script with bash -euo pipefail in dir (where .paydev is),
// with PATH path; out is stdout and stderr together.
func runCLI(ctx context.Context, dir, path, script string) cliRun {
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	return cliRun{out: string(out), err: err, took: time.Since(start)}
}
