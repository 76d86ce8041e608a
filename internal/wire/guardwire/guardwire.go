// Package guardwire builds the merchant servers' guard (the merchant API and
// payments functions): API-key authentication, the shared per-merchant rate
// limit, then Idempotency-Key handling. Only those two functions import it.
package guardwire

import (
	"fmt"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/config"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/ratelimit"
	"github.com/payreq/payreq/internal/sig"
	"github.com/payreq/payreq/internal/wire"
)

// Authenticator is the API-key authenticator over b's store.
func Authenticator(b *wire.Base) *apikey.Authenticator {
	return apikey.New(b.Store)
}

// Guard is what every merchant-server route goes through: API-key
// authentication, then the shared per-merchant rate limit, then
// Idempotency-Key handling (POST only). Wrong keys never reach the counter.
// b must come from wire.LoadSealed.
func Guard(b *wire.Base, getenv config.Getenv, auth *apikey.Authenticator) (func(http.Handler) http.Handler, error) {
	limiter := ratelimit.New(b.Store)
	// SEAL_KEY was validated by LoadSealed, so the derivation cannot fail.
	fpKey, _ := sig.DeriveKey(b.Cfg.SealKey, idempotency.FingerprintKeyInfo)
	idem := idempotency.New(b.Store, fpKey, b.Sealer)
	if v := getenv("IDEMPOTENCY_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("IDEMPOTENCY_LEASE: %q is not a duration", v)
		}
		idem.Lease = d
	}
	return func(route http.Handler) http.Handler {
		return auth.Require(limiter.Middleware(idem.Middleware(route)))
	}, nil
}
