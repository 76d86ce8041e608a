// Package checkouttoken mints and verifies checkout session tokens: short
// lived (15 minutes), bound to one payment request and its merchant, used
// only by the hosted payment page and the embedded checkout.
//
// The token is stateless: "pct_" + base64url(claims) + "." +
// base64url(HMAC-SHA256(key, "pct_" + claims)). Minting costs no database
// write and verification no read of its own; the checkout function reads the
// payment request on every call anyway, so a token for a request that was
// paid or cancelled meanwhile is refused by that state check. Revocation:
// cancelling the request revokes every token for it at once; rotating the
// key material (SEAL_KEY) revokes all tokens. A stored opaque token would add
// a write per session and a read per page call for no extra guarantee here.
package checkouttoken

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TTL is the spec's token lifetime.
const TTL = 15 * time.Minute

// Header is where the hosted page sends the token.
const Header = "X-Checkout-Token"

const prefix = "pct_"

// Claims are what a token asserts.
type Claims struct {
	RequestID  int64  `json:"r"`
	MerchantID string `json:"m"`
	ExpiresAt  int64  `json:"e"` // unix seconds
	Nonce      string `json:"n"` // makes every token unique
}

// Issuer mints and verifies tokens.
type Issuer struct {
	key []byte
	Now func() time.Time
}

// New derives the token key from the service's key material (SEAL_KEY), so
// the merchant API and the checkout function share it without another secret.
func New(secret string) (*Issuer, error) {
	if len(secret) < 32 {
		return nil, errors.New("checkout token key material must be at least 32 characters")
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, "payreq/checkout-token/v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive checkout token key: %w", err)
	}
	return &Issuer{key: key, Now: time.Now}, nil
}

// Mint returns a token for the request and its expiry.
func (i *Issuer) Mint(requestID int64, merchantID string) (string, time.Time) {
	exp := i.Now().Add(TTL).Truncate(time.Second)
	n := make([]byte, 9)
	_, _ = rand.Read(n)
	c := Claims{RequestID: requestID, MerchantID: merchantID, ExpiresAt: exp.Unix(), Nonce: base64.RawURLEncoding.EncodeToString(n)}
	return i.sign(prefix, c), exp
}

func (i *Issuer) sign(prefix string, c Claims) string {
	body, _ := json.Marshal(c)
	payload := prefix + base64.RawURLEncoding.EncodeToString(body)
	return payload + "." + base64.RawURLEncoding.EncodeToString(i.mac(payload))
}

// framePrefix marks a frame ticket; a ticket is never a token (Open checks
// the prefix), so it authorises no API call.
const framePrefix = "pcf_"

// FrameGrace is how long a frame ticket outlives its token: a page that
// comes back from 3-D Secure after the token expired can still be shown in
// the merchant's frame, to say that the session expired.
const FrameGrace = time.Hour

// FrameTicket binds the pages that carry no token in their address (the
// 3-D Secure page, the page the payer returns to afterwards) to the token's
// payment request, so their framing policy comes from a signed value and
// never from the requestId parameter. It grants nothing else and is not
// secret.
func (i *Issuer) FrameTicket(c Claims) string {
	return i.sign(framePrefix, Claims{RequestID: c.RequestID, MerchantID: c.MerchantID,
		ExpiresAt: c.ExpiresAt + int64(FrameGrace/time.Second), Nonce: "f"})
}

// OpenFrameTicket verifies a frame ticket and returns its claims.
func (i *Issuer) OpenFrameTicket(ticket string) (Claims, error) {
	return i.open(framePrefix, ticket)
}

func (i *Issuer) mac(payload string) []byte {
	m := hmac.New(sha256.New, i.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Verification failures. All map to 401 for the caller; they are distinct
// only for logs.
var (
	ErrMalformed    = errors.New("checkout token is malformed")
	ErrSignature    = errors.New("checkout token signature is invalid")
	ErrExpired      = errors.New("checkout token has expired")
	ErrWrongRequest = errors.New("checkout token belongs to another payment request")
)

// Verify checks a token for a given request and returns its claims.
func (i *Issuer) Verify(token string, requestID int64) (Claims, error) {
	c, err := i.Open(token)
	if err != nil {
		return c, err
	}
	if c.RequestID != requestID {
		return c, ErrWrongRequest
	}
	return c, nil
}

// Open checks signature and expiry and returns the claims; the request the
// token is for is the one its claims name.
func (i *Issuer) Open(token string) (Claims, error) {
	return i.open(prefix, token)
}

func (i *Issuer) open(prefix, token string) (Claims, error) {
	var c Claims
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || !strings.HasPrefix(payload, prefix) || len(token) > 512 {
		return c, ErrMalformed
	}
	// Strict: a signature has exactly one spelling, so a token cannot be
	// re-spelt (its last character's unused bits flipped) and still verify.
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return c, ErrMalformed
	}
	if !hmac.Equal(got, i.mac(payload)) {
		return c, ErrSignature
	}
	body, err := base64.RawURLEncoding.Strict().DecodeString(strings.TrimPrefix(payload, prefix))
	if err != nil || json.Unmarshal(body, &c) != nil || c.RequestID <= 0 || c.MerchantID == "" {
		return Claims{}, ErrMalformed
	}
	if !i.Now().Before(time.Unix(c.ExpiresAt, 0)) {
		return c, ErrExpired
	}
	return c, nil
}
