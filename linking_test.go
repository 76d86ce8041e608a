package payreq_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The heavy or function-specific dependencies a Lambda binary may link,
// by what they are for. A Go binary links every package it imports, with
// its init functions and globals, so a function that imports one of these
// without using it pays for it in size and cold start.
var linkable = map[string][]string{
	"stripe": {"github.com/stripe/stripe-go/v83", "github.com/payreq/payreq/internal/provider/stripe"},
	"ssh":    {"golang.org/x/crypto/ssh"},
	"qr":     {"rsc.io/qr"},
	"s3":     {"github.com/aws/aws-sdk-go-v2/service/s3", "github.com/payreq/payreq/internal/s3store"},
	"sqs":    {"github.com/aws/aws-sdk-go-v2/service/sqs", "github.com/payreq/payreq/internal/queue"},
	// Amazon SES: the dashboard's invitation e-mails.
	"ses": {"github.com/aws/aws-sdk-go-v2/service/sesv2"},
	// The API Gateway adapter: HTTP API functions only.
	"http": {"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter", "github.com/payreq/payreq/internal/lambdahttp"},
	// The payments core, and the sandbox provider it selects on a sandbox stage.
	"payments": {"github.com/payreq/payreq/internal/paycore"},
	"sandbox":  {"github.com/payreq/payreq/internal/provider/sandbox"},
}

// uses is what each function needs, and why. Every other entry of linkable
// is forbidden in its binary; every entry here must be linked (a stale
// table fails too, so it stays exact).
var uses = map[string][]string{
	// Archives expired payment records (S3); no provider, no queue.
	"audit": {"s3"},
	// Charges rows (provider), reads and writes files (S3), continues and
	// notifies (SQS).
	"batch": {"stripe", "payments", "sandbox", "s3", "sqs"},
	// Completes payments; Stripe's webhook.
	"callbacks": {"stripe", "payments", "sandbox", "sqs", "http"},
	// PayCheckout charges; the page's QR and UPI codes.
	"checkout": {"stripe", "payments", "sandbox", "qr", "sqs", "http"},
	// Refunds go through the provider; batch result files (S3); SFTP keys
	// are parsed (ssh); redelivery (SQS); invitations are e-mailed (SES).
	"dashboard": {"stripe", "payments", "sandbox", "ssh", "s3", "sqs", "ses", "http"},
	// The acquirer's amount limits and transaction lookups.
	"merchantapi": {"stripe", "payments", "sandbox", "sqs", "http"},
	// Delivers notifications: no payments core, no provider.
	"notifier": {"sqs"},
	"payments": {"stripe", "payments", "sandbox", "sqs", "http"},
	// Recovers open payments through the provider.
	"reconciler": {"stripe", "payments", "sandbox", "sqs"},
	// The simulator's asynchronous side: its own provider, no Stripe.
	"sandbox": {"sandbox", "sqs"},
	// Login decisions over the users table: SSH keys, nothing else.
	"sftpauth": {"ssh"},
}

// neverLinked are packages no Lambda binary may link: test and local-stack
// tooling.
var neverLinked = []string{
	"github.com/chromedp/",
	"github.com/stripe/stripe-mock",
	"github.com/payreq/payreq/internal/devstack",
	"github.com/payreq/payreq/internal/testing/",
	"github.com/payreq/payreq/internal/testenv",
	"github.com/payreq/payreq/internal/browsertest",
	"github.com/payreq/payreq/internal/apispec",
	"github.com/payreq/payreq/internal/devstack/sftpd",
}

// TestFunctionsLinkOnlyWhatTheyUse reads every function's dependencies
// (go list -json ./functions/..., the transitive Deps of each main package)
// and fails when a binary links a package its function does not use, or no
// longer links one the table says it uses.
func TestFunctionsLinkOnlyWhatTheyUse(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", "./functions/...")
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=-tags=lambda.norpc")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./functions/...: %v", err)
	}
	deps := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Name       string
			Deps       []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Name == "main" {
			deps[strings.TrimPrefix(p.ImportPath, "github.com/payreq/payreq/functions/")] = p.Deps
		}
	}
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) != len(uses) {
		t.Errorf("functions %v; the table has %d: every function gets a line in uses", names, len(uses))
	}
	linked := func(fn, pkg string) bool {
		return slices.ContainsFunc(deps[fn], func(d string) bool { return d == pkg || strings.HasPrefix(d, pkg) && strings.HasSuffix(pkg, "/") })
	}
	for _, fn := range names {
		want, ok := uses[fn]
		if !ok {
			t.Errorf("functions/%s has no line in uses", fn)
			continue
		}
		for what, pkgs := range linkable {
			for _, pkg := range pkgs {
				switch has := linked(fn, pkg); {
				case has && !slices.Contains(want, what):
					t.Errorf("functions/%s links %s (%s), which it does not use", fn, pkg, what)
				case !has && slices.Contains(want, what):
					t.Errorf("functions/%s no longer links %s (%s): take %q out of its uses", fn, pkg, what, what)
				}
			}
		}
		for _, pkg := range neverLinked {
			if linked(fn, pkg) {
				t.Errorf("functions/%s links %s: test and local-stack tooling never ships", fn, pkg)
			}
		}
	}
}
