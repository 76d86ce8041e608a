// Package batchwire builds the batch function and the SFTP identity
// provider from their environment (the S3-facing functions; the payments
// core comes from wire.PaymentService). functions/batch, functions/sftpauth
// and the local stack call these builders directly.
//
// It differs from internal/wire only in which functions it builds: the
// S3-facing ones here, the HTTP, queue and scheduled ones there.
package batchwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payments"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/wire"
)

// Options let tests observe or replace the AWS configuration.
type Options struct {
	AWSConfig *aws.Config
}

type base struct {
	cfg   config.Config
	aws   aws.Config
	store *dynamo.Store
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
	return &base{cfg: cfg, aws: awsCfg, store: dynamo.New(dynamodb.NewFromConfig(awsCfg), dynamo.Tables(cfg.Tables))}, nil
}

// Batch builds BatchFunction's handler (both of its triggers: the S3 upload
// event and the continuation queue).
func Batch(ctx context.Context, getenv config.Getenv, opts Options) (*batchproc.Processor, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire batch: %w", err)
	}
	cfg := batchproc.Config{Bucket: getenv("BATCH_BUCKET"), ContinueQueueURL: getenv("BATCH_CONTINUE_QUEUE_URL")}
	if cfg.Bucket == "" || cfg.ContinueQueueURL == "" {
		return nil, errors.New("wire batch: BATCH_BUCKET and BATCH_CONTINUE_QUEUE_URL are required")
	}
	for name, d := range map[string]*time.Duration{"BATCH_TIME_RESERVE": &cfg.TimeReserve, "BATCH_ROW_LEASE": &cfg.RowLease} {
		if v := getenv(name); v != "" {
			if *d, err = time.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("wire batch: %s: %w", name, err)
			}
		}
	}
	for name, n := range map[string]*int{"BATCH_MAX_LINES_PER_RUN": &cfg.MaxLinesPerRun, "BATCH_CONCURRENCY": &cfg.Concurrency,
		"BATCH_PART_SIZE": &cfg.PartSize} {
		if v := getenv(name); v != "" {
			if *n, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("wire batch: %s: %w", name, err)
			}
		}
	}
	if err := shareOfAcquirer(getenv, &cfg); err != nil {
		return nil, fmt.Errorf("wire batch: %w", err)
	}
	svc, err := b.paymentService(ctx, getenv)
	if err != nil {
		return nil, fmt.Errorf("wire batch: %w", err)
	}
	return batchproc.New(cfg, batchproc.Deps{
		Store:      b.store,
		Objects:    s3store.New(s3store.NewClient(b.aws), cfg.Bucket),
		Charger:    &batchproc.PaymentsCharger{Service: svc, Store: b.store},
		Queue:      queue.New(sqs.NewFromConfig(b.aws)),
		Currencies: currency.Decimals,
		Log:        b.cfg.NewLogger().With("function", "batch"),
		// Keys the fingerprints of rows without a Reference ID.
		FingerprintKey: batchproc.FingerprintKeyFrom(b.cfg.SealKey),
	})
}

// PaymentService is the payments core as the batch function builds it: the
// same construction as every other function (wire.PaymentService), except
// that its notification sends are coalesced (queue.Coalescer): rows settle
// many at a time, and their sends share SendMessageBatch calls.
func PaymentService(ctx context.Context, getenv config.Getenv, opts Options) (*payments.Service, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return b.paymentService(ctx, getenv)
}

func (b *base) paymentService(ctx context.Context, getenv config.Getenv) (*payments.Service, error) {
	svc, err := wire.PaymentService(ctx, getenv, wire.Options{AWSConfig: &b.aws})
	if err != nil {
		return nil, err
	}
	svc.Queue = queue.NewCoalescer(sqs.NewFromConfig(b.aws))
	return svc, nil
}
