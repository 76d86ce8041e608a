package checkouttoken

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func issuer(t *testing.T, now *time.Time) *Issuer {
	t.Helper()
	i, err := New(strings.Repeat("k", 40))
	if err != nil {
		t.Fatal(err)
	}
	i.Now = func() time.Time { return *now }
	return i
}

func TestMintVerify(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	i := issuer(t, &now)
	tok, exp := i.Mint(42, "mer_a")
	if !exp.Equal(now.Add(15 * time.Minute)) {
		t.Fatalf("expiry %v", exp)
	}
	c, err := i.Verify(tok, 42)
	if err != nil || c.MerchantID != "mer_a" || c.RequestID != 42 {
		t.Fatalf("valid token: %+v %v", c, err)
	}
	if other, _ := i.Mint(42, "mer_a"); other == tok {
		t.Fatal("tokens repeat")
	}

	if _, err := i.Verify(tok, 43); !errors.Is(err, ErrWrongRequest) {
		t.Fatalf("other request: %v", err)
	}
	// Flip one byte anywhere: signature or payload.
	for _, pos := range []int{5, len(tok) / 2, len(tok) - 2} {
		b := []byte(tok)
		if b[pos] == 'A' {
			b[pos] = 'B'
		} else {
			b[pos] = 'A'
		}
		if _, err := i.Verify(string(b), 42); err == nil {
			t.Fatalf("flipped byte at %d accepted", pos)
		}
	}
	// Another key (another deployment) does not accept it.
	j, _ := New(strings.Repeat("z", 40))
	if _, err := j.Verify(tok, 42); !errors.Is(err, ErrSignature) {
		t.Fatalf("foreign key: %v", err)
	}
	// Valid up to the last second, expired one second later.
	now = exp.Add(-time.Second)
	if _, err := i.Verify(tok, 42); err != nil {
		t.Fatalf("1 s before expiry: %v", err)
	}
	now = exp.Add(time.Second)
	if _, err := i.Verify(tok, 42); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired by 1 s: %v", err)
	}
	for _, bad := range []string{"", "pct_", "nope.sig", "pct_abc.!!!", strings.Repeat("x", 600)} {
		if _, err := i.Verify(bad, 42); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
}

// Every character of the signature matters: the last one, whose low bits
// base64 leaves unused, cannot be re-spelt into a second valid token.
func TestTokenHasOneSpelling(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	i := issuer(t, &now)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for n := 0; n < 20; n++ {
		tok, _ := i.Mint(int64(n+1), "mer_a")
		for _, c := range alphabet {
			if byte(c) == tok[len(tok)-1] {
				continue
			}
			if _, err := i.Verify(tok[:len(tok)-1]+string(c), int64(n+1)); err == nil {
				t.Fatalf("token re-spelt with last character %q still verifies", c)
			}
		}
	}
}
