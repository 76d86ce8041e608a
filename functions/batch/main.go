// Command batch is the Lambda function processing batch payment files: the
// S3 ObjectCreated event of an upload to incoming/, and the continuation
// messages of files processed across several invocations.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/batchwire"
)

// main only starts the handler batchwire.BatchLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := batchwire.BatchLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
