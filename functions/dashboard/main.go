// Command dashboard is the Lambda function serving the merchant dashboard.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
)

// main only starts the handler wire.DashboardLambda builds: the same value the
// local stack and the tests invoke.
func main() {
	h, err := wire.DashboardLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
