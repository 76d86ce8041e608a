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
	if len(rest) < 2 {
		fs.Usage()
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out any
	var err error
	switch rest[0] {
	case "merchant":
		out, err = merchantCmd(ctx, g, rest[1], rest[2:], stderr)
	default:
		err = usageError(fmt.Sprintf("unknown command %q", rest[0]))
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "payctl:", err)
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "payctl:", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "payctl:", err)
		return 1
	}
	return 0
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
