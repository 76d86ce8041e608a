package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

const usage = `payctl — operate the Payment Request Service

Usage:
  payctl [global flags] merchant create --name NAME [settings]
  payctl [global flags] merchant show --id ID
  payctl [global flags] merchant update --id ID [settings]
  payctl [global flags] merchant rotate-key --id ID
  payctl [global flags] deliveries list --request ID
  payctl [global flags] deliveries redeliver --request ID
  payctl [global flags] dlq redrive
  payctl [global flags] sftp set-password --id ID [--password P]   (generated and shown once without --password)
  payctl [global flags] sftp add-key --id ID --key-file FILE       (authorized_keys format, e.g. id_ed25519.pub)
  payctl [global flags] sftp show --id ID                           (address, user, password set, key fingerprints)
  payctl [global flags] batch show --id ID [--file NAME]            (batch files: state and counts by outcome)
  payctl [global flags] audit [--grace 5m] [--timeout 10m]          (invariant audit: JSON report, exit 3 on any violation)
  payctl webhooks listen [--port 4000] [--api-key KEY] [--webhook-secret whsec_...]

Global flags:
  --local              use the local stack of 'make dev' (reads .paydev/stack.json)
  --state-dir DIR      local stack state directory (default .paydev)
  --stack NAME         deployed stack name (default payreq-sandbox); AWS credentials from the default chain
  --region REGION      AWS region of the stack

Merchant settings:
  --name, --notify-url, --success-url, --failure-url,
  --allowed-origins O1,O2   origins allowed to embed the checkout
  --methods 1,27,30         enabled host-to-host method selectors
  --min-amount, --max-amount, --daily-amount, --monthly-amount   decimal limits
  --daily-count, --monthly-count                                 count limits
  --currencies EUR,USD, --countries DE,FR                        allowed lists
  --rate-limit N            API requests per minute (default 100)
  --notification-format form|json
  --production              create a live (non-sandbox) merchant
`

type globals struct {
	local    bool
	stateDir string
	stack    string
	region   string
}

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("payctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	var g globals
	fs.BoolVar(&g.local, "local", false, "")
	fs.StringVar(&g.stateDir, "state-dir", ".paydev", "")
	fs.StringVar(&g.stack, "stack", "payreq-sandbox", "")
	fs.StringVar(&g.region, "region", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) < 2 && !(len(rest) == 1 && rest[0] == "audit") {
		fs.Usage()
		return 2
	}
	if rest[0] == "webhooks" && rest[1] == "listen" {
		// Long-running: prints one JSON line per notification, no timeout.
		if err := webhooksListen(ctx, rest[2:], stdout, stderr); err != nil {
			return report(err, stderr)
		}
		return 0
	}
	if rest[0] == "audit" {
		// Full table scans: its own --timeout, not the 60 s below.
		return auditCmd(ctx, g, rest[1:], stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out any
	var err error
	switch rest[0] {
	case "merchant":
		out, err = merchantCmd(ctx, g, rest[1], rest[2:], stderr)
	case "sftp":
		out, err = sftpCmd(ctx, g, rest[1], rest[2:], stderr)
	case "batch":
		out, err = batchCmd(ctx, g, rest[1], rest[2:], stderr)
	case "deliveries":
		out, err = deliveriesCmd(ctx, g, rest[1], rest[2:], stderr)
	case "dlq":
		out, err = dlqCmd(ctx, g, rest[1], rest[2:])
	default:
		err = usageError(fmt.Sprintf("unknown command %q", rest[0]))
	}
	if err != nil {
		return report(err, stderr)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "payctl:", err)
		return 1
	}
	return 0
}

// report prints err and returns the exit code: 2 for usage errors, else 1.
func report(err error, stderr io.Writer) int {
	fmt.Fprintln(stderr, "payctl:", err)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprint(stderr, usage)
		return 2
	}
	return 1
}

type usageError string

func (e usageError) Error() string { return string(e) }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
