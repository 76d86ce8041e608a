// Package motoserver gives a test its own moto_server (moto 5.2.1, the AWS
// emulator LocalStack builds on, installed with cfn-lint on every machine)
// for what the local stack's emulators do not serve: Secrets Manager (the
// cold-start tests) and one endpoint for every service, as LocalStack is
// (the stack's AWS_ENDPOINT_URL mode). Loopback only, ready once it says it
// listens, stopped with the test. A missing moto_server fails the test.
package motoserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/testing/needs"
)

// Account is the local stack's account id (devstack.Account): moto puts it
// in ARNs, so they match the ones the template resolves to.
const Account = "000000000000"

// Start runs moto_server for t and returns its endpoint (every service
// moto emulates answers there).
func Start(t testing.TB) string {
	t.Helper()
	needs.External(t, "moto_server")
	prog, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH (pip install 'moto[server]==5.2.1'): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for try := 0; ; try++ {
		url, err := start(ctx, t, prog)
		if err == nil {
			return url
		}
		if try == 2 || ctx.Err() != nil {
			t.Fatal(err)
		}
		// Its port was taken between choosing and binding it: another one.
	}
}

func start(ctx context.Context, t testing.TB, prog string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(t.TempDir(), "moto.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.Command(prog, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "MOTO_ACCOUNT_ID="+Account)
	// Its own process group: with pyenv, moto_server is a shim that runs
	// Python, and stopping the group stops both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: time.Second}
	for {
		// "Running on" in its own log proves the port is this process's.
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "Running on") {
			if resp, err := client.Get(url + "/moto-api/"); err == nil {
				resp.Body.Close()
				t.Cleanup(stop)
				return url, nil
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("moto_server exited during start-up:\n%s", b)
		case <-ctx.Done():
			stop()
			return "", fmt.Errorf("moto_server not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
