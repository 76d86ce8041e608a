package dashboard

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/sftpauth"
)

// The dummy hash must be a well-formed Argon2id hash with the parameters of
// real ones: a malformed one would be rejected at once, and an unknown
// address would answer faster than a wrong password.
func TestDummyHashHasTheParametersOfRealHashes(t *testing.T) {
	real, err := sftpauth.HashPassword("some password")
	if err != nil {
		t.Fatal(err)
	}
	d, r := strings.Split(dummyHash, "$"), strings.Split(real, "$")
	if len(d) != 6 || d[1] != r[1] || d[2] != r[2] || d[3] != r[3] {
		t.Fatalf("dummy %q vs real %q", dummyHash, real)
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(d[4])
	key, err2 := base64.RawStdEncoding.DecodeString(d[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) != 32 {
		t.Fatalf("dummy salt %d bytes (%v), key %d bytes (%v)", len(salt), err1, len(key), err2)
	}
	if sftpauth.CheckPassword(dummyHash, "some password") {
		t.Fatal("the dummy hash matches a password")
	}
}
