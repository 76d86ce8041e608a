// Command notifier is the Lambda function delivering merchant notifications
// from the notifications queue.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
)

func main() {
	h, err := wire.Notifier(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
