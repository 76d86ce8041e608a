package paywire

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/provider/adyen"
	"github.com/payreq/payreq/internal/wire"
)

// Adyen connector configuration (docs/acquirers.md, "Configuration"). In
// AWS the API key and the webhook HMAC keys live in one Secrets Manager
// secret named by ADYEN_SECRET_ARN, read once per cold start, never in the
// function's environment; the local stack may pass them in the environment
// instead. The merchant account, the environment and the live prefix are
// not secrets.
const (
	envAdyenSecretARN       = "ADYEN_SECRET_ARN"
	envAdyenMerchantAccount = "ADYEN_MERCHANT_ACCOUNT"
	envAdyenEnvironment     = "ADYEN_ENVIRONMENT" // test (default) or live
	envAdyenLivePrefix      = "ADYEN_LIVE_PREFIX" // live only: the account's live URL prefix
	envAdyenKeyPrefix       = "ADYEN_KEY_PREFIX"
	envAdyenAPIKey          = "ADYEN_API_KEY"   // local only
	envAdyenHMACKeys        = "ADYEN_HMAC_KEYS" // local only, comma-separated hex
	envAdyenAPIBase         = "ADYEN_API_BASE"  // local only (Prism)
	// envPaymentConnector picks the connector of a production stage when
	// both are configured: "stripe", "adyen", or empty (Stripe when it is
	// configured, else Adyen).
	envPaymentConnector = "PAYMENT_CONNECTOR"
)

// AdyenSecret is the JSON of the Secrets Manager secret. Its String never
// shows the keys.
type AdyenSecret struct {
	APIKey   string   `json:"apiKey"`
	HMACKeys []string `json:"hmacKeys"` // hex keys of the webhook endpoint; several during a rotation
}

// String keeps the keys out of any log line that prints the secret.
func (AdyenSecret) String() string { return "AdyenSecret{redacted}" }

// GoString is String for %#v.
func (s AdyenSecret) GoString() string { return s.String() }

// AdyenSettings is the Adyen connector of a production stage.
type AdyenSettings struct {
	Secret          AdyenSecret
	MerchantAccount string
	BaseURL         string // the Checkout API root ending in /v71
	KeyPrefix       string
}

var adyenSecrets sync.Map // ARN → AdyenSecret, for the life of the instance

// livePrefix is the shape of Adyen's live URL prefix ("[random]-[company
// name]", Adyen's "Live endpoints" page).
var livePrefix = regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)

// AdyenConfig returns the Adyen configuration, or ok=false when the stage
// has none.
func AdyenConfig(b *wire.Base, getenv config.Getenv) (AdyenSettings, bool, error) {
	local := func(name string) string {
		if !b.Cfg.Local {
			return ""
		}
		return getenv(name)
	}
	var (
		s    AdyenSettings
		base string
	)
	if key := local(envAdyenAPIKey); key != "" {
		s.Secret.APIKey, base = key, local(envAdyenAPIBase)
		for _, k := range strings.Split(local(envAdyenHMACKeys), ",") {
			if k = strings.TrimSpace(k); k != "" {
				s.Secret.HMACKeys = append(s.Secret.HMACKeys, k)
			}
		}
	} else {
		arn := getenv(envAdyenSecretARN)
		if arn == "" {
			return AdyenSettings{}, false, nil
		}
		sec, err := adyenSecret(b, arn)
		if err != nil {
			return AdyenSettings{}, false, err
		}
		s.Secret = sec
	}
	for _, k := range s.Secret.HMACKeys {
		if _, err := hex.DecodeString(k); err != nil || k == "" {
			return AdyenSettings{}, false, errors.New("adyen: an HMAC key is not hex (the key as the Customer Area shows it)")
		}
	}
	if s.MerchantAccount = getenv(envAdyenMerchantAccount); s.MerchantAccount == "" {
		return AdyenSettings{}, false, errors.New("missing environment variable " + envAdyenMerchantAccount)
	}
	s.KeyPrefix = getenv(envAdyenKeyPrefix)
	switch env := getenv(envAdyenEnvironment); {
	case base != "":
		s.BaseURL = base
	case env == "" || env == "test":
		s.BaseURL = adyen.TestBaseURL
	case env == "live":
		p := getenv(envAdyenLivePrefix)
		if !livePrefix.MatchString(p) {
			return AdyenSettings{}, false, errors.New(envAdyenLivePrefix + ": the live environment needs the account's live URL prefix")
		}
		s.BaseURL = adyenLiveURL(p)
	default:
		return AdyenSettings{}, false, fmt.Errorf("%s must be test or live, not %q", envAdyenEnvironment, env)
	}
	return s, true, nil
}

func adyenSecret(b *wire.Base, arn string) (AdyenSecret, error) {
	if v, ok := adyenSecrets.Load(arn); ok {
		return v.(AdyenSecret), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := secretsmanager.NewFromConfig(b.AWS).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return AdyenSecret{}, fmt.Errorf("%s: read secret: %w", envAdyenSecretARN, err)
	}
	var s AdyenSecret
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &s); err != nil || s.APIKey == "" {
		return AdyenSecret{}, errors.New(envAdyenSecretARN + `: the secret must be JSON {"apiKey": "AQE…", "hmacKeys": ["<hex>"]}`)
	}
	adyenSecrets.Store(arn, s)
	return s, nil
}

// adyenProvider builds the Adyen connector of a production stage. svc is
// filled in once the payment service exists: Adyen's returnUrl is the
// service's signed 3-D Secure page (to which Adyen appends redirectResult),
// which needs PUBLIC_BASE_URL; Adyen requires a returnUrl on every payment,
// so without one the connector is not built.
func adyenProvider(b *wire.Base, s AdyenSettings, svc **paycore.Service) (*adyen.Provider, error) {
	base := b.Cfg.PublicBaseURL
	if !strings.HasPrefix(base, "https://") && !(b.Cfg.Local && base != "") {
		return nil, errors.New("adyen: PUBLIC_BASE_URL must be an https URL (Adyen's returnUrl is the service's 3-D Secure page)")
	}
	return adyen.New(adyen.Options{APIKey: s.Secret.APIKey, MerchantAccount: s.MerchantAccount, BaseURL: s.BaseURL,
		KeyPrefix: s.KeyPrefix,
		ReturnURL: func(txID int64, returnTo string) string { return (*svc).ChallengeURL(base, txID, returnTo) }})
}

// AdyenWebhook is the reader of Adyen's webhooks on /callbacks/adyen, or
// ok=false when Adyen is not configured (or has no HMAC key) on a
// production stage. It is wired whenever Adyen is configured, whichever
// connector takes new payments: the payments Adyen already holds still
// settle by its webhooks.
func AdyenWebhook(b *wire.Base, getenv config.Getenv) (adyen.Webhook, bool, error) {
	if b.Cfg.Sandbox() {
		return adyen.Webhook{}, false, nil
	}
	s, ok, err := AdyenConfig(b, getenv)
	if err != nil || !ok || len(s.Secret.HMACKeys) == 0 {
		return adyen.Webhook{}, false, err
	}
	return adyen.Webhook{HMACKeys: s.Secret.HMACKeys, MerchantAccount: s.MerchantAccount}, true, nil
}
