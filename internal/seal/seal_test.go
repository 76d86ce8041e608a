package seal

import (
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
	flipped := sealed[:len(sealed)-2] + "AA"
	if _, err := s.Open(flipped, "mer_a"); err == nil {
		t.Fatal("opened a tampered value")
	}
	if _, err := New("too-short"); err == nil {
		t.Fatal("accepted a short key")
	}
}
