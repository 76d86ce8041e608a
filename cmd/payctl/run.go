package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

const rootLong = `payctl operates the Payment Request Service: merchants and their keys, SFTP
logins, batch files, notification deliveries and the dead-letter queue, the
invariant audit, and the sandbox tools merchants use while integrating
(webhooks listen, trigger).

Results are JSON on stdout, errors on stderr. Exit codes: 0 done, 1 the
command failed, 2 usage error (unknown command, argument or flag), 3 the
audit found a violation (or merchant check-origins an invalid origin).

--local talks to the stack of 'make dev' (it reads .paydev/stack.json);
otherwise --stack names a deployed CloudFormation stack and the default AWS
credential chain is used.`

type globals struct {
	local    bool
	stateDir string
	stack    string
	region   string
}

// commandTimeout bounds every command that talks to the stack, except the
// long-running ones (audit has its own --timeout, webhooks listen runs until
// Ctrl-C).
const commandTimeout = 60 * time.Second

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	return report(cmd, err, stderr)
}

// newRoot builds the command tree. Every command refuses arguments and flags
// it does not know (strict), so no mistyped invocation ever reaches the stack.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "payctl",
		Short: "Operate the Payment Request Service",
		Long:  rootLong,
		Example: `  payctl --local merchant list
  payctl --local merchant create --name "Acme Books" --notify-url https://acme.example/hooks
  payctl --local webhooks listen --forward-to http://localhost:8080/hooks
  payctl --local trigger approved
  payctl --stack payreq-sandbox audit`,
		SilenceErrors: true, // report prints them, with the exit code
		SilenceUsage:  true, // a failed call is not a usage problem
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.BoolVar(&g.local, "local", false, "use the local stack of 'make dev' (reads STATE-DIR/stack.json)")
	pf.StringVar(&g.stateDir, "state-dir", ".paydev", "local stack state directory")
	pf.StringVar(&g.stack, "stack", "payreq-sandbox", "deployed stack name; AWS credentials from the default chain")
	pf.StringVar(&g.region, "region", "", "AWS region of the deployed stack")

	root.AddCommand(merchantCmd(g), connectorsCmd(g), routingCmd(g), sftpCmd(g), batchCmd(g), deliveriesCmd(g), dlqCmd(g), auditCmd(g), retentionCmd(g),
		webhooksCmd(g), triggerCmd(g), versionCmd())
	root.SetHelpCommand(helpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	completionExamples(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err.Error()) })
	strict(root)
	return root
}

// completionExamples gives cobra's completion commands a usage example each,
// like every other command.
func completionExamples(root *cobra.Command) {
	examples := map[string]string{
		"completion": "  payctl completion bash > ~/.local/share/bash-completion/completions/payctl\n  payctl completion zsh > \"${fpath[1]}/_payctl\"",
		"bash":       "  payctl completion bash > ~/.local/share/bash-completion/completions/payctl\n  source <(payctl completion bash)",
		"zsh":        "  payctl completion zsh > \"${fpath[1]}/_payctl\"",
		"fish":       "  payctl completion fish > ~/.config/fish/completions/payctl.fish",
		"powershell": "  payctl completion powershell | Out-String | Invoke-Expression",
	}
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Example = examples["completion"]
		for _, sub := range c.Commands() {
			sub.Example = examples[sub.Name()]
		}
	}
}

// strict makes every command of the tree refuse what it does not know: a
// command without its own argument rule takes none; a group run without a
// subcommand is a usage error (cobra would print help and exit 0); and every
// argument error is a usage error (exit 2).
func strict(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strict(sub)
	}
	if c.Name() == cobra.ShellCompRequestCmd || c.Name() == cobra.ShellCompNoDescRequestCmd {
		return // the completion protocol itself: its arguments are the words being completed
	}
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	args := c.Args
	if args == nil {
		args = cobra.NoArgs
	}
	c.Args = func(cmd *cobra.Command, a []string) error {
		if err := args(cmd, a); err != nil {
			if cmd.HasAvailableSubCommands() && len(a) > 0 {
				if s := cmd.SuggestionsFor(a[0]); len(s) > 0 {
					return usageError(fmt.Sprintf("%v (did you mean %q?)", err, s[0]))
				}
			}
			return usageError(err.Error())
		}
		return nil
	}
	if !c.Runnable() && c.HasSubCommands() {
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			return usageError(fmt.Sprintf("%s needs a command: %s", cmd.CommandPath(), strings.Join(names, ", ")))
		}
	}
}

// helpCmd replaces cobra's, which prints the root usage and exits 0 for an
// unknown topic.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "help prints the help of a command: the same as the command with --help.",
		Example: `  payctl help
  payctl help dlq redrive`,
		Args: cobra.ArbitraryArgs,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(s.Name(), s.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usageError(fmt.Sprintf("unknown help topic %q", strings.Join(args, " ")))
			}
			cmd.InitDefaultHelpFlag() // listed as with --help
			return cmd.Help()
		},
	}
}

// report prints err and returns the exit code: 2 for usage errors, the
// code of an exitError, else 1.
func report(cmd *cobra.Command, err error, stderr io.Writer) int {
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "payctl:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "payctl:", err)
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		path := "payctl"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		return 2
	}
	return 1
}

// isCobraUsage recognises the few usage errors cobra returns before any of
// our hooks run (e.g. an unknown command under a command with subcommands).
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "unknown flag") || strings.HasPrefix(s, "unknown shorthand flag")
}

type usageError string

func (e usageError) Error() string { return string(e) }

// exitError ends a command with a given exit code (audit's 3).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// printJSON writes v indented, as every command's result.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonCommand runs fn with the common timeout and prints its result as JSON.
func jsonCommand(fn func(ctx context.Context) (any, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), commandTimeout)
		defer cancel()
		out, err := fn(ctx)
		if err != nil {
			return err
		}
		return printJSON(cmd.OutOrStdout(), out)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
