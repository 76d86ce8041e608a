// Package checkoutwire builds CheckoutFunction: the hosted payment page, its
// token-authenticated API, PayCheckout and payment links. Only this function
// links the QR encoder (the page's UPI and QR codes).
package checkoutwire

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/lambdahttp"
	"github.com/payreq/payreq/internal/paylink"
	"github.com/payreq/payreq/internal/provider/sandbox/asyncjob"
	"github.com/payreq/payreq/internal/provider/sandbox/worker"
	"github.com/payreq/payreq/internal/provider/stripe"
	"github.com/payreq/payreq/internal/queue"
	"github.com/payreq/payreq/internal/safehttp"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/paywire"
)

// CheckoutLambda is CheckoutFunction's Lambda handler.
func CheckoutLambda(ctx context.Context, getenv config.Getenv, opts wire.Options) (wire.HTTPLambda, error) {
	return lambdahttp.Lambda(Checkout(ctx, getenv, opts))
}

// Checkout wires CheckoutFunction's router.
func Checkout(ctx context.Context, getenv config.Getenv, opts wire.Options) (_ http.Handler, err error) {
	defer wire.Annotate(&err, "checkout")
	b, err := wire.LoadSealed(ctx, getenv, opts)
	if err != nil {
		return nil, err
	}
	svc, err := paywire.Service(b, getenv, "checkout")
	if err != nil {
		return nil, err
	}
	tokens, err := checkouttoken.New(b.Cfg.SealKey)
	if err != nil {
		return nil, err
	}
	links, err := paylink.New(b.Cfg.SealKey)
	if err != nil {
		return nil, err
	}
	callbackKey, err := sig.DeriveKey(b.Cfg.SealKey, sig.InfoProviderCallback)
	if err != nil {
		return nil, err
	}
	// The sandbox 3-D Secure answer goes to the configured public base URL
	// only, through the SSRF-safe client. Without one (the template's
	// default: the function cannot name its own HTTP API), the sandbox
	// function delivers it to its configured callback base instead.
	var challenges checkout.Challenges = acsQueue{queue: queue.New(sqs.NewFromConfig(b.AWS)), url: getenv("SANDBOX_QUEUE_URL")}
	if b.Cfg.PublicBaseURL != "" {
		challenges = acsPoster{base: b.Cfg.PublicBaseURL, key: callbackKey, client: safehttp.NewClient(safehttp.Options{
			Timeout: 10 * time.Second, AllowPrivate: b.Cfg.Local, RequireHTTPS: !b.Cfg.Local})}
	}
	publishable, err := paywire.StripePublishableKey(b, getenv)
	if err != nil {
		return nil, err
	}
	return checkout.New(checkout.Deps{
		Store: b.Store, Payments: svc, Limiter: b.Store, Tokens: tokens, Links: links,
		Challenges: challenges, StripePublishableKey: publishable, StripeMinorUnits: stripe.MinorUnits,
		StripeAccountCountry: getenv("STRIPE_ACCOUNT_COUNTRY"), GooglePayMerchantID: getenv("GOOGLE_PAY_MERCHANT_ID"),
		Log: b.Logger("checkout"), PublicBaseURL: b.Cfg.PublicBaseURL, Sandbox: b.Cfg.Sandbox(),
	}), nil
}

// acsPoster answers a sandbox 3-D Secure challenge the way an ACS does:
// a signed result on the service's /callbacks/3ds endpoint at base.
type acsPoster struct {
	base   string
	key    []byte
	client *http.Client
}

func (a acsPoster) CompleteChallenge(ctx context.Context, requestID, txID int64, approve bool) error {
	now := time.Now()
	return worker.Post(ctx, a.client, a.base, worker.ThreeDSPath, a.key, worker.Callback{
		EventID: worker.EventIDFor("3ds", txID), TransactionID: txID, PaymentRequestID: requestID,
		Result: challengeResult(approve), Timestamp: now.UTC().Format(time.RFC3339),
	}, now)
}

// acsQueue hands the answer to the sandbox function, which posts the same
// signed callback to its own configured base URL.
type acsQueue struct {
	queue *queue.Client
	url   string
}

func (a acsQueue) CompleteChallenge(ctx context.Context, requestID, txID int64, approve bool) error {
	if a.url == "" {
		return fmt.Errorf("no PUBLIC_BASE_URL and no SANDBOX_QUEUE_URL: cannot deliver the 3-D Secure answer of transaction %d", txID)
	}
	return a.queue.Send(ctx, a.url, asyncjob.Job{Kind: asyncjob.KindThreeDSAnswer,
		EventID: worker.EventIDFor("3ds", txID), TransactionID: txID, PaymentRequestID: requestID,
		Result: challengeResult(approve), DueAt: time.Now()}, 0)
}

func challengeResult(approve bool) string {
	if approve {
		return "approve"
	}
	return "fail"
}
