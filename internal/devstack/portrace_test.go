package devstack

import (
	"context"
	"github.com/payreq/payreq/internal/testing/needs"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Another process taking the emulator's port between FreePort and the
// emulator's bind must not leave the stack talking to that process (another
// test package's emulator, which later goes away: "connection refused"
// mid-run). StartEmulators notices its own emulator exited and starts on
// fresh ports.
func TestEmulatorsThatLostTheirPortAreRestarted(t *testing.T) {
	needs.External(t, "the emulators")
	infra := emulatorFiles(t)
	// A stranger holds a port and answers like a healthy server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stranger := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: time.Second}
	go func() { _ = stranger.Serve(l) }()
	defer stranger.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The stranger answers the health check at once; the emulator that
	// could not bind never announces itself, so the start fails instead of
	// handing out the stranger's address.
	if e, err := StartEmulators(ctx, infra, filepath.Join(t.TempDir(), "logs"), taken, 0); err == nil {
		e.Stop()
		t.Fatalf("the stack would talk to the process that took the port: %+v", e)
	}
	e, err := StartEmulators(ctx, infra, filepath.Join(t.TempDir(), "logs"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if !e.running() || e.DynamoDB == "http://127.0.0.1:"+strconv.Itoa(taken) {
		t.Fatalf("emulators %+v", e)
	}
}
