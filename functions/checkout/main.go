// Command checkout is the Lambda function serving the hosted payment page, its API and PayCheckout.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/checkoutwire"
)

// main only starts the handler checkoutwire.CheckoutLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := checkoutwire.CheckoutLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
