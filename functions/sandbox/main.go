// Command sandbox is the Lambda function of the sandbox provider's
// asynchronous side: it delivers queued sandbox results as signed callbacks.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
)

func main() {
	h, err := wire.Sandbox(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
