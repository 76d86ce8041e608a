package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

var (
	payctlOnce sync.Once
	payctlBin  string
	payctlErr  error
)

// buildPayctl compiles the command once for the package's tests that run it
// as a process (exit code, stdout and stderr as a shell sees them): a link
// of the 50 MB binary costs seconds of CPU each time.
func buildPayctl(t *testing.T) string {
	t.Helper()
	needs.External(t, "payctl built and run as a process")
	payctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "payctl-test-")
		if err != nil {
			payctlErr = err
			return
		}
		testenv.AfterAll(func() { os.RemoveAll(dir) })
		payctlBin = filepath.Join(dir, "payctl")
		if out, err := exec.Command("go", "build", "-o", payctlBin, ".").CombinedOutput(); err != nil {
			payctlErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if payctlErr != nil {
		t.Fatal(payctlErr)
	}
	return payctlBin
}

type procResult struct {
	code           int
	stdout, stderr string
}

func runProc(t *testing.T, bin string, args ...string) procResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("payctl %v: %v", args, err)
	}
	return procResult{code, stdout.String(), stderr.String()}
}

// runIn runs payctl's run in this process, as main does.
func runIn(t *testing.T, args ...string) procResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return procResult{code, stdout.String(), stderr.String()}
}

// commandPaths lists every command of the tree (cobra's completion and help
// commands included, the hidden completion protocol excluded): a command
// added later is covered without touching this test.
func commandPaths() [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out = append(out, path)
		for _, sub := range c.Commands() {
			if sub.Name() == cobra.ShellCompRequestCmd || sub.Name() == cobra.ShellCompNoDescRequestCmd {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	return out
}

// At every level --help and -h print the command's own help, with a usage
// example, on stdout and exit 0; an unknown flag or argument is refused with
// exit 2, a message naming it on stderr and nothing on stdout. The state
// directory is empty: a command that tried to act would fail with exit 1.
//
// The matrix calls run, which is all of main but its os.Exit (about 250
// commands: one process each took 45 s); TestCompletionAndVersion checks
// the built binary turns run's code into its exit status.
func TestHelpAndUnknownArgumentsAtEveryLevel(t *testing.T) {
	state := t.TempDir()
	paths := commandPaths()
	if len(paths) < 25 {
		t.Fatalf("command tree has only %d commands: %v", len(paths), paths)
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"payctl"}, path...), " ")
		t.Run(name, func(t *testing.T) {
			base := append([]string{"--local", "--state-dir", state}, path...)
			long := runIn(t, append(base, "--help")...)
			if long.code != 0 || long.stderr != "" {
				t.Fatalf("--help: exit %d, stderr %q", long.code, long.stderr)
			}
			if !strings.Contains(long.stdout, "Usage:\n  "+name) || !strings.Contains(long.stdout, "Examples:\n  payctl") {
				t.Fatalf("--help is not %q's own help with an example:\n%s", name, long.stdout)
			}
			short := runIn(t, append(base, "-h")...)
			if short.code != 0 || short.stdout != long.stdout || short.stderr != "" {
				t.Fatalf("-h: exit %d, differs from --help: %q / %q", short.code, short.stdout, short.stderr)
			}
			flag := runIn(t, append(base, "--no-such-flag")...)
			if flag.code != 2 || flag.stdout != "" || !strings.Contains(flag.stderr, "unknown flag: --no-such-flag") {
				t.Fatalf("unknown flag: exit %d, stdout %q, stderr %q", flag.code, flag.stdout, flag.stderr)
			}
			arg := runIn(t, append(base, "no-such-arg")...)
			if arg.code != 2 || arg.stdout != "" || !strings.Contains(arg.stderr, `"no-such-arg"`) {
				t.Fatalf("unknown argument: exit %d, stdout %q, stderr %q", arg.code, arg.stdout, arg.stderr)
			}
			// help for this command names the same help.
			if len(path) > 0 && path[0] != "help" {
				h := runIn(t, append([]string{"help"}, path...)...)
				if h.code != 0 || h.stdout != long.stdout {
					t.Fatalf("payctl help %v: exit %d\n%s", path, h.code, h.stdout)
				}
			}
		})
	}
}

