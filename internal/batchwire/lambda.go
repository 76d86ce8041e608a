package batchwire

import (
	"context"
	"encoding/json"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/sftpauth"
)

// BatchLambda is BatchFunction's Lambda handler: both triggers (S3
// ObjectCreated events and continuation messages) arrive here, as on AWS.
func BatchLambda(ctx context.Context, getenv config.Getenv, opts Options) (func(context.Context, json.RawMessage) (any, error), error) {
	p, err := Batch(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return p.Handle, nil
}

// SFTPAuthLambda is SftpAuthFunction's Lambda handler: Transfer Family's
// identity provider events.
func SFTPAuthLambda(ctx context.Context, getenv config.Getenv, opts Options) (func(context.Context, sftpauth.Event) (sftpauth.Response, error), error) {
	a, err := SFTPAuth(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return a.Authenticate, nil
}
