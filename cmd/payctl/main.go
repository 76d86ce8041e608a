// Command payctl is the operators' CLI: merchants and their keys (later:
// SFTP users, deliveries, dead-letter queue). JSON on stdout, errors on
// stderr, non-zero exit on failure. --local talks to the stack of `make dev`;
// otherwise --stack names a deployed CloudFormation stack and the default AWS
// credential chain is used.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
