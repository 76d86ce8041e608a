// Command sftpauth is the custom identity provider of the AWS Transfer
// Family SFTP server: it decides merchants' SFTP logins.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/sftpauthwire"
)

// main only starts the handler sftpauthwire.SFTPAuthLambda builds: the same
// value the local stack and the tests invoke.
func main() {
	h, err := sftpauthwire.SFTPAuthLambda(context.Background(), os.Getenv, wire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
