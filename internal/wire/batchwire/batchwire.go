// Package batchwire builds BatchFunction: batch payment files from S3, the
// continuation queue, and the payments core with coalesced notification
// sends. Its share of the acquirer's request budget is computed here
// (share.go).
package batchwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/currency"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// Batch builds BatchFunction's handler (both of its triggers: the S3 upload
// event and the continuation queue).
func Batch(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ *batchproc.Processor, err error) {
	defer wire.Annotate(&err, "batch")
	// Sealed: the row fingerprints are keyed with the seal key, which on
	// AWS is read from its secret.
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	cfg := batchproc.Config{Bucket: getenv("BATCH_BUCKET"), ContinueQueueURL: getenv("BATCH_CONTINUE_QUEUE_URL")}
	if cfg.Bucket == "" || cfg.ContinueQueueURL == "" {
		return nil, errors.New("wire batch: BATCH_BUCKET and BATCH_CONTINUE_QUEUE_URL are required")
	}
	for name, d := range map[string]*time.Duration{"BATCH_TIME_RESERVE": &cfg.TimeReserve, "BATCH_ROW_LEASE": &cfg.RowLease} {
		if v := getenv(name); v != "" {
			if *d, err = time.ParseDuration(v); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	for name, n := range map[string]*int{"BATCH_MAX_LINES_PER_RUN": &cfg.MaxLinesPerRun, "BATCH_CONCURRENCY": &cfg.Concurrency,
		"BATCH_PART_SIZE": &cfg.PartSize} {
		if v := getenv(name); v != "" {
			if *n, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if err := shareOfAcquirer(getenv, &cfg); err != nil {
		return nil, err
	}
	svc, err := paymentService(b, getenv)
	if err != nil {
		return nil, err
	}
	return batchproc.New(cfg, batchproc.Deps{
		Store:      b.Store,
		Objects:    s3store.New(s3store.NewClient(b.AWS), cfg.Bucket),
		Charger:    &batchproc.PaymentsCharger{Service: svc, Store: b.Store},
		Queue:      queue.New(sqs.NewFromConfig(b.AWS)),
		Currencies: currency.Decimals,
		Log:        b.Logger("batch"),
		// Keys the fingerprints of rows without a Reference ID.
		FingerprintKey: batchproc.FingerprintKeyFrom(b.Cfg.SealKey),
	})
}

// PaymentService is the payments core as the batch function builds it: the
// same construction as every other function (paywire.Service), except
// that its notification sends are coalesced (queue.Coalescer): rows settle
// many at a time, and their sends share SendMessageBatch calls.
func PaymentService(ctx context.Context, getenv config.Getenv, opts wire.Options) (*paycore.Service, error) {
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	return paymentService(b, getenv)
}

func paymentService(b *wire.Base, getenv config.Getenv) (*paycore.Service, error) {
	svc, err := paywire.Service(b, getenv, "batch")
	if err != nil {
		return nil, err
	}
	svc.Queue = queue.NewCoalescer(sqs.NewFromConfig(b.AWS))
	return svc, nil
}

var _ batchproc.Objects = (*s3store.Store)(nil)
