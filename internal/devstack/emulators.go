// Package devstack runs the service on one machine with no AWS account and
// no Docker: the pinned local AWS emulators (DynamoDB Local for DynamoDB,
// fauxqs for SQS and S3), the template's resources created in them, and the
// functions' handlers behind a local HTTP API. cmd/paydev and the
// integration tests use it.
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Emulators are the running emulator processes.
type Emulators struct {
	// DynamoDB is the endpoint URL every DynamoDB client of the stack uses:
	// the one place to put something in front of the emulator.
	DynamoDB string
	SQS      string // endpoint URL (fauxqs serves SQS and S3 on one port)
	S3       string
	procs    []*exec.Cmd
	names    []string // of procs, for errors
	logs     []string // of procs: where they announce that they listen
	ready    []string // of procs: the line that says so
	health   []func() bool
	stopOnce sync.Once
}

// InfraDir locates infra/local: $PAYREQ_INFRA_DIR, else the first parent of
// the working directory that contains infra/local/package.json.
func InfraDir() (string, error) {
	if d := os.Getenv("PAYREQ_INFRA_DIR"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		cand := filepath.Join(dir, "infra", "local")
		if _, err := os.Stat(filepath.Join(cand, "package.json")); err == nil {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("infra/local/package.json not found above the working directory; run from the repository")
		}
		dir = parent
	}
}

var npmMu sync.Mutex

// EnsureNodeModules runs `npm ci` once when the pinned packages are missing
// or older than the lockfile.
func EnsureNodeModules(infra string, log io.Writer) error {
	npmMu.Lock()
	defer npmMu.Unlock()
	unlock, err := lockInfra(infra)
	if err != nil {
		return fmt.Errorf("lock %s: %w", infra, err)
	}
	defer unlock()
	lock, err := os.Stat(filepath.Join(infra, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("infra lockfile: %w", err)
	}
	marker, err := os.Stat(filepath.Join(infra, "node_modules", ".package-lock.json"))
	if err == nil && !marker.ModTime().Before(lock.ModTime()) {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir, cmd.Stdout, cmd.Stderr = infra, log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s (Node 20 and npm are required): %w", infra, err)
	}
	return nil
}

// FreePort asks the kernel for an unused loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// errEmulatorExited: an emulator ended during start-up (one that lost its
// port to another process exits at once).
var errEmulatorExited = errors.New("emulator exited during start-up")

// StartEmulators starts DynamoDB Local and fauxqs on loopback ports (0 = any
// free port) and waits until both answer. Output goes to logDir.
func StartEmulators(ctx context.Context, infra, logDir string, dynamoPort, fauxqsPort int) (*Emulators, error) {
	ddb, err := prepareDynamoDBLocal(ctx, infra)
	if err != nil {
		return nil, err
	}
	// A port FreePort found free can be taken by another process before the
	// emulator binds it; the emulator then exits, and the readiness check may
	// even be answered by that other process. Fresh ports are tried again
	// when one of ours exits during or right after start-up.
	for try := 0; ; try++ {
		e, err := startEmulators(ctx, ddb, infra, logDir, dynamoPort, fauxqsPort)
		retry := try < 2 && dynamoPort == 0 && fauxqsPort == 0
		switch {
		case err == nil && e.running():
			return e, nil
		case err == nil:
			e.Stop()
			err = fmt.Errorf("%w: an emulator exited right after start-up (logs in %s)", errEmulatorExited, logDir)
		}
		if !retry || !errors.Is(err, errEmulatorExited) {
			return nil, err
		}
	}
}

// running reports whether every emulator process is still alive. No wait
// is needed for one that lost its port: each prints its ready line only
// once it holds its port, and readiness requires the line.
func (e *Emulators) running() bool {
	for _, p := range e.procs {
		if !processAlive(p.Process.Pid) { // reaped at once by its Wait goroutine
			return false
		}
	}
	return true
}

func startEmulators(ctx context.Context, ddb *dynamoDBLocal, infra, logDir string, dynamoPort, fauxqsPort int) (*Emulators, error) {
	var err error
	if dynamoPort == 0 {
		if dynamoPort, err = FreePort(); err != nil {
			return nil, err
		}
	}
	if fauxqsPort == 0 {
		if fauxqsPort, err = FreePort(); err != nil {
			return nil, err
		}
	}
	e := &Emulators{
		DynamoDB: fmt.Sprintf("http://127.0.0.1:%d", dynamoPort),
		SQS:      fmt.Sprintf("http://127.0.0.1:%d", fauxqsPort),
		S3:       fmt.Sprintf("http://127.0.0.1:%d", fauxqsPort),
	}
	e.health = []func() bool{func() bool { return dynamoDBAnswers(e.DynamoDB) }, func() bool { return httpAnswers(e.SQS + "/health") }}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	cmd := ddb.command(dynamoPort, os.Getenv(DynamoDBLocalDirEnv), os.Getenv(DynamoDBLocalHeapEnv), os.Getenv(DynamoDBLocalTieredEnv) == "1")
	if err := e.start(logDir, "dynamodb-local", dynamoDBLocalReady(dynamoPort), infra, nil, cmd[0], cmd[1:]...); err != nil {
		return nil, err
	}
	if err := e.start(logDir, "fauxqs", fmt.Sprintf("fauxqs listening on 127.0.0.1:%d", fauxqsPort), infra,
		[]string{"FAUXQS_PORT=" + strconv.Itoa(fauxqsPort), "FAUXQS_LOGGER=false", "FAUXQS_DEFAULT_REGION=" + Region},
		"node", "fauxqs-loopback.mjs"); err != nil {
		e.Stop()
		return nil, fmt.Errorf("%w (is Node 20 installed?)", err)
	}
	if err := e.wait(ctx); err != nil {
		e.Stop()
		return nil, fmt.Errorf("emulators did not become ready (logs in %s): %w", logDir, err)
	}
	return e, nil
}

// start runs one emulator process in its own process group, output to
// logDir/<name>.log; ready is the line it prints once it holds its port.
func (e *Emulators) start(logDir, name, ready, dir string, env []string, prog string, args ...string) error {
	logFile, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(prog, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = processGroup()
	// The kernel's parent-death signal (processGroup) fires when the OS
	// thread that started the child ends, not the process, and the Go
	// runtime does end threads (one whose locked goroutine exits). So the
	// emulator is started from a goroutine locked to its thread, which
	// stays until the emulator ends: it is killed only if paydev dies.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			return
		}
		started <- nil
		_ = cmd.Wait()
		logFile.Close()
		// Returning with the thread locked ends the thread: the child is
		// gone already.
	}()
	if err := <-started; err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	e.procs, e.names = append(e.procs, cmd), append(e.names, name)
	e.logs, e.ready = append(e.logs, logFile.Name()), append(e.ready, ready)
	return nil
}

