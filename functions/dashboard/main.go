// Command dashboard is the Lambda function serving the merchant dashboard.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/dashboardwire"
)

// main only starts the handler dashboardwire.DashboardLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := dashboardwire.DashboardLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
