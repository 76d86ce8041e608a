// Command payments is the Lambda function serving the host-to-host payment operations and lookups.
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
	h, err := wire.Payments(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
