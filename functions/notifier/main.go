// Command notifier is the Lambda function delivering merchant notifications
// from the notifications queue.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/notifierwire"
)

// main only starts the handler notifierwire.NotifierLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := notifierwire.NotifierLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
