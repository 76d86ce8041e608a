package sftpd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/testing/needs"
)

// These tests drive the server with the real OpenSSH sftp client, the one
// merchants most often use, in batch mode.

type login struct {
	user     string
	password string // password login through sshpass when set
	keyPath  string // public-key login otherwise
}

type sftpRun struct {
	stdout, stderr string
	err            error
}

func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: these tests need the real client (apt-get install %s)", name, pkg)
	}
	return p
}

// sftp runs one batch script; sftp -b stops at the first failing command and
// exits non-zero.
func (e *env) sftp(l login, script string) sftpRun {
	e.t.Helper()
	sftpBin := requireTool(e.t, "sftp", "openssh-client")
	scriptPath := filepath.Join(e.t.TempDir(), "batch")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		e.t.Fatal(err)
	}
	args := []string{
		"-b", scriptPath, "-P", e.port,
		"-F", "/dev/null", // ignore any user configuration
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
	}
	var name string
	if l.password != "" {
		name = requireTool(e.t, "sshpass", "sshpass")
		// -b implies BatchMode=yes, which would forbid typing the password.
		args = append([]string{"-p", l.password, sftpBin, "-o", "BatchMode=no",
			"-o", "PubkeyAuthentication=no", "-o", "PreferredAuthentications=password",
			"-o", "NumberOfPasswordPrompts=1"}, args...)
	} else {
		name = sftpBin
		args = append(args, "-o", "IdentitiesOnly=yes", "-i", l.keyPath, "-o", "PreferredAuthentications=publickey")
	}
	args = append(args, l.user+"@127.0.0.1")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return sftpRun{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func (e *env) mustSFTP(l login, script string) string {
	e.t.Helper()
	r := e.sftp(l, script)
	if r.err != nil {
		e.t.Fatalf("sftp failed: %v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", r.err, script, r.stdout, r.stderr)
	}
	return r.stdout
}

func (e *env) mustFail(l login, script, wantStderr string) {
	e.t.Helper()
	r := e.sftp(l, script)
	if r.err == nil {
		e.t.Fatalf("sftp succeeded, want failure\nscript:\n%s\nstdout:\n%s", script, r.stdout)
	}
	if !strings.Contains(r.stderr, wantStderr) {
		e.t.Errorf("stderr does not contain %q\nscript:\n%s\nstderr:\n%s", wantStderr, script, r.stderr)
	}
}

func localFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const batchFile = "Jane Doe;4111 1111 1111 1111;12/30;123;jane@example.com;4155550100;1 Main St;Springfield;IL;62701;US;10.50;USD;INV-1\r\n"

var (
	passwordLoginA = login{user: "merchant_a", password: passwordA}
	passwordLoginB = login{user: "merchant_b", password: passwordB}
)

func TestOpenSSHPasswordUploadListDownloadRemove(t *testing.T) {
	needs.External(t, "the OpenSSH sftp client")
	e := newEnv(t, nil)
	e.store.set("results/m_a/old.csv.result.csv", []byte("1;approved;pr_1;tx_1;1;;\n"))
	src := localFile(t, "batch-2024.csv", batchFile)
	dst := filepath.Join(t.TempDir(), "result.csv")

	out := e.mustSFTP(passwordLoginA, strings.Join([]string{
		"ls -1 /",
		"cd /incoming",
		"put " + src,
		"ls -l /incoming",
		"ls -1 /results",
		"get /results/old.csv.result.csv " + dst,
		"rm /results/old.csv.result.csv",
		"ls -1 /results",
	}, "\n"))

	got, ok := e.store.get("incoming/m_a/batch-2024.csv")
	if !ok || string(got) != batchFile {
		t.Fatalf("stored object = %q (present %v), want the uploaded file; keys %v", got, ok, e.store.keys())
	}
	ev := e.upload()
	want := UploadEvent{Bucket: bucket, Key: "incoming/m_a/batch-2024.csv", Size: int64(len(batchFile)), MerchantID: "m_a"}
	if ev.ETag == "" {
		t.Error("upload event without ETag")
	}
	ev.ETag = ""
	if ev != want {
		t.Errorf("upload event = %+v, want %+v", ev, want)
	}
	for _, s := range []string{"incoming", "results", "batch-2024.csv", "old.csv.result.csv"} {
		if !strings.Contains(out, s) {
			t.Errorf("listing output lacks %q:\n%s", s, out)
		}
	}
	if data, _ := os.ReadFile(dst); string(data) != "1;approved;pr_1;tx_1;1;;\n" {
		t.Errorf("downloaded %q", data)
	}
	if _, ok := e.store.get("results/m_a/old.csv.result.csv"); ok {
		t.Error("rm did not delete the result file")
	}
	e.spoolEmpty()
	if strings.Contains(e.logs.String(), passwordA) {
		t.Error("the password appears in the server log")
	}
}

func TestOpenSSHKeyUpload(t *testing.T) {
	needs.External(t, "the OpenSSH sftp client")
	e := newEnv(t, nil)
	src := localFile(t, "by-key.csv", batchFile)
	e.mustSFTP(login{user: "merchant_a", keyPath: e.keyPath}, "put "+src+" /incoming/by-key.csv\nls /incoming")
	if got, _ := e.store.get("incoming/m_a/by-key.csv"); string(got) != batchFile {
		t.Fatalf("stored %q; keys %v", got, e.store.keys())
	}
	if ev := e.upload(); ev.MerchantID != "m_a" || ev.Key != "incoming/m_a/by-key.csv" {
		t.Errorf("event %+v", ev)
	}
}

func TestOpenSSHRefusesPathsOutsideHome(t *testing.T) {
	needs.External(t, "the OpenSSH sftp client")
	e := newEnv(t, nil)
	e.store.set("incoming/m_a/mine.csv", []byte("x"))
	src := localFile(t, "f.csv", batchFile)
	dst := filepath.Join(t.TempDir(), "out")
	// get and ls expand their argument as a glob first; OpenSSH reports a
	// refused stat during globbing as "not found". The exact status the
	// server sends (permission denied) is asserted in TestGoClientStatusCodes.
	const denied, globDenied = "Permission denied", "not found"
	cases := []struct{ name, script, want string }{
		{"get /etc/passwd", "get /etc/passwd " + dst, globDenied},
		{"get via ..", "get /incoming/../../etc/passwd " + dst, globDenied},
		{"relative ..", "cd /incoming\nget ../../../etc/passwd " + dst, globDenied},
		{"ls /etc", "ls /etc", globDenied},
		{"cd /etc", "cd /etc", denied},
		{"put at root", "put " + src + " /f.csv", denied},
		{"put via ..", "put " + src + " /incoming/../f.csv", denied},
		{"relative put ..", "cd /incoming\nput " + src + " ../f.csv", denied},
		{"put outside root", "put " + src + " /../../tmp/f.csv", denied},
		{"put into results", "put " + src + " /results/f.csv", denied},
		{"put into subdirectory", "put " + src + " /incoming/sub/f.csv", denied},
		{"mkdir", "mkdir /incoming/sub", denied},
		{"rename", "rename /incoming/mine.csv /incoming/other.csv", denied},
		{"rm in incoming", "rm /incoming/mine.csv", denied},
		{"symlink", "symlink /incoming/mine.csv /incoming/link.csv", denied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			e.mustFail(passwordLoginA, c.script, c.want)
		})
	}
	e.t = t
	if keys := e.store.keys(); len(keys) != 1 || keys[0] != "incoming/m_a/mine.csv" {
		t.Errorf("store changed: %v", keys)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("a refused download wrote a file")
	}
	e.noUpload()
}

