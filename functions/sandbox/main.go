// Command sandbox is the Lambda function of the sandbox provider's
// asynchronous side: it delivers queued sandbox results as signed callbacks.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/sandboxwire"
)

// main only starts the handler sandboxwire.SandboxLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := sandboxwire.SandboxLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
