// Package seal encrypts the few secrets the service must be able to read back
// (a merchant's API key signs its notifications, per the spec) so that they are
// never stored in plaintext. AES-256-GCM with the owner's id as associated
// data: a sealed value copied onto another merchant's record does not open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

const prefix = "v1:"

// Sealer seals and opens small secrets.
type Sealer struct{ aead cipher.AEAD }

// MinSecretLen is the shortest accepted key material.
const MinSecretLen = 32

// New builds a Sealer from secret key material (at least 32 characters, such
// as the random string Secrets Manager generates); the AES key is derived
// from it with HKDF-SHA256.
func New(secret string) (*Sealer, error) {
	secret = strings.TrimSpace(secret)
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("seal key material must be at least %d characters, got %d", MinSecretLen, len(secret))
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, "payreq/seal/v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive seal key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// NewKey returns fresh random key material in the form New expects.
func NewKey() string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return base64.RawURLEncoding.EncodeToString(k)
}

// Seal encrypts secret, bound to owner.
func (s *Sealer) Seal(secret, owner string) string {
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, []byte(secret), []byte(owner))
	return prefix + base64.RawStdEncoding.EncodeToString(out)
}

// ErrOpen is returned for a value that was not sealed by this key for owner.
var ErrOpen = errors.New("sealed value cannot be opened")

// Open decrypts a value produced by Seal for the same owner.
func (s *Sealer) Open(sealed, owner string) (string, error) {
	raw, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", ErrOpen
	}
	b, err := base64.RawStdEncoding.DecodeString(raw)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", ErrOpen
	}
	n := s.aead.NonceSize()
	pt, err := s.aead.Open(nil, b[:n], b[n:], []byte(owner))
	if err != nil {
		return "", ErrOpen
	}
	return string(pt), nil
}
