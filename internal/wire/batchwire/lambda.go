package batchwire

import (
	"context"
	"encoding/json"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/wire"
)

// BatchLambda is BatchFunction's Lambda handler: both triggers (S3
// ObjectCreated events and continuation messages) arrive here, as on AWS.
func BatchLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (func(context.Context, json.RawMessage) (any, error), error) {
	p, err := Batch(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return p.Handle, nil
}
