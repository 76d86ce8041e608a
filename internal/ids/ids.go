// Package ids generates the service's int64 identifiers without a shared
// counter item: a hot counter would serialise every create across all Lambda
// instances. An id is 53 random bits (positive, below 2^53, so it survives
// JSON parsing in JavaScript). Uniqueness is enforced by the store's
// create-if-absent write; on a collision the caller draws again, so a
// collision is never silent. With 53 bits, a collision needs about 10^8 ids
// before it becomes likely at all, and then costs one retried write.
//
// Derive turns a secret seed (the nonce of an Idempotency-Key record) into
// the same id on every call, so a retry after a crash finds the resource the
// first try created instead of creating a second one.
package ids

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// MaxSafe is the largest id ever produced (2^53 - 1).
const MaxSafe = 1<<53 - 1

// New returns a fresh random id. now is unused since ids stopped carrying
// the creation time (12 random bits a millisecond collided at volume); it
// stays in the signature so callers keep one clock.
func New(now time.Time) int64 {
	_ = now
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return fromBytes(b[:])
}

// Derive returns the id that seed names for purpose: the same inputs give
// the same id, different purposes give unrelated ids.
func Derive(seed []byte, purpose string) int64 {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(purpose))
	return fromBytes(m.Sum(nil)[:8])
}

func fromBytes(b []byte) int64 {
	id := int64(binary.BigEndian.Uint64(b) & MaxSafe)
	if id == 0 {
		id = 1
	}
	return id
}
