// Package adyenmock is Adyen's Checkout API v71 for the local stack and
// the tests of internal/provider/adyen: Prism (npm @stoplight/prism-cli,
// pinned in infra/local) serves Adyen's own OpenAPI description in proxy
// mode with --errors, so every request is validated against it before
// anything answers, and every answer after; behind Prism, Front plays
// Adyen's test cards, outcomes, idempotency and signed webhooks (front.go).
//
//	connector ──▶ Prism (validates request and answer) ──▶ Front (Adyen's behaviour)
//
// A request that breaks the description gets Prism's 422 and never reaches
// the front; an answer of the front that breaks it becomes Prism's 500.
// CheckoutService-v71.json is Adyen's json/CheckoutService-v71.json
// (github.com/Adyen/adyen-openapi, MIT, LICENSE-adyen-openapi beside it),
// cut to the five operations the connector calls and the components they
// reference (README.md here says how). It has no testing import, so a
// command may link it.
package adyenmock

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Spec is Adyen's Checkout API v71 description as served.
//
//go:embed CheckoutService-v71.json
var Spec []byte

// Mock is a running Prism before a Front.
type Mock struct {
	URL      string // Prism: the Checkout API root the connector calls (no /v71: Prism serves the paths at its root)
	FrontURL string // the front itself (its 3-D Secure page, for the payer)
	Front    *Front
	stop     func()
}

// Stop ends Prism and the front.
func (m *Mock) Stop() { m.stop() }

// Run starts a Front (apiKey, hmacKey) on a free loopback port and Prism in
// proxy mode before it; infraDir is infra/local (its node_modules), dir
// holds the description and Prism's log.
func Run(ctx context.Context, infraDir, dir, apiKey, hmacKey string) (*Mock, error) {
	front := NewFront(apiKey, hmacKey)
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(fl) }()
	front.PublicURL = "http://" + fl.Addr().String()
	stopFront := func() { _ = srv.Close() }

	spec := filepath.Join(dir, "CheckoutService-v71.json")
	if err := os.WriteFile(spec, Spec, 0o600); err != nil {
		stopFront()
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		stopFront()
		return nil, err
	}
	bin := filepath.Join(infraDir, "node_modules", ".bin", "prism")
	cmd := exec.Command(bin, "proxy", spec, front.PublicURL, "--errors", "-h", "127.0.0.1", "-p", fmt.Sprint(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		stopFront()
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		stopFront()
		return nil, fmt.Errorf("start prism: %w", err)
	}
	stop := func() {
		// Prism is one node process (no workers in proxy mode).
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		stopFront()
	}
	ready := make(chan struct{})
	logPath := filepath.Join(dir, "prism.log")
	go func() {
		lf, _ := os.Create(logPath)
		defer lf.Close()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			if lf != nil {
				fmt.Fprintln(lf, line)
			}
			if !once && strings.Contains(line, "Prism is listening") {
				once = true
				close(ready)
			}
		}
	}()
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	select {
	case <-ready:
		return &Mock{URL: fmt.Sprintf("http://127.0.0.1:%d", port), FrontURL: front.PublicURL, Front: front, stop: stop}, nil
	case <-wait.Done():
		stop()
		return nil, errors.New("prism did not start within 2 minutes (log: " + logPath + ")")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func htmlEscape(s string) string { return html.EscapeString(s) }
