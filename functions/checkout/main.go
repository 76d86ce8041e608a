// Command checkout is the Lambda function serving the hosted payment page, its API and PayCheckout.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/lambdahttp"
	"github.com/payreq/payreq/internal/wire"
)

func main() {
	h, err := wire.Checkout(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	// lambdahttp is the api-proxy adapter with header values kept intact.
	lambda.Start(lambdahttp.NewV2(h).ProxyWithContext)
}
