// Command reconciler is the scheduled Lambda function that re-enqueues
// notifications left in the outbox.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/reconcilerwire"
)

// main only starts the handler reconcilerwire.ReconcilerLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := reconcilerwire.ReconcilerLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
