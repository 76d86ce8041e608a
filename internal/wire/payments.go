package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/payments"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/sig"
)

// Payments wires PaymentsFunction.
func Payments(ctx context.Context, getenv config.Getenv, opts Options) (http.Handler, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire payments: %w", err)
	}
	svc, err := b.paymentService(getenv, "payments")
	if err != nil {
		return nil, fmt.Errorf("wire payments: %w", err)
	}
	auth := apikey.New(b.store, isNotFound)
	guard, err := b.merchantGuard(getenv, auth)
	if err != nil {
		return nil, fmt.Errorf("wire payments: %w", err)
	}
	return paymentsapi.NewHandler(paymentsapi.HandlerDeps{
		Service:       svc,
		Guard:         guard,
		Log:           b.cfg.NewLogger().With("function", "payments"),
		PublicBaseURL: b.cfg.PublicBaseURL,
		AllowHTTPURLs: b.cfg.Local,
	}), nil
}

// PaymentService builds the payments core for any function that takes
// payments (payments, callbacks, hosted checkout, batch).
func PaymentService(ctx context.Context, getenv config.Getenv, opts Options) (*payments.Service, error) {
	b, err := newBase(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire payment service: %w", err)
	}
	return b.paymentService(getenv, "payments")
}

// Environment of the simulated provider. Durations use Go syntax ("5s",
// "200ms"); empty means the sandbox defaults. The template sets them from
// its parameters (tests and the local stack shorten the delays there).
const (
	envSandboxQRDelay         = "SANDBOX_QR_DELAY"
	envSandboxUPIDelay        = "SANDBOX_UPI_DELAY"
	envSandboxUPICollect      = "SANDBOX_UPI_COLLECT_WINDOW"
	envThreeDSChallengeWindow = "THREEDS_CHALLENGE_WINDOW"
	envPendingGrace           = "PAYMENT_PENDING_GRACE"
)

func durationEnv(getenv config.Getenv, name string) (time.Duration, error) {
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

func (b *base) paymentService(getenv config.Getenv, function string) (*payments.Service, error) {
	if b.cfg.Tables.Transactions == "" {
		return nil, errors.New("missing environment variable TRANSACTIONS_TABLE")
	}
	callbackKey, err := sig.DeriveKey(b.cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	threeDSKey, err := sig.DeriveKey(b.cfg.SealKey, sig.InfoThreeDSRedirect)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	var d [5]time.Duration
	for i, name := range []string{envSandboxQRDelay, envSandboxUPIDelay, envSandboxUPICollect, envThreeDSChallengeWindow, envPendingGrace} {
		if d[i], err = durationEnv(getenv, name); err != nil {
			return nil, err
		}
	}
	deps := payments.Deps{
		Store: b.store, ThreeDSKey: threeDSKey, CallbackKey: callbackKey,
		Queue: queue.New(sqs.NewFromConfig(b.aws)), NotificationsQueueURL: getenv("NOTIFICATIONS_QUEUE_URL"),
		BatchNotificationsQueueURL: getenv("BATCH_NOTIFICATIONS_QUEUE_URL"),
		Log:                        b.cfg.NewLogger().With("function", function),
		ChallengeWindow:            d[3], PendingGrace: d[4],
	}
	if b.cfg.Sandbox() {
		queueURL := getenv("SANDBOX_QUEUE_URL")
		if queueURL == "" {
			return nil, errors.New("missing environment variable SANDBOX_QUEUE_URL")
		}
		deps.Provider = sandbox.New(sandbox.Options{QRDelay: d[0], UPIDelay: d[1], UPICollectWindow: d[2],
			ChallengeWindow: d[3], Ledger: b.store})
		deps.Sandbox, deps.SandboxQueueURL = true, queueURL
	} else {
		deps.Provider = noAcquirer{}
	}
	var svc *payments.Service
	if !b.cfg.Sandbox() {
		// Production: the Stripe connector when a key is configured.
		if s, ok, err := b.stripeConfig(getenv); err != nil {
			return nil, err
		} else if ok {
			if deps.Provider, err = b.stripeProvider(getenv, s, &svc); err != nil {
				return nil, err
			}
		}
	}
	svc = payments.New(deps)
	return svc, nil
}

// noAcquirer is the provider of a production stage until a real acquirer
// adapter is configured: every attempt fails like a bank system error.
type noAcquirer struct{}

var errNoAcquirer = errors.New("no acquirer adapter is configured for the production stage")

func (noAcquirer) Charge(context.Context, provider.ChargeRequest) (provider.Outcome, error) {
	return provider.Outcome{}, errNoAcquirer
}

func (noAcquirer) CompleteChallenge(context.Context, provider.ChallengeResult) (provider.Outcome, error) {
	return provider.Outcome{}, errNoAcquirer
}

func (noAcquirer) Refund(context.Context, provider.RefundRequest) (provider.RefundOutcome, error) {
	return provider.RefundOutcome{}, errNoAcquirer
}

// Lookup finds nothing: noAcquirer never charges.
func (noAcquirer) Lookup(context.Context, string) (provider.Outcome, error) {
	return provider.Outcome{}, provider.ErrUnknownReference
}
