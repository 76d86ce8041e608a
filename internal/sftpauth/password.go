package sftpauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters of new hashes. 19 MiB, 2 passes, 1 lane is the OWASP
// baseline: about 20 ms on one full core, so 50–100 ms on the fraction of a
// vCPU a 256–512 MB Lambda gets. That bounds password guessing without making
// a login noticeably slow. Each hash records its own parameters, so raising
// them later keeps old hashes valid.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16

	// Bounds on parameters read from a stored hash, so a corrupted or forged
	// record cannot make one login allocate gigabytes or spin for minutes.
	maxArgonMemory = 256 * 1024
	maxArgonTime   = 10
)

// dummyHash has the current parameters and a password nobody knows. Unknown
// users are checked against it so that a login for a name that does not exist
// takes as long as one with a wrong password. It is a constant rather than
// computed at start-up so that Lambda cold starts do not pay for it.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$c2Z0cGF1dGgtZHVtbXk$K8m0pHnq5d2uQp6H0Bq3y1Jm9v0xYwJ9xL0Z1rG1c2A"

var b64 = base64.RawStdEncoding

// HashPassword returns an Argon2id hash of pw in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$key), the form stored on the merchant's
// SFTP user.
func HashPassword(pw string) (string, error) {
	if pw == "" {
		return "", errors.New("sftpauth: empty password")
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("sftpauth: salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPassword reports whether pw matches hash, comparing in constant time.
// A malformed hash never matches.
func CheckPassword(hash, pw string) bool {
	p, ok := parseHash(hash)
	if !ok {
		return false
	}
	key := argon2.IDKey([]byte(pw), p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	return subtle.ConstantTimeCompare(key, p.key) == 1
}

type argonHash struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

func parseHash(s string) (argonHash, bool) {
	var h argonHash
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return h, false
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return h, false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &h.memory, &h.time, &h.threads); err != nil {
		return h, false
	}
	if h.memory == 0 || h.memory > maxArgonMemory || h.time == 0 || h.time > maxArgonTime || h.threads == 0 {
		return h, false
	}
	var err1, err2 error
	h.salt, err1 = b64.DecodeString(parts[4])
	h.key, err2 = b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(h.salt) < 8 || len(h.key) < 16 || len(h.key) > 64 {
		return h, false
	}
	return h, true
}