// Shell completion is cobra's: the script is printed and completes commands.
func TestCompletionAndVersion(t *testing.T) {
	bin := buildPayctl(t)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runProc(t, bin, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "payctl") || len(r.stdout) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes", shell, r.code, len(r.stdout))
		}
	}
	r := runProc(t, bin, "__complete", "dl")
	if r.code != 0 || !strings.Contains(r.stdout, "dlq") {
		t.Errorf("completing 'dl': exit %d %q", r.code, r.stdout)
	}
	r = runProc(t, bin, "__complete", "trigger", "")
	for _, ev := range []string{"approved", "declined", "pending", "3ds"} {
		if !strings.Contains(r.stdout, ev) {
			t.Errorf("trigger's events not completed: %q", r.stdout)
		}
	}
	// The process's exit status is run's code, its streams run's.
	if r := runProc(t, bin, "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage:\n  payctl") || r.stderr != "" {
		t.Errorf("payctl --help: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runProc(t, bin, "merchant", "--no-such-flag"); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "unknown flag: --no-such-flag") {
		t.Errorf("payctl merchant --no-such-flag: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runProc(t, bin, "version")
	var v versionInfo
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Module != "github.com/payreq/payreq" || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Fatalf("version: exit %d %q", r.code, r.stdout)
	}
}

// `dlq redrive --dry-run` lists the dead-lettered notification and leaves it
// in the dead-letter queue; so do --help and every refused invocation (they
// used to perform the redrive).
func TestDLQDryRunMovesNothing(t *testing.T) {
	s := testenv.Stack(t)
	bin := buildPayctl(t)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	api := sqs.NewFromConfig(cfg)
	dlq := s.Info.Queues["NotificationsDLQ"]
	ev := payment.NotifyEvent{EventID: "evt_dryrun_" + time.Now().Format("150405.000000"), RequestID: 42, TransactionID: 43,
		TransactionStatusID: payment.TxApproved, OccurredAt: time.Now().UTC(), Attempts: 8}
	body, _ := json.Marshal(ev)
	if _, err := api.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(string(body))}); err != nil {
		t.Fatal(err)
	}
	local := []string{"--local", "--state-dir", testenv.StateDir(t)}

	batchDLQ := s.Info.Queues["BatchNotificationsDLQ"]
	batchEv := ev
	batchEv.EventID += "_batch"
	batchBody, _ := json.Marshal(batchEv)
	if _, err := api.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &batchDLQ, MessageBody: aws.String(string(batchBody))}); err != nil {
		t.Fatal(err)
	}

	type listing struct {
		DryRun    bool       `json:"dryRun"`
		WouldMove int        `json:"wouldMove"`
		Events    []dlqEvent `json:"events"`
	}
	r := runProc(t, bin, append(local, "dlq", "redrive", "--dry-run")...)
	var both map[string]listing
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &both) != nil || !both["interactive"].DryRun || !both["batch"].DryRun {
		t.Fatalf("dry run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	out := both["interactive"]
	if b := both["batch"]; len(b.Events) != 1 || b.Events[0].EventID != batchEv.EventID {
		t.Fatalf("dry run of the batch DLQ: %+v", b)
	}
	// --queue batch moves the batch DLQ's message only.
	r = runProc(t, bin, append(local, "dlq", "redrive", "--queue", "batch")...)
	var moved map[string]map[string]int
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &moved) != nil || moved["batch"]["moved"] != 1 || moved["interactive"] != nil {
		t.Fatalf("redrive --queue batch: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runProc(t, bin, append(local, "dlq", "redrive", "--queue", "nope")...); r.code != 2 {
		t.Fatalf("--queue nope: exit %d", r.code)
	}
	listed := false
	for _, e := range out.Events {
		listed = listed || (e.EventID == ev.EventID && e.RequestID == 42 && e.TransactionID == 43 && e.Attempts == 8)
	}
	if !listed || out.WouldMove != len(out.Events) {
		t.Fatalf("dry run does not list %s: %+v", ev.EventID, out)
	}
	for _, args := range [][]string{
		{"dlq", "redrive", "--help"}, {"dlq", "redrive", "--dry-run", "--help"}, {"dlq", "redrive", "-h"},
		{"dlq", "redrive", "--dry-run=false", "--force"}, {"dlq", "redrive", "now"}, {"dlq", "redrive", "--dry-run", "extra"},
		{"dlq", "--help", "redrive"}, {"help", "dlq", "redrive"},
	} {
		r := runProc(t, bin, append(local, args...)...)
		if r.code != 0 && r.code != 2 || strings.Contains(r.stdout, `"moved"`) {
			t.Fatalf("%v: exit %d %q %q", args, r.code, r.stdout, r.stderr)
		}
	}
	// The message is still in the DLQ, visible at once (the dry run made it
	// visible again): receive it, and delete it so no later test redrives it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &dlq, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got.Messages {
			if strings.Contains(aws.ToString(m.Body), ev.EventID) {
				_, _ = api.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &dlq, ReceiptHandle: m.ReceiptHandle})
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is no longer in the dead-letter queue", ev.EventID)
		}
	}
}

func TestMerchantList(t *testing.T) {
	a, _, code := payctl(t, "merchant", "create", "--name", "List A")
	b, _, code2 := payctl(t, "merchant", "create", "--name", "List B")
	if code != 0 || code2 != 0 {
		t.Fatal("create failed")
	}
	out, stderr, code := payctl(t, "merchant", "list")
	if code != 0 {
		t.Fatalf("list: exit %d %s", code, stderr)
	}
	found := map[string]bool{}
	for _, m := range out["merchants"].([]any) {
		v := m.(map[string]any)
		if v["apiKey"] != nil || v["webhookSecret"] != nil {
			t.Fatalf("list reveals a secret: %v", v)
		}
		found[v["id"].(string)+" "+v["name"].(string)] = true
	}
	if !found[a["id"].(string)+" List A"] || !found[b["id"].(string)+" List B"] {
		t.Fatalf("created merchants not listed: %v", found)
	}
	raw, _ := json.Marshal(out)
	if strings.Contains(string(raw), a["apiKey"].(string)[13:]) {
		t.Fatal("list output contains a key")
	}
	if _, _, code := payctl(t, "merchant", "list", "--id", "x"); code != 2 {
		t.Fatalf("merchant list --id: exit %d, want 2", code)
	}
}
