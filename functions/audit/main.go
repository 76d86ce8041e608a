// Command audit is the invariant audit's Lambda function: the audited
// tables' stream batches and its every-minute schedule.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/auditwire"
)

// main only starts the handler auditwire.AuditLambda builds: the same value
// the local stack and the tests invoke.
func main() {
	h, err := auditwire.AuditLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
