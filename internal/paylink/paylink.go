// Package paylink makes and checks the slugs of payment links
// (`{base}/pay/{slug}`, the payment request's `link` field).
//
// A link needs no credential and opens a checkout for its request, so its
// slug must not be guessable: it is base64url(id || HMAC-SHA256(key, id)[:16])
// with id the request's int64 identifier (8 bytes, big endian), 32
// characters in all. Forging a slug for an id means guessing 128 bits of MAC;
// a request id alone (which merchants see and log) opens nothing. The slug is
// stateless: no column in the payment-request table, no extra read or write.
//
// The key is derived with HKDF from the service's key material (SEAL_KEY),
// like the checkout token's: rotating SEAL_KEY invalidates every link ever
// handed out (the merchant then reads the new `link` from the status
// endpoint).
package paylink

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	idLen  = 8
	macLen = 16
	// SlugLen is the length of every slug, in characters.
	SlugLen = (idLen + macLen) * 4 / 3
)

// ErrInvalid is returned for a slug that was not made by this service's key.
var ErrInvalid = errors.New("paylink: invalid slug")

// Signer makes and opens slugs.
type Signer struct{ key []byte }

// New derives the link key from the service's key material.
func New(secret string) (*Signer, error) {
	if len(secret) < 32 {
		return nil, errors.New("payment link key material must be at least 32 characters")
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, "payreq/payment-link/v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive payment link key: %w", err)
	}
	return &Signer{key: key}, nil
}

// Slug returns the slug of request id.
func (s *Signer) Slug(id int64) string {
	b := make([]byte, idLen, idLen+macLen)
	binary.BigEndian.PutUint64(b, uint64(id))
	b = append(b, s.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// URL is the payment link of request id under base (no trailing slash).
func (s *Signer) URL(base string, id int64) string { return base + "/pay/" + s.Slug(id) }

// Open returns the request id of a slug made by Slug, or ErrInvalid. The MAC
// comparison is constant-time.
func (s *Signer) Open(slug string) (int64, error) {
	if len(slug) != SlugLen {
		return 0, ErrInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(slug)
	if err != nil || len(b) != idLen+macLen || base64.RawURLEncoding.EncodeToString(b) != slug {
		return 0, ErrInvalid
	}
	if !hmac.Equal(b[idLen:], s.mac(b[:idLen])) {
		return 0, ErrInvalid
	}
	id := int64(binary.BigEndian.Uint64(b[:idLen]))
	if id <= 0 {
		return 0, ErrInvalid
	}
	return id, nil
}

func (s *Signer) mac(id []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(id)
	return m.Sum(nil)[:macLen]
}
