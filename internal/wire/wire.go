// Package wire builds each function's handler from its environment: the one
// place where configuration, AWS clients and handlers meet. main.go files and
// the local stack call these, and tests run them against the emulators, so the
// wiring that ships is the wiring that is tested.
package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/seal"
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
	sealer, err := seal.New(cfg.SealKey)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	var awsCfg aws.Config
	if opts.AWSConfig != nil {
		awsCfg = *opts.AWSConfig
	} else if awsCfg, err = awsconfig.Load(ctx); err != nil {
		return nil, err
	}
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.Tables)
	return &base{cfg: cfg, aws: awsCfg, store: store, sealer: sealer}, nil
}

func isNotFound(err error) bool { return errors.Is(err, dynamo.ErrNotFound) }

// MerchantAPI wires MerchantApiFunction.
func MerchantAPI(ctx context.Context, getenv config.Getenv, opts Options) (http.Handler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire merchant API: %w", err)
	}
	return merchantapi.New(merchantapi.Deps{
		Store:         b.store,
		Auth:          apikey.New(b.store, isNotFound),
		Log:           b.cfg.NewLogger().With("function", "merchantapi"),
		PublicBaseURL: b.cfg.PublicBaseURL,
		AllowHTTPURLs: b.cfg.Local,
	}), nil
}

// HTTPFunction is an HTTP-triggered function: its routes and its wiring.
type HTTPFunction struct {
	Routes func() []string
	Build  func(ctx context.Context, getenv config.Getenv, opts Options) (http.Handler, error)
}

// HTTP maps template logical ids to functions. The local stack mounts these
// on the template's routes, and a test checks that both sides agree.
var HTTP = map[string]HTTPFunction{
	"MerchantApiFunction": {Routes: merchantapi.Routes, Build: MerchantAPI},
}
