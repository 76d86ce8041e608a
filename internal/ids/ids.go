// Package ids generates the service's int64 identifiers without a shared
// counter item: a hot counter would serialise every create across all Lambda
// instances. An id is the millisecond since 2025-01-01 shifted left by 12 bits
// plus 12 random bits. That keeps ids roughly time-ordered and below 2^53, so
// they survive JSON parsing in JavaScript. Uniqueness is enforced by the
// store's create-if-absent write; on the rare collision the caller draws again.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const randomBits = 12

// MaxSafe is the largest id ever produced (2^53 - 1).
const MaxSafe = 1<<53 - 1

// New returns a fresh positive id for time now.
func New(now time.Time) int64 {
	ms := now.Sub(epoch).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	r := int64(binary.BigEndian.Uint16(b[:]) & (1<<randomBits - 1))
	id := (ms<<randomBits | r) & MaxSafe
	if id == 0 {
		id = 1
	}
	return id
}
