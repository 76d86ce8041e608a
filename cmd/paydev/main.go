// Command paydev runs the whole service locally (`make dev`): local AWS
// emulators (DynamoDB Local + fauxqs), the
// template's tables, queues and buckets, a seeded sandbox merchant, and the
// HTTP API on 127.0.0.1:3000. Ctrl-C stops everything.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/devstack/adyenmock"
	"github.com/payreq/payreq/internal/devstack/stripemock"
)

func main() {
	port := flag.Int("port", 3000, "HTTP API port on 127.0.0.1 (0 = any free port)")
	stateDir := flag.String("state-dir", ".paydev", "directory for stack.json, keys and emulator logs")
	sftpPort := flag.Int("sftp-port", 0, "SFTP port on 127.0.0.1 (0 = 2222, or any free port with -port 0)")
	stage := flag.String("stage", "sandbox", "sandbox, or production: the Stripe connector against a stripe-mock paydev starts (unless -param LocalStripeSecretKey=... is given)")
	connector := flag.String("connector", "stripe", "the production stage's connector: stripe, or adyen (Prism serving Adyen's description before a front playing Adyen's test platform)")
	stackName := flag.String("stack-name", devstack.StackName, "prefix of the stack's tables, queues and buckets: stacks with different names share emulators (-state-dir's AWS endpoints) without sharing data")
	scheduleEvery := flag.Duration("schedule-every", 0, "run scheduled functions (the reconciler) this often instead of the template's rate")
	faults := flag.Bool("faults", false, "put the fault proxy in front of DynamoDB: lose the answer of chosen writes, answer TransactionConflict to chosen transactions (POST a fault to faultsUrl in stack.json; docs/lost-answers.md)")
	params := map[string]string{}
	flag.Func("param", "override a template parameter, Name=Value (repeatable)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want Name=Value, got %q", v)
		}
		params[k] = val
		return nil
	})
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	started := time.Now()
	stopMock := func() {}
	if *stage == "production" && *connector == "adyen" {
		var err error
		if stopMock, err = startAdyenMock(ctx, *stateDir, params); err != nil {
			fmt.Fprintln(os.Stderr, "paydev:", err)
			os.Exit(1)
		}
	} else if *stage == "production" && params["LocalStripeSecretKey"] == "" {
		var err error
		if stopMock, err = startStripeMock(ctx, *stateDir, params); err != nil {
			fmt.Fprintln(os.Stderr, "paydev:", err)
			os.Exit(1)
		}
	}
	defer stopMock()
	stopAccounts, err := accountChecks(*stateDir, params)
	if err != nil {
		fmt.Fprintln(os.Stderr, "paydev:", err)
		stopMock()
		os.Exit(1)
	}
	defer stopAccounts()
	stack, err := devstack.Start(ctx, devstack.Options{StateDir: *stateDir, APIPort: *port, SFTPPort: *sftpPort, Params: params, Stage: *stage, ScheduleEvery: *scheduleEvery, StackName: *stackName, Faults: *faults, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "paydev:", err)
		stopAccounts()
		stopMock()
		os.Exit(1)
	}
	printBanner(stack.Info, *stateDir, time.Since(started))
	printDashboard(stack.Info)
	if stack.Info.FaultsURL != "" {
		fmt.Printf("  Faults     POST a fault to %s (docs/lost-answers.md)\n\n", stack.Info.FaultsURL)
	}
	if *stage == "production" && *connector == "adyen" {
		fmt.Printf("  Stage      production (Adyen connector; Prism %s)\n  Webhooks   POST %s/callbacks/adyen, HMAC key in %s\n\n",
			params["LocalAdyenApiBase"], stack.Info.APIBase, *stateDir+"/adyen-hmac.key")
	} else if *stage == "production" {
		fmt.Printf("  Stage      production (Stripe connector; stripe-mock %s)\n  Webhooks   POST %s/callbacks/svcwh, Stripe-Signature with the secret in %s\n\n",
			params["LocalStripeApiBase"], stack.Info.APIBase, *stateDir+"/stripe-webhook.secret")
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "\npaydev: stopping...")
	stack.Close()
}

