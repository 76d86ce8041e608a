// Package stripemock runs Stripe's official mock server (stripe-mock,
// pinned as a Go tool in go.mod) as a child process: `make dev` (paydev
// -stage production) and, through internal/testing/stripetest, the tests.
// It has no testing import, so a command may link it.
package stripemock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Run starts stripe-mock: dir
// holds its private HTTPS socket, fixtures (optional) a fixtures file. stop
// kills it.
func Run(ctx context.Context, dir, fixtures string) (url string, stop func(), err error) {
	bin, err := goCmd(ctx, "tool", "-n", "stripe-mock")
	if err != nil {
		return "", nil, err
	}
	// -http-addr alone would also open HTTPS on the fixed port 12112; park
	// HTTPS on a private socket so parallel runs never collide.
	sock := filepath.Join(dir, "stripe-mock-https.sock")
	_ = os.Remove(sock)
	args := []string{"-http-addr", "127.0.0.1:0", "-https-unix", sock}
	if fixtures != "" {
		args = append(args, "-fixtures", fixtures)
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start stripe-mock: %w", err)
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		const prefix = "Listening for HTTP at address: "
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, errors.New("stripe-mock did not start within 30s")
	}
}

func goCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// WriteFixtures writes stripe-mock's bundled fixtures, edited by patch, to
// dir and returns the file's path (for Run).
func WriteFixtures(ctx context.Context, dir string, patch func(map[string]map[string]any)) (string, error) {
	modDir, err := goCmd(ctx, "list", "-m", "-f", "{{.Dir}}", "github.com/stripe/stripe-mock")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(modDir, "embedded", "openapi", "fixtures3.json"))
	if err != nil {
		return "", err
	}
	var fx struct {
		Resources map[string]map[string]any `json:"resources"`
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		return "", err
	}
	patch(fx.Resources)
	if b, err = json.Marshal(fx); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "stripe-mock-fixtures.json")
	return p, os.WriteFile(p, b, 0o600)
}

// Succeeded patches the PaymentIntent fixture to a succeeded payment (the
// bundled one awaits a payment method, which the connector reads as a
// decline).
func Succeeded(r map[string]map[string]any) {
	pi := r["payment_intent"]
	pi["status"], pi["next_action"], pi["last_payment_error"] = "succeeded", nil, nil
}
