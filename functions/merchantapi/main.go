// Command merchantapi is the Lambda function serving the merchant API.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/merchantapiwire"
)

// main only starts the handler merchantapiwire.MerchantAPILambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := merchantapiwire.MerchantAPILambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
