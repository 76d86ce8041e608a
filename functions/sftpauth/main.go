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

func main() {
	a, err := batchwire.SFTPAuth(context.Background(), os.Getenv, batchwire.Options{})
	if err != nil {
		slog.Error("start-up failed", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(a.Authenticate)
}