// startStripeMock runs stripe-mock (a Go tool of this module) and points the
// stack's Stripe connector at it. stripe-mock accepts any sk_test_ key and
// keeps no state and answers every payment from one fixture, patched to a
// succeeded PaymentIntent so card payments are approved; the webhook secret is written to the state directory so a
// developer can sign test events (docs/stripe.md).
func startStripeMock(ctx context.Context, stateDir string, params map[string]string) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	fixtures, err := stripemock.WriteFixtures(ctx, stateDir, stripemock.Succeeded)
	if err != nil {
		return nil, err
	}
	url, stop, err := stripemock.Run(ctx, stateDir, fixtures)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		stop()
		return nil, err
	}
	whsec := "whsec_" + base64.StdEncoding.EncodeToString(secret)
	if err := os.WriteFile(filepath.Join(stateDir, "stripe-webhook.secret"), []byte(whsec+"\n"), 0o600); err != nil {
		stop()
		return nil, err
	}
	params["LocalStripeSecretKey"] = "sk_test_paydev"
	params["LocalStripePublishableKey"] = "pk_test_paydev" // the wallet buttons (Google Pay's stripe gateway, Apple Pay's Stripe.js)
	// A stand-in Google merchant id: Google Pay's PRODUCTION environment
	// needs one, so the local production page shows its button.
	params["GooglePayMerchantId"] = "PAYDEVLOCAL0000"
	params["LocalStripeApiBase"] = url
	params["LocalStripeWebhookSecrets"] = whsec
	return stop, nil
}

// accountChecks points the dashboard's checks of merchants' own Stripe
// accounts (the Connectors page) at a stripe-mock, started at the first
// check, unless a parameter names one already (LocalAccountStripeApiBase,
// or the stack's own Stripe connector's LocalStripeApiBase, which the
// dashboard uses when the former is empty). A local stack never sends a
// merchant's key to Stripe itself. Adyen accounts are checked against the
// stack's Prism when -connector adyen runs one (docs/acquirers.md).
func accountChecks(stateDir string, params map[string]string) (func(), error) {
	if params["LocalAccountStripeApiBase"] != "" || params["LocalStripeApiBase"] != "" {
		return func() {}, nil
	}
	dir := filepath.Join(stateDir, "account-checks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	url, stop, err := stripemock.Lazy(dir)
	if err != nil {
		return nil, err
	}
	params["LocalAccountStripeApiBase"] = url
	return stop, nil
}

// startAdyenMock runs Prism before adyenmock's front and points the stack's
// Adyen connector at it (docs/acquirers.md); the webhook HMAC key is written
// to the state directory so a developer can sign test webhooks.
func startAdyenMock(ctx context.Context, stateDir string, params map[string]string) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	infra, err := devstack.InfraDir()
	if err != nil {
		return nil, err
	}
	if err := devstack.EnsureNodeModules(infra, os.Stderr); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	hmacKey := strings.ToUpper(hex.EncodeToString(key))
	if err := os.WriteFile(filepath.Join(stateDir, "adyen-hmac.key"), []byte(hmacKey+"\n"), 0o600); err != nil {
		return nil, err
	}
	const apiKey = "AQE_paydev_local"
	m, err := adyenmock.Run(ctx, infra, stateDir, apiKey, hmacKey)
	if err != nil {
		return nil, err
	}
	params["LocalAdyenApiKey"], params["LocalAdyenApiBase"], params["LocalAdyenHmacKeys"] = apiKey, m.URL, hmacKey
	params["AdyenMerchantAccount"], params["PaymentConnector"] = "PaydevECOM", "adyen"
	return m.Stop, nil
}

func printBanner(info devstack.Info, stateDir string, took time.Duration) {
	emulators := "DynamoDB Local " + info.Endpoints.DynamoDB + ", fauxqs " + info.Endpoints.SQS
	if info.External {
		emulators = "external endpoint " + info.Endpoints.DynamoDB
	}
	fmt.Printf(`
  Payment Request Service — local stack ready in %.1fs
  API        %s
  AWS        %s
  Merchant   %s
  API key    %s
  Webhooks   secret %s  (payctl --local webhooks listen)
  SFTP       %s  user %s  password %s
  Demo       %s/demo
  Mail       %s  (the dashboard's invitations, one .eml file each)
  State      %s/stack.json

  Try it:
    curl -s -X POST %s/payment-requests \
      -H 'X-API-Key: %s' -H 'Content-Type: application/json' \
      -d '{"amount": 25.00, "unit": "EUR", "referenceId": "order-1"}'

  Ctrl-C stops everything.
`, took.Seconds(), info.APIBase, emulators, info.Merchant.ID, info.Merchant.APIKey, info.Merchant.WebhookSecret,
		info.SFTPAddr, info.Merchant.SFTPUser, info.Merchant.SFTPPassword, info.APIBase, info.Mail, stateDir,
		info.APIBase, info.Merchant.APIKey)
}

// printDashboard adds the seeded dashboard user to the banner.
func printDashboard(info devstack.Info) {
	fmt.Printf("  Dashboard  %s  e-mail %s  password %s  (admin of %s)\n\n", info.Dashboard.URL, info.Dashboard.Email, info.Dashboard.Password, info.Dashboard.MerchantID)
}
