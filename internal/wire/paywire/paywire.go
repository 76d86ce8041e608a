// Package paywire builds the payments core (paycore.Service) and selects
// its provider: the sandbox simulator, the Stripe or the Adyen connector,
// or none. Every
// function that takes, refunds, recovers or checks payments imports it
// (merchant API, payments, callbacks, checkout, dashboard, reconciler,
// batch); the notifier, sandbox and SFTP identity functions do not, so
// stripe-go is not in their binaries.
package paywire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/connector"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	stripeprov "github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/wire"
)

// PaymentService builds the payments core from the environment alone (tests).
func PaymentService(ctx context.Context, getenv config.Getenv, opts wire.Options) (*paycore.Service, error) {
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("wire payment service: %w", err)
	}
	return Service(b, getenv, "payments")
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

// Service builds the payments core of function on b (from wire.LoadSealed).
func Service(b *wire.Base, getenv config.Getenv, function string) (*paycore.Service, error) {
	if b.Cfg.Tables.Transactions == "" {
		return nil, errors.New("missing environment variable TRANSACTIONS_TABLE")
	}
	callbackKey, err := sig.DeriveKey(b.Cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	threeDSKey, err := sig.DeriveKey(b.Cfg.SealKey, sig.InfoThreeDSRedirect)
	if err != nil {
		return nil, fmt.Errorf("SEAL_KEY: %w", err)
	}
	var d [5]time.Duration
	for i, name := range []string{envSandboxQRDelay, envSandboxUPIDelay, envSandboxUPICollect, envThreeDSChallengeWindow, envPendingGrace} {
		if d[i], err = wire.Duration(getenv, name); err != nil {
			return nil, err
		}
	}
	deps := paycore.Deps{
		Store: b.Store, ThreeDSKey: threeDSKey, CallbackKey: callbackKey,
		Queue: queue.New(sqs.NewFromConfig(b.AWS)), NotificationsQueueURL: getenv("NOTIFICATIONS_QUEUE_URL"),
		BatchNotificationsQueueURL: getenv("BATCH_NOTIFICATIONS_QUEUE_URL"),
		Log:                        b.Logger(function),
		ChallengeWindow:            d[3], PendingGrace: d[4],
	}
	if b.Cfg.Sandbox() {
		queueURL := getenv("SANDBOX_QUEUE_URL")
		if queueURL == "" {
			return nil, errors.New("missing environment variable SANDBOX_QUEUE_URL")
		}
		deps.Sandbox, deps.SandboxQueueURL = true, queueURL
	}
	if v := getenv("CIRCUIT_BREAKER_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("CIRCUIT_BREAKER_THRESHOLD %q: want a whole number of at least 1", v)
		}
		deps.Breaker = connector.NewBreaker(nil)
		deps.Breaker.Threshold = n
	}
	var svc *paycore.Service
	if deps.Connectors, err = connectors(b, getenv, d, &svc); err != nil {
		return nil, err
	}
	if !b.Cfg.Sandbox() {
		deps.Accounts = ownAccounts(b, getenv, &svc)
	}
	svc = paycore.New(deps)
	return svc, nil
}

// ownAccounts is how a production stage charges through merchants' own
// accounts: their sealed credentials opened with the stage's sealer, their
// Stripe clients sharing the platform's return URL and key prefix, reached
// where AccountAPIsFromEnv says (a local stack: its test doubles).
func ownAccounts(b *wire.Base, getenv config.Getenv, svc **paycore.Service) *OwnAccounts {
	o := &OwnAccounts{Store: b.Store, Sealer: b.Sealer, APIs: AccountAPIsFromEnv(getenv, b.Cfg.Local),
		Stripe: stripeprov.Options{KeyPrefix: getenv(envStripeKeyPrefix)}}
	if base := b.Cfg.PublicBaseURL; strings.HasPrefix(base, "https://") || b.Cfg.Local && base != "" {
		o.Stripe.ReturnURL = func(txID int64, returnTo string) string { return (*svc).ChallengeURL(base, txID, returnTo) }
	}
	return o
}

// connectors builds the stage's connector set: the one place a connector
// is registered by name (connector.Set). A sandbox stage has the simulator
// alone. A production stage has every acquirer configured for it ("stripe"
// when a Stripe key is, "adyen" when an Adyen account is); the default, the
// connector of an attempt no routing rule names, is the one
// PAYMENT_CONNECTOR names, else Stripe when it is configured, else Adyen. A
// named default that is not configured is an error, never a silent
// fallback to another acquirer. Without any acquirer the stage has
// noAcquirer under "stripe", so attempts fail like a bank system error.
// Transactions recorded without a connector (before connectors were
// recorded: all Stripe's) stay Stripe's. svc is filled in once the payment
// service exists (the acquirers' return URL is its signed 3-D Secure page).
func connectors(b *wire.Base, getenv config.Getenv, d [5]time.Duration, svc **paycore.Service) (connector.Set, error) {
	if b.Cfg.Sandbox() {
		return connector.Single(connector.Sandbox, sandbox.New(sandbox.Options{QRDelay: d[0], UPIDelay: d[1],
			UPICollectWindow: d[2], ChallengeWindow: d[3], Ledger: b.Store})), nil
	}
	choice := getenv(envPaymentConnector)
	if choice != "" && choice != connector.Stripe && choice != connector.Adyen {
		return connector.Set{}, fmt.Errorf("%s must be stripe or adyen, not %q", envPaymentConnector, choice)
	}
	conns := map[string]provider.Provider{}
	s, ok, err := StripeConfig(b, getenv)
	if err != nil {
		return connector.Set{}, err
	}
	if ok {
		p, err := stripeProvider(b, getenv, s, svc)
		if err != nil {
			return connector.Set{}, err
		}
		conns[connector.Stripe] = p
	}
	a, ok, err := AdyenConfig(b, getenv)
	if err != nil {
		return connector.Set{}, err
	}
	if ok {
		p, err := adyenProvider(b, a, svc)
		if err != nil {
			return connector.Set{}, err
		}
		conns[connector.Adyen] = p
	}
	def := choice
	switch {
	case def != "" && conns[def] == nil && def == connector.Stripe:
		return connector.Set{}, errors.New(envPaymentConnector + "=stripe, but Stripe is not configured (STRIPE_SECRET_ARN)")
	case def != "" && conns[def] == nil:
		return connector.Set{}, errors.New(envPaymentConnector + "=adyen, but Adyen is not configured (ADYEN_SECRET_ARN, ADYEN_MERCHANT_ACCOUNT)")
	case def != "":
	case conns[connector.Stripe] != nil:
		def = connector.Stripe
	case conns[connector.Adyen] != nil:
		def = connector.Adyen
	default:
		def, conns[connector.Stripe] = connector.Stripe, noAcquirer{}
	}
	set, err := connector.New(def, conns)
	if err != nil {
		return connector.Set{}, err
	}
	return set.WithLegacy(connector.Stripe), nil
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
