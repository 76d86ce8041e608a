// Command callbacks is the Lambda function receiving provider and 3-D Secure callbacks.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/payreq/payreq/internal/wire"
)

func main() {
	h, err := wire.Callbacks(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
