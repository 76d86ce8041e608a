package seal

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestSealRoundTripAndBinding(t *testing.T) {
	s, err := New(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("prk_test_secret", "mer_a")
	if strings.Contains(sealed, "secret") {
		t.Fatal("plaintext visible in sealed value")
	}
	if got, err := s.Open(sealed, "mer_a"); err != nil || got != "prk_test_secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open(sealed, "mer_b"); err == nil {
		t.Fatal("opened with another owner")
	}
	other, _ := New(NewKey())
	if _, err := other.Open(sealed, "mer_a"); err == nil {
		t.Fatal("opened with another key")
	}
	// One bit of the ciphertext flipped (replacing the last characters
	// could leave the bytes unchanged: the last one carries unused bits).
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(sealed, prefix))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 1
	flipped := prefix + base64.RawStdEncoding.EncodeToString(raw)
	if _, err := s.Open(flipped, "mer_a"); err == nil {
		t.Fatal("opened a tampered value")
	}
	if _, err := New("too-short"); err == nil {
		t.Fatal("accepted a short key")
	}
}
