// Command sftpauth is the custom identity provider of the AWS Transfer
// Family SFTP server: it decides merchants' SFTP logins.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/batchwire"
)

// main only starts the handler batchwire.SFTPAuthLambda builds: the same value the local
// stack and the tests invoke.
func main() {
	h, err := batchwire.SFTPAuthLambda(context.Background(), os.Getenv, batchwire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
