// Command payctl is the operators' CLI: merchants and their keys, SFTP
// users, batch files, deliveries, the dead-letter queue, the audit, and the
// sandbox tools of an integration (webhooks listen, trigger). JSON on
// stdout, errors on stderr, non-zero exit on failure. --local talks to the stack of `make dev`;
// otherwise --stack names a deployed CloudFormation stack and the default AWS
// credential chain is used.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