func TestOpenSSHMerchantIsolation(t *testing.T) {
	needs.External(t, "the OpenSSH sftp client")
	e := newEnv(t, nil)
	e.store.set("incoming/m_b/b-secret.csv", []byte("b"))
	e.store.set("results/m_b/b-secret.csv.result.csv", []byte("b"))
	e.store.set("results/m_a/a.csv.result.csv", []byte("a"))
	dst := filepath.Join(t.TempDir(), "out")

	out := e.mustSFTP(passwordLoginA, "ls -1 /incoming\nls -1 /results")
	if strings.Contains(out, "b-secret") {
		t.Errorf("merchant A sees merchant B's files:\n%s", out)
	}
	if !strings.Contains(out, "a.csv.result.csv") {
		t.Errorf("merchant A does not see its own result:\n%s", out)
	}
	for _, p := range []string{
		"/results/b-secret.csv.result.csv", // same name, but A's prefix: absent
		"/results/../results/m_b/b-secret.csv.result.csv",
		"/" + bucket + "/results/m_b/b-secret.csv.result.csv",
		"/incoming/../../m_b/b-secret.csv",
	} {
		r := e.sftp(passwordLoginA, "get "+p+" "+dst)
		if r.err == nil {
			t.Errorf("merchant A downloaded %s", p)
		}
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("merchant A obtained a file of merchant B")
	}

	out = e.mustSFTP(passwordLoginB, "ls -1 /incoming\nls -1 /results")
	if !strings.Contains(out, "b-secret.csv") || strings.Contains(out, "a.csv.result.csv") {
		t.Errorf("merchant B listing:\n%s", out)
	}
}

func TestOpenSSHRefusesBadCredentials(t *testing.T) {
	needs.External(t, "the OpenSSH sftp client")
	e := newEnv(t, nil)
	src := localFile(t, "f.csv", batchFile)
	otherKey := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command(requireTool(t, "ssh-keygen", "openssh-client"), "-q", "-t", "ed25519", "-N", "", "-f", otherKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	for _, l := range []login{
		{user: "merchant_a", password: "wrong-password"},
		{user: "merchant_a", password: passwordB},
		{user: "nobody", password: passwordA},
		{user: "merchant_b", keyPath: e.keyPath}, // A's key is not B's
		{user: "merchant_a", keyPath: otherKey},  // unregistered key
	} {
		e.mustFail(l, "put "+src+" /incoming/f.csv", "Permission denied")
	}
	if keys := e.store.keys(); len(keys) != 0 {
		t.Errorf("store changed: %v", keys)
	}
	logs := e.logs.String()
	for _, want := range []string{"sftp login refused", "username=nobody", "sourceIp=127.0.0.1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	for _, secret := range []string{"wrong-password", passwordA, passwordB} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains password %q", secret)
		}
	}
}
