package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/safehttp"
	"github.com/payreq/payreq/internal/sandboxworker"
	"github.com/payreq/payreq/internal/sig"
)

// Sandbox wires SandboxFunction, the simulated provider's asynchronous side.
// Callbacks go to PUBLIC_BASE_URL when set (custom domain; the local stack),
// else to SANDBOX_CALLBACK_BASE_URL (the HTTP API's own domain).
func Sandbox(ctx context.Context, getenv config.Getenv, opts Options) (SQSHandler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire sandbox: %w", err)
	}
	base := b.cfg.PublicBaseURL
	if base == "" {
		base = getenv("SANDBOX_CALLBACK_BASE_URL")
	}
	queueURL := getenv("SANDBOX_QUEUE_URL")
	if base == "" || queueURL == "" {
		return nil, errors.New("wire sandbox: PUBLIC_BASE_URL or SANDBOX_CALLBACK_BASE_URL, and SANDBOX_QUEUE_URL, are required")
	}
	key, err := sig.DeriveKey(b.cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("wire sandbox: SEAL_KEY: %w", err)
	}
	// The SSRF-safe client: no redirects (following one would send the
	// signed body elsewhere), public addresses only outside the local stack.
	client := safehttp.NewClient(safehttp.Options{Timeout: 5 * time.Second, AllowPrivate: b.cfg.Local, RequireHTTPS: !b.cfg.Local})
	return sandboxworker.New(sandboxworker.Deps{
		BaseURL: base, Key: key, Client: client,
		Queue: queue.New(sqs.NewFromConfig(b.aws)), QueueURL: queueURL,
		Log:      b.cfg.NewLogger().With("function", "sandbox"),
		Provider: sandbox.New(sandbox.Options{Ledger: b.store}),
	}), nil
}
