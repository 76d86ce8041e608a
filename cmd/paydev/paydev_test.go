package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/testing/needs"
)

// The local stack starts from the code, serves a request with the seeded key
// and stops on Ctrl-C (SIGINT) leaving no process behind.
func TestPaydevStartsServesAndStopsCleanly(t *testing.T) {
	needs.External(t, "paydev and the local stack")
	dir := t.TempDir()
	bin := filepath.Join(dir, "paydev")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "--port", "0", "--state-dir", state)
	cmd.Env = withoutEndpoint(os.Environ())
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	var info devstack.Info
	// Room for the first start after npm ci, which also builds DynamoDB
	// Local's launcher (devstack), on a loaded machine.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if b, err := os.ReadFile(filepath.Join(state, "stack.json")); err == nil && json.Unmarshal(b, &info) == nil {
			if r, err := http.Get(info.APIBase + "/health"); err == nil {
				r.Body.Close()
				if r.StatusCode == 200 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack not healthy after 3 min:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("paydev healthy after %.2f s (npm packages already installed)", time.Since(start).Seconds())
	if !strings.Contains(out.String(), info.Merchant.APIKey) || !strings.Contains(out.String(), "curl") {
		t.Errorf("banner lacks the API key or the curl example:\n%s", out.String())
	}
	// The seeded merchant's webhook secret, for verifying its notifications.
	if !strings.HasPrefix(info.Merchant.WebhookSecret, "whsec_") || !strings.Contains(out.String(), info.Merchant.WebhookSecret) {
		t.Errorf("stack.json webhook secret %q missing or not in the banner:\n%s", info.Merchant.WebhookSecret, out.String())
	}
	// The local mailbox (the dashboard's invitations) is in the state
	// directory, and the banner says where.
	if abs, _ := filepath.Abs(filepath.Join(state, "mail")); info.Mail != abs || !strings.Contains(out.String(), "Mail       "+abs) {
		t.Errorf("stack.json mail %q, want %s, named in the banner:\n%s", info.Mail, abs, out.String())
	}
	// DynamoDB Local and fauxqs, two processes, both named in the banner.
	if len(info.PIDs) != 2 {
		t.Fatalf("stack.json: %d emulator pids, want 2 (DynamoDB Local, fauxqs)", len(info.PIDs))
	}
	for _, name := range []string{"DynamoDB Local " + info.Endpoints.DynamoDB, "fauxqs " + info.Endpoints.SQS} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("banner does not name %s:\n%s", name, out.String())
		}
	}

	resp := testenv.Do(t, "POST", info.APIBase+"/payment-requests", info.Merchant.APIKey, `{"amount":25.00,"unit":"EUR","referenceId":"order-1"}`)
	if resp.Status != 201 {
		t.Fatalf("create with seeded key: %d %s", resp.Status, resp.Body)
	}
	id := strconv.FormatInt(int64(resp.JSON(t)["id"].(float64)), 10)
	if st := testenv.Do(t, "GET", info.APIBase+"/payment-requests/status/"+id, info.Merchant.APIKey, nil); st.Status != 200 {
		t.Fatalf("status: %d %s", st.Status, st.Body)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("paydev exit: %v\n%s", err, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("paydev did not stop within 15 s of SIGINT")
	}
	for _, pid := range info.PIDs {
		if leftovers := processesInGroup(pid); len(leftovers) > 0 {
			t.Errorf("emulator process group %d still has processes %v", pid, leftovers)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "stack.json")); !os.IsNotExist(err) {
		t.Error("stack.json left behind")
	}
	if _, err := http.Get(info.APIBase + "/health"); err == nil {
		t.Error("API still answering after stop")
	}

	// A restart keeps the seeded merchant's key and webhook secret (a
	// developer's receiver keeps verifying).
	again := exec.Command(bin, "--port", "0", "--state-dir", state)
	again.Env = withoutEndpoint(os.Environ())
	var out2 strings.Builder
	again.Stdout, again.Stderr = &out2, &out2
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	defer again.Process.Kill()
	var info2 devstack.Info
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(state, "stack.json")); err == nil && json.Unmarshal(b, &info2) == nil && info2.APIBase != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart: no stack.json after 60 s:\n%s", out2.String())
		}
	}
	if info2.Merchant.APIKey != info.Merchant.APIKey || info2.Merchant.WebhookSecret != info.Merchant.WebhookSecret {
		t.Errorf("restart changed the seeded merchant's key or webhook secret")
	}
	_ = again.Process.Signal(syscall.SIGINT)
	stopped := make(chan error, 1)
	go func() { stopped <- again.Wait() }()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Error("restarted paydev did not stop within 15 s of SIGINT")
	}
}

func withoutEndpoint(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "AWS_ENDPOINT_URL") {
			out = append(out, e)
		}
	}
	return out
}

// processesInGroup lists live (non-zombie) processes whose process group is pgid.
func processesInGroup(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name: state ppid pgrp ...
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 2 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
