package sig

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"eventId":"e1"}`)
	h := Sign(key, now, body)
	if !strings.HasPrefix(h, "t=1800000000,v1=") || len(h) != len("t=1800000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := Verify(key, h, body, now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		h    string
		body []byte
		now  time.Time
		want error
	}{
		"missing":     {"", body, now, ErrMissing},
		"no v1":       {"t=1800000000", body, now, ErrMissing},
		"other body":  {h, []byte(`{"eventId":"e2"}`), now, ErrInvalid},
		"other key":   {Sign([]byte("another key of 32 characters...."), now, body), body, now, ErrInvalid},
		"too old":     {h, body, now.Add(5*time.Minute + time.Second), ErrExpired},
		"from future": {h, body, now.Add(-5*time.Minute - time.Second), ErrExpired},
		"bad t":       {"t=x,v1=" + MAC(key, "x", body), body, now, ErrInvalid},
		"t swapped":   {strings.Replace(h, "t=1800000000", "t=1800000001", 1), body, now, ErrInvalid},
	} {
		if err := Verify(key, c.h, c.body, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// Several v1 values (key rotation): one match is enough; upper-case hex too.
	multi := "t=1800000000,v1=" + strings.Repeat("0", 64) + ",v1=" + strings.ToUpper(MAC(key, "1800000000", body))
	if err := Verify(key, multi, body, now); err != nil {
		t.Errorf("rotation header: %v", err)
	}
}

func TestQuerySigning(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	q := SignQuery(key, url.Values{"transactionId": {"42"}, "result": {"approve"}, "return": {"/a?b=c&d"}}, now)
	if err := VerifyQuery(key, "", q, now); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if CanonicalQuery(q) != "result=approve&return=%2Fa%3Fb%3Dc%26d&transactionId=42" {
		t.Errorf("canonical %q", CanonicalQuery(q))
	}
	if err := VerifyQuery(key, "", strings.Replace(q, "approve", "fail", 1), now); !errors.Is(err, ErrInvalid) {
		t.Errorf("tampered: %v", err)
	}
	if err := VerifyQuery(key, "", q+"&extra=1", now); !errors.Is(err, ErrInvalid) {
		t.Errorf("added parameter: %v", err)
	}
	if err := VerifyQuery(key, "", q, now.Add(6*time.Minute)); !errors.Is(err, ErrExpired) {
		t.Errorf("old link: %v", err)
	}
	// The signature may come in the header instead; the query is signed
	// without t and sig.
	raw := "transactionId=42&result=fail"
	if err := VerifyQuery(key, Sign(key, now, []byte(raw)), raw, now); err != nil {
		t.Errorf("header-signed GET: %v", err)
	}
	if err := VerifyQuery(key, "", "transactionId=42", now); !errors.Is(err, ErrMissing) {
		t.Errorf("unsigned GET: %v", err)
	}
}

func TestDeriveKey(t *testing.T) {
	a, err := DeriveKey(strings.Repeat("s", 40), InfoProviderCallback)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DeriveKey(strings.Repeat("s", 40), InfoThreeDSRedirect)
	if len(a) != 32 || string(a) == string(b) {
		t.Fatal("keys must be 32 bytes and differ per purpose")
	}
	if _, err := DeriveKey("short", InfoProviderCallback); err == nil {
		t.Fatal("short secret accepted")
	}
}
