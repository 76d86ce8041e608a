// Package wire builds each function's handler from its environment: the one
// place where configuration, AWS clients and handlers meet. main.go files and
// the local stack call these, and tests run them against the emulators, so the
// wiring that ships is the wiring that is tested.
//
// internal/batchwire does the same for the batch and SFTP identity functions.
package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/ratelimit"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/secrets"
	"github.com/payreq/payreq/internal/sig"
)

// Options let tests observe or replace the AWS configuration.
type Options struct {
	// AWSConfig, when set, is used instead of loading one (tests add
	// call-counting middleware to it).
	AWSConfig *aws.Config
}

type base struct {
	cfg    config.Config
	aws    aws.Config
	store  *dynamo.Store
	sealer *seal.Sealer
}

func newBase(ctx context.Context, getenv config.Getenv, opts Options) (*base, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	var awsCfg aws.Config
	if opts.AWSConfig != nil {
		awsCfg = *opts.AWSConfig
	} else if awsCfg, err = awsconfig.Load(ctx); err != nil {
		return nil, err
	}
	if cfg.SealKey == "" {
		if cfg.SealKey, err = secrets.String(ctx, awsCfg, cfg.SealKeySecretARN); err != nil {
			return nil, fmt.Errorf("SEAL_KEY_SECRET_ARN: %w", err)
		}
	}
	sealer, err := seal.New(cfg.SealKey)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), dynamo.Tables(cfg.Tables))
	return &base{cfg: cfg, aws: awsCfg, store: store, sealer: sealer}, nil
}

func isNotFound(err error) bool { return errors.Is(err, dynamo.ErrNotFound) }

// merchantGuard is what every merchant-server route goes through: API-key
// authentication, then the shared per-merchant rate limit, then
// Idempotency-Key handling (POST only). Wrong keys never reach the counter.
func (b *base) merchantGuard(getenv config.Getenv, auth *apikey.Authenticator) (func(http.Handler) http.Handler, error) {
	limiter := ratelimit.New(b.store)
	// SEAL_KEY was validated by newBase, so the derivation cannot fail.
	fpKey, _ := sig.DeriveKey(b.cfg.SealKey, idempotency.FingerprintKeyInfo)
	idem := idempotency.New(b.store, fpKey, b.sealer)
	if v := getenv("IDEMPOTENCY_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("IDEMPOTENCY_LEASE: %q is not a duration", v)
		}
		idem.Lease = d
	}
	return func(route http.Handler) http.Handler {
		return auth.Require(limiter.Middleware(idem.Middleware(route)))
	}, nil
}

// SQSHandler is a Lambda SQS handler with partial batch responses
// (FunctionResponseTypes: ReportBatchItemFailures).
type SQSHandler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
