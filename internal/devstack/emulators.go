// Package devstack runs the service on one machine with no AWS account and
// no Docker: local AWS emulators (by default the pinned dynalite for DynamoDB
// and fauxqs for SQS and S3; moto_server with PAYREQ_BACKEND=moto), the
// template's resources created in them, and the functions' handlers behind a
// local HTTP API. cmd/paydev and the integration tests use it.
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

// BackendEnv names the variable that chooses the local AWS emulators.
const BackendEnv = "PAYREQ_BACKEND"

// Local emulator backends.
const (
	BackendDynalite = "dynalite" // dynalite (DynamoDB) + fauxqs (SQS, S3), pinned in infra/local
	BackendMoto     = "moto"     // moto_server: DynamoDB, SQS and S3 on one port
)

// SelectedBackend reads PAYREQ_BACKEND: empty means dynalite+fauxqs. An
// unknown name is an error, never a silent fallback to the default.
func SelectedBackend() (string, error) {
	switch v := os.Getenv(BackendEnv); v {
	case "", BackendDynalite, "dynalite+fauxqs":
		return BackendDynalite, nil
	case BackendMoto:
		return BackendMoto, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q (default) or %q", BackendEnv, v, BackendDynalite, BackendMoto)
	}
}

// Emulators are the running emulator processes.
type Emulators struct {
	Backend  string
	DynamoDB string // endpoint URL
	SQS      string // endpoint URL (fauxqs serves SQS and S3 on one port)
	S3       string
	procs    []*exec.Cmd
	names    []string // of procs, for errors
	logs     []string // of procs: where they announce that they listen
	health   []string // URLs that answer once the emulators serve
	closers  []func() // in-process helpers (moto's DynamoDB proxy)
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

// DynaliteDirEnv names a directory for dynalite's tables, kept on disk
// (LevelDB) instead of in the emulator's heap: a million-row batch file's
// tables outgrow a laptop's memory (docs/batch.md). Empty: in memory.
const DynaliteDirEnv = "PAYREQ_DYNALITE_DIR"

// StartEmulators starts dynalite and fauxqs on loopback ports (0 = any free
// port) and waits until both answer. Output goes to logDir.
func StartEmulators(ctx context.Context, infra, logDir string, dynamoPort, fauxqsPort int) (*Emulators, error) {
	// A port FreePort found free can be taken by another process before the
	// emulator binds it; the emulator then exits, and the readiness check may
	// even be answered by that other process. Fresh ports are tried again
	// when one of ours is not running after start-up.
	for try := 0; ; try++ {
		e, err := startEmulators(ctx, infra, logDir, dynamoPort, fauxqsPort)
		if err != nil || e.running() || try == 2 || dynamoPort != 0 || fauxqsPort != 0 {
			if err == nil && !e.running() {
				e.Stop()
				return nil, fmt.Errorf("an emulator exited right after start-up (logs in %s)", logDir)
			}
			return e, err
		}
		e.Stop()
	}
}

// running reports whether every emulator process is still alive a moment
// after start-up (one that lost its port exits at once).
func (e *Emulators) running() bool {
	time.Sleep(300 * time.Millisecond)
	for _, p := range e.procs {
		if !processAlive(p.Process.Pid) { // reaped at once by its Wait goroutine
			return false
		}
	}
	return true
}

func startEmulators(ctx context.Context, infra, logDir string, dynamoPort, fauxqsPort int) (*Emulators, error) {
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
		Backend:  BackendDynalite,
		DynamoDB: fmt.Sprintf("http://127.0.0.1:%d", dynamoPort),
		SQS:      fmt.Sprintf("http://127.0.0.1:%d", fauxqsPort),
		S3:       fmt.Sprintf("http://127.0.0.1:%d", fauxqsPort),
	}
	e.health = []string{e.DynamoDB, e.SQS + "/health"}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	// A larger young generation for dynalite, whose heap grows past 2 GB on
	// a 100,000-row file: fewer scavenges of short-lived request objects.
	// No measurable change at 10,000 rows; not measured apart at 100,000
	// (docs/batch.md).
	args := []string{"--max-semi-space-size=64", "dynalite-keepalive.cjs", "--host", "127.0.0.1",
		"--port", strconv.Itoa(dynamoPort), "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}
	if dir := os.Getenv(DynaliteDirEnv); dir != "" {
		args = append(args, "--path", dir)
	}
	if err := e.start(logDir, "dynalite", infra, nil, "node", args...); err != nil {
		return nil, fmt.Errorf("%w (is Node 20 installed?)", err)
	}
	if err := e.start(logDir, "fauxqs", infra, []string{"FAUXQS_PORT=" + strconv.Itoa(fauxqsPort), "FAUXQS_LOGGER=false",
		"FAUXQS_DEFAULT_REGION=" + Region}, "node", "fauxqs-loopback.mjs"); err != nil {
		e.Stop()
		return nil, fmt.Errorf("%w (is Node 20 installed?)", err)
	}
	if err := e.wait(ctx); err != nil {
		e.Stop()
		return nil, fmt.Errorf("emulators did not become ready (logs in %s): %w", logDir, err)
	}
	return e, nil
}

// StartMoto starts moto_server (DynamoDB, SQS and S3 on one port) bound to
// 127.0.0.1 on port (0 = any free port) and waits until it answers. Its
// accounts are Account, so ARNs match the ones the template resolves to.
// DynamoDB is reached through a serialising proxy (serializeDynamoDB).
// moto_server must be on PATH: a missing one is an error, never a fallback.
func StartMoto(ctx context.Context, logDir string, port int) (*Emulators, error) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		return nil, fmt.Errorf("%s=%s needs moto_server on PATH (pip install 'moto[server]'): %w", BackendEnv, BackendMoto, err)
	}
	// moto_server's own main, started through infra/local/moto-server.py,
	// which makes a transaction copy each table once instead of once per
	// item (docs/testing.md); it runs in the Python moto_server comes with.
	infra, err := InfraDir()
	if err != nil {
		return nil, err
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil, fmt.Errorf("%s=%s needs python3 (the one moto is installed in): %w", BackendEnv, BackendMoto, err)
	}
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	e := &Emulators{Backend: BackendMoto, DynamoDB: url, SQS: url, S3: url, health: []string{url + "/moto-api/"}}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	if err := e.start(logDir, "moto", "", []string{"MOTO_ACCOUNT_ID=" + Account},
		python, filepath.Join(infra, "moto-server.py"), "-H", "127.0.0.1", "-p", strconv.Itoa(port)); err != nil {
		return nil, err
	}
	if err := e.wait(ctx); err != nil {
		e.Stop()
		return nil, fmt.Errorf("moto_server did not become ready (log in %s): %w", logDir, err)
	}
	proxy, stop, err := serializeDynamoDB(url)
	if err != nil {
		e.Stop()
		return nil, err
	}
	e.DynamoDB, e.closers = proxy, append(e.closers, stop)
	return e, nil
}

