// Package awsconfig loads the AWS SDK configuration the same way for Lambda,
// the local stack, payctl and tests. Endpoints come from the SDK's own
// variables (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, ...), so pointing
// everything at LocalStack or the local emulators is one variable.
package awsconfig

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// CallTimeout bounds every single AWS HTTP call (retries get their own).
const CallTimeout = 5 * time.Second

// MaxIdleConnsPerHost is how many idle connections to one endpoint the SDK
// client keeps. Its default (10) is below the concurrency of one client
// shared by the batch's row workers or by every function of the local stack
// (pollers, notifier, payments): connections beyond it were closed after each
// burst and opened again on the next call, a TCP set-up in the request path.
const MaxIdleConnsPerHost = 128

// Load builds the SDK configuration. It makes no network call: credentials
// are resolved lazily on the first request, which keeps Lambda start-up fast.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	httpClient := awshttp.NewBuildableClient().WithTimeout(CallTimeout).WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = max(tr.MaxIdleConns, 2*MaxIdleConnsPerHost)
		tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	})
	opts := append([]func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRetryMaxAttempts(3),
	}, optFns...)
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}
