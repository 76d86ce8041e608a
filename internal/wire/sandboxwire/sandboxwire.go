// Package sandboxwire builds SandboxFunction, the simulated provider's
// asynchronous side: it delivers queued sandbox results as signed callbacks.
package sandboxwire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/provider/sandbox/worker"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/safehttp"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/wire"
)

// SandboxLambda is SandboxFunction's Lambda handler (SQS, partial batch responses).
func SandboxLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.SQSHandler, error) {
	return Sandbox(ctx, getenv, opts)
}

// Sandbox wires SandboxFunction, the simulated provider's asynchronous side.
// Callbacks go to PUBLIC_BASE_URL when set (custom domain; the local stack),
// else to SANDBOX_CALLBACK_BASE_URL (the HTTP API's own domain).
func Sandbox(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ wire.SQSHandler, err error) {
	defer wire.Annotate(&err, "sandbox")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	base := b.Cfg.PublicBaseURL
	if base == "" {
		base = getenv("SANDBOX_CALLBACK_BASE_URL")
	}
	queueURL := getenv("SANDBOX_QUEUE_URL")
	if base == "" || queueURL == "" {
		return nil, errors.New("wire sandbox: PUBLIC_BASE_URL or SANDBOX_CALLBACK_BASE_URL, and SANDBOX_QUEUE_URL, are required")
	}
	key, err := sig.DeriveKey(b.Cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	// The SSRF-safe client: no redirects (following one would send the
	// signed body elsewhere), public addresses only outside the local stack.
	client := safehttp.NewClient(safehttp.Options{Timeout: 5 * time.Second, AllowPrivate: b.Cfg.Local, RequireHTTPS: !b.Cfg.Local})
	return worker.New(worker.Deps{
		BaseURL: base, Key: key, Client: client,
		Queue: queue.New(sqs.NewFromConfig(b.AWS)), QueueURL: queueURL,
		Log:      b.Logger("sandbox"),
		Provider: sandbox.New(sandbox.Options{Ledger: b.Store}),
	}), nil
}

var _ worker.Sender = (*queue.Client)(nil)