// start runs one emulator process in its own process group, output to
// logDir/<name>.log.
func (e *Emulators) start(logDir, name, dir string, env []string, prog string, args ...string) error {
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
	e.logs = append(e.logs, logFile.Name())
	return nil
}

// readyLines are what each emulator prints once it listens: readiness
// requires them, so a port answered by another process (one that took it
// between FreePort and the emulator's bind) is never mistaken for ours.
var readyLines = map[string]string{"dynalite": "Dynalite listening at", "fauxqs": "fauxqs listening", "moto": "Running on"}

func (e *Emulators) announced() bool {
	for i, name := range e.names {
		want, ok := readyLines[name]
		if !ok {
			continue
		}
		b, err := os.ReadFile(e.logs[i])
		if err != nil || !strings.Contains(string(b), want) {
			return false
		}
	}
	return true
}

func (e *Emulators) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	ready := func(url string) bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
	for {
		all := true
		for _, u := range e.health {
			all = all && ready(u)
		}
		if all && e.announced() {
			return nil
		}
		for i, p := range e.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("%s exited: %s", e.names[i], p.ProcessState)
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
		for _, c := range e.closers {
			c()
		}
		for _, p := range e.procs {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		}
		deadline := time.Now().Add(3 * time.Second)
		for _, p := range e.procs {
			for p.ProcessState == nil && processAlive(p.Process.Pid) && time.Now().Before(deadline) {
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