// announced reports whether every emulator printed its ready line:
// readiness requires them, so a port answered by another process (one that
// took it between FreePort and the emulator's bind) is never mistaken for
// ours.
func (e *Emulators) announced() bool {
	for i, log := range e.logs {
		b, err := os.ReadFile(log)
		if err != nil || !strings.Contains(string(b), e.ready[i]) {
			return false
		}
	}
	return true
}

// httpAnswers reports whether url answers an HTTP GET at all.
func httpAnswers(url string) bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// wait returns once every emulator announced itself and answers, or with
// errEmulatorExited when one ended first.
func (e *Emulators) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		all := e.announced()
		for _, ok := range e.health {
			all = all && ok()
		}
		if all {
			return nil
		}
		for i, p := range e.procs {
			if !processAlive(p.Process.Pid) { // reaped at once by its Wait goroutine
				return fmt.Errorf("%w: %s", errEmulatorExited, e.names[i])
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PIDs returns the emulator process ids (for leak checks).
func (e *Emulators) PIDs() []int {
	var out []int
	for _, p := range e.procs {
		out = append(out, p.Process.Pid)
	}
	return out
}

// Stop terminates the emulators and everything they started.
func (e *Emulators) Stop() {
	e.stopOnce.Do(func() {
		for _, p := range e.procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
		deadline := time.Now().Add(3 * time.Second)
		for _, p := range e.procs {
			for processAlive(p.Process.Pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
	})
}

func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
