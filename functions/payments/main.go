// Command payments is the Lambda function serving the host-to-host payment operations and lookups.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paymentswire"
)

// main only starts the handler paymentswire.PaymentsLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := paymentswire.PaymentsLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
