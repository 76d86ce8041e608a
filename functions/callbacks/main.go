// Command callbacks is the Lambda function receiving provider and 3-D Secure callbacks.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/callbackswire"
)

// main only starts the handler callbackswire.CallbacksLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := callbackswire.CallbacksLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
