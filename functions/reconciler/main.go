// Command reconciler is the scheduled Lambda function that re-enqueues
// notifications left in the outbox.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
)

func main() {
	run, err := wire.Reconciler(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(run)
}
