package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names. Standard Webhooks (https://www.standardwebhooks.com) spells
// its headers in lower case; HTTP header names are case-insensitive.
const (
	HeaderXSignature       = "X-Signature"
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// DefaultTolerance is how far webhook-timestamp may be from the receiver's
// clock, either way, before a notification is treated as a replay.
const DefaultTolerance = 5 * time.Minute

// WebhookSecretPrefix marks a Standard Webhooks secret; the rest is base64.
const WebhookSecretPrefix = "whsec_"

// Verification errors. They never include secrets or expected signatures.
var (
	ErrSignature      = errors.New("webhook: signature does not match")
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	ErrTimestamp      = errors.New("webhook: webhook-timestamp outside the tolerance")
	ErrWebhookSecret  = errors.New("webhook: webhook secret is not whsec_ followed by base64 of at least 24 bytes")
)

// SignXSignature is the spec's X-Signature: Base64(HMAC-SHA512(raw body,
// merchant API key)), standard alphabet with padding.
func SignXSignature(body []byte, apiKey string) string {
	return base64.StdEncoding.EncodeToString(mac(sha512.New, []byte(apiKey), body))
}

// VerifyXSignature checks an X-Signature header value in constant time.
func VerifyXSignature(body []byte, signature, apiKey string) bool {
	got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(signature))
	return err == nil && hmac.Equal(got, mac(sha512.New, []byte(apiKey), body))
}

// SignHex is lower-case hex HMAC-SHA512 of msg keyed with secret's bytes, as
// the JSON variant's embedded signature uses it.
func SignHex(msg []byte, secret string) string {
	return hex.EncodeToString(mac(sha512.New, []byte(secret), msg))
}

// VerifyHex checks a hex signature (either case) in constant time.
func VerifyHex(msg []byte, signature, secret string) bool {
	got, err := hex.DecodeString(strings.TrimSpace(signature))
	return err == nil && hmac.Equal(got, mac(sha512.New, []byte(secret), msg))
}

func mac(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// NewWebhookSecret returns a fresh Standard Webhooks secret: "whsec_" and the
// base64 of 32 random bytes.
func NewWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook: webhook secret: %w", err)
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// webhookKey decodes a secret into HMAC key bytes. The prefix is optional, as
// in the reference libraries.
func webhookKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, WebhookSecretPrefix))
	if err != nil || len(key) < 24 {
		return nil, ErrWebhookSecret
	}
	return key, nil
}

// SignStandardWebhook returns a webhook-signature value:
// "v1," + Base64(HMAC-SHA256(key, id + "." + unix seconds + "." + body)).
func SignStandardWebhook(id string, ts time.Time, body []byte, secret string) (string, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + standardSignature(key, id, strconv.FormatInt(ts.Unix(), 10), body), nil
}

func standardSignature(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// VerifyStandardWebhook checks the Standard Webhooks headers of a received
// notification: the timestamp must be within tolerance of now (zero means
// DefaultTolerance), and one of the space-separated "v1,<base64>" entries of
// webhook-signature must match. Several entries occur while a secret is
// being rotated; entries of other versions are skipped.
func VerifyStandardWebhook(h http.Header, body []byte, secret string, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: not unix seconds", ErrTimestamp)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	key, err := webhookKey(secret)
	if err != nil {
		return err
	}
	want := []byte(standardSignature(key, id, ts, body))
	for entry := range strings.FieldsSeq(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if ok && version == "v1" && hmac.Equal([]byte(sig), want) {
			return nil
		}
	}
	return ErrSignature
}
