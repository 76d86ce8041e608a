// Package wire holds what every function's set-up shares: its
// configuration, AWS configuration, store, sealer and logger (Base), and
// the Lambda handler shapes. It imports no handler and no provider.
//
// Each function is built by its own sub-package, internal/wire/<function>wire,
// which imports only that function's parts: a Go binary links every package
// it imports (package init functions and globals included), so one package
// building every function would put every dependency — stripe-go, the SSH
// key parser, the QR encoder — into every binary. paywire builds the
// payments core and selects the provider (sandbox or Stripe) for the
// functions that take or look up payments; guardwire is the merchant
// servers' authentication, rate limit and idempotency chain.
//
// main.go files and the local stack call the same builders, and tests run
// them against the emulators, so the wiring that ships is the wiring that
// is tested.
package wire

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/secrets"
)

// Options let tests observe or replace the AWS configuration.
type Options struct {
	// AWSConfig, when set, is used instead of loading one (tests add
	// call-counting middleware to it).
	AWSConfig *aws.Config
}

// Base is a function's shared set-up.
type Base struct {
	Cfg   config.Config
	AWS   aws.Config
	Store *dynamo.Store
	// Sealer is nil in a Base from Load (see LoadSealed).
	Sealer *seal.Sealer
}

// Load reads the configuration and builds the AWS configuration and the
// store. It does not read the seal key's secret: a function that never
// seals or signs (the SFTP identity provider) needs no access to it.
func Load(ctx context.Context, getenv config.Getenv, opts Options) (*Base, error) {
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
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), dynamo.Tables(cfg.Tables))
	return &Base{Cfg: cfg, AWS: awsCfg, Store: store}, nil
}

// LoadSealed is Load plus the seal key: on AWS it is read from
// SEAL_KEY_SECRET_ARN once per cold start, so Cfg.SealKey is set and
// Sealer is ready afterwards.
func LoadSealed(ctx context.Context, getenv config.Getenv, opts Options) (*Base, error) {
	b, err := Load(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	if b.Cfg.SealKey == "" {
		if b.Cfg.SealKey, err = secrets.String(ctx, b.AWS, b.Cfg.SealKeySecretARN); err != nil {
			return nil, fmt.Errorf("SEAL_KEY_SECRET_ARN: %w", err)
		}
	}
	if b.Sealer, err = seal.New(b.Cfg.SealKey); err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return b, nil
}

// Annotate prefixes a builder's error with what it was wiring, once for
// all its steps: `defer wire.Annotate(&err, "checkout")`.
func Annotate(err *error, what string) {
	if *err != nil {
		*err = fmt.Errorf("wire %s: %w", what, *err)
	}
}

// Logger is the function's logger, each line tagged with its name.
func (b *Base) Logger(function string) *slog.Logger {
	return b.Cfg.NewLogger().With("function", function)
}

// Duration reads an optional non-negative Go duration ("5s", "200ms");
// empty is 0.
func Duration(getenv config.Getenv, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: %q is not a duration", name, v)
	}
	return d, nil
}

// The Lambda handler shapes. Each function's XLambda returns the exact value
// its functions/<name>/main.go passes to lambda.Start, adapter included. The
// local stack and the tests invoke these same values through
// lambda.NewHandler(h).Invoke with JSON event bytes, as the runtime does, so
// no caller wraps a handler in its own way.

// HTTPLambda is the handler of an HTTP API function (payload format 2.0).
type HTTPLambda = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// SQSHandler is a Lambda SQS handler with partial batch responses
// (FunctionResponseTypes: ReportBatchItemFailures).
type SQSHandler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// ScheduledLambda is the handler of an EventBridge schedule.
type ScheduledLambda = func(context.Context, events.EventBridgeEvent) error
