package webhook

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// manualHMAC is RFC 2104 spelled out, independent of crypto/hmac, so the
// signers are checked against a second implementation.
func manualHMAC(newHash func() (hash.Hash, int), key, msg []byte) []byte {
	h, block := newHash()
	if len(key) > block {
		h.Write(key)
		key = h.Sum(nil)
		h.Reset()
	}
	pad := make([]byte, block)
	copy(pad, key)
	for i := range pad {
		pad[i] ^= 0x36
	}
	h.Write(pad)
	h.Write(msg)
	inner := h.Sum(nil)
	h.Reset()
	for i := range pad {
		pad[i] ^= 0x36 ^ 0x5c
	}
	h.Write(pad)
	h.Write(inner)
	return h.Sum(nil)
}

func sha512Hash() (hash.Hash, int) { return sha512.New(), sha512.BlockSize }
func sha256Hash() (hash.Hash, int) { return sha256.New(), sha256.BlockSize }
func hexOf(b []byte) string        { return fmt.Sprintf("%x", b) }

func TestManualHMACKnownAnswer(t *testing.T) {
	// RFC 4231 test case 2, so the reference itself is trustworthy.
	got := hexOf(manualHMAC(sha512Hash, []byte("Jefe"), []byte("what do ya want for nothing?")))
	want := "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554" +
		"9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
	if got != want {
		t.Fatalf("RFC 4231 case 2: %s", got)
	}
}

func TestXSignature(t *testing.T) {
	body := approved().FormBody(2)
	key := "pk_live_" + strings.Repeat("k", 200) // longer than the SHA-512 block
	sig := SignXSignature(body, key)
	if want := base64.StdEncoding.EncodeToString(manualHMAC(sha512Hash, []byte(key), body)); sig != want {
		t.Fatalf("SignXSignature = %s, want %s", sig, want)
	}
	if !VerifyXSignature(body, sig, key) {
		t.Fatal("own signature refused")
	}
	tampered := append([]byte{}, body...)
	tampered[len(tampered)-1] = 'X'
	for name, ok := range map[string]bool{
		"tampered body": VerifyXSignature(tampered, sig, key),
		"wrong key":     VerifyXSignature(body, sig, key+"x"),
		"hex encoding":  VerifyXSignature(body, SignHex(body, key), key),
		"empty":         VerifyXSignature(body, "", key),
		"truncated":     VerifyXSignature(body, sig[:len(sig)-4], key),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestHex(t *testing.T) {
	msg, secret := []byte("a|b|c"), "whsec_abc"
	sig := SignHex(msg, secret)
	if want := hexOf(manualHMAC(sha512Hash, []byte(secret), msg)); sig != want {
		t.Fatalf("SignHex = %s, want %s", sig, want)
	}
	if !VerifyHex(msg, sig, secret) || !VerifyHex(msg, strings.ToUpper(sig), secret) {
		t.Fatal("own signature refused")
	}
	if VerifyHex([]byte("a|b|d"), sig, secret) || VerifyHex(msg, sig, "whsec_abd") || VerifyHex(msg, "zz", secret) {
		t.Fatal("bad signature accepted")
	}
}

// The Standard Webhooks reference vector (their libraries' shared test).
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderWebhookID, vectorID)
	h.Set(HeaderWebhookTimestamp, strconv.Itoa(vectorTS))
	h.Set(HeaderWebhookSignature, sig)
	return h
}

func TestStandardWebhookVector(t *testing.T) {
	sig, err := SignStandardWebhook(vectorID, time.Unix(vectorTS, 0), []byte(vectorBody), vectorSecret)
	if err != nil || sig != vectorSig {
		t.Fatalf("sign = %q, %v; want %q", sig, err, vectorSig)
	}
	now := time.Unix(vectorTS, 0)
	if err := VerifyStandardWebhook(vectorHeaders(vectorSig), []byte(vectorBody), vectorSecret, now, 0); err != nil {
		t.Fatalf("verify: %v", err)
	}
	// The prefix is optional, as in the reference libraries.
	if err := VerifyStandardWebhook(vectorHeaders(vectorSig), []byte(vectorBody), strings.TrimPrefix(vectorSecret, "whsec_"), now, 0); err != nil {
		t.Fatalf("verify without prefix: %v", err)
	}
}

func TestStandardWebhookIndependent(t *testing.T) {
	secret, err := NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	body, ts := []byte("id=1&x=%26"), time.Unix(1700000000, 0)
	sig, err := SignStandardWebhook("msg_42", ts, body, secret)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(secret[len("whsec_"):])
	want := "v1," + base64.StdEncoding.EncodeToString(manualHMAC(sha256Hash, key, []byte("msg_42.1700000000.id=1&x=%26")))
	if sig != want {
		t.Fatalf("sign = %s, want %s", sig, want)
	}
}

func TestVerifyStandardWebhook(t *testing.T) {
	body := []byte(vectorBody)
	at := time.Unix(vectorTS, 0)
	other := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	cases := []struct {
		name string
		h    http.Header
		body string
		now  time.Time
		tol  time.Duration
		want error // nil means valid
	}{
		{"several signatures, match last", vectorHeaders("v1a,xyz " + other + " " + vectorSig), vectorBody, at, 0, nil},
		{"several signatures, match first", vectorHeaders(vectorSig + " " + other), vectorBody, at, 0, nil},
		{"4m59s late", vectorHeaders(vectorSig), vectorBody, at.Add(299 * time.Second), 0, nil},
		{"4m59s early", vectorHeaders(vectorSig), vectorBody, at.Add(-299 * time.Second), 0, nil},
		{"5m01s late", vectorHeaders(vectorSig), vectorBody, at.Add(301 * time.Second), 0, ErrTimestamp},
		{"5m01s early (clock skew or forged)", vectorHeaders(vectorSig), vectorBody, at.Add(-301 * time.Second), 0, ErrTimestamp},
		{"custom tolerance", vectorHeaders(vectorSig), vectorBody, at.Add(time.Hour), 2 * time.Hour, nil},
		{"tampered body", vectorHeaders(vectorSig), `{"test": 2432232315}`, at, 0, ErrSignature},
		{"only other signatures", vectorHeaders(other), vectorBody, at, 0, ErrSignature},
		{"wrong version", vectorHeaders("v2," + vectorSig[3:]), vectorBody, at, 0, ErrSignature},
		{"no signature", vectorHeaders(""), vectorBody, at, 0, ErrMissingHeaders},
	}
	for _, c := range cases {
		err := VerifyStandardWebhook(c.h, []byte(c.body), vectorSecret, c.now, c.tol)
		if (c.want == nil && err != nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}

	// id and timestamp are signed: changing either breaks the signature
	// (the timestamp is moved with the clock so only the signature fails).
	h := vectorHeaders(vectorSig)
	h.Set(HeaderWebhookID, "msg_other")
	if err := VerifyStandardWebhook(h, body, vectorSecret, at, 0); !errors.Is(err, ErrSignature) {
		t.Errorf("changed id: %v", err)
	}
	h = vectorHeaders(vectorSig)
	h.Set(HeaderWebhookTimestamp, strconv.Itoa(vectorTS+1))
	if err := VerifyStandardWebhook(h, body, vectorSecret, at, 0); !errors.Is(err, ErrSignature) {
		t.Errorf("changed timestamp: %v", err)
	}
	h.Set(HeaderWebhookTimestamp, "soon")
	if err := VerifyStandardWebhook(h, body, vectorSecret, at, 0); !errors.Is(err, ErrTimestamp) {
		t.Errorf("non-numeric timestamp: %v", err)
	}
	if err := VerifyStandardWebhook(vectorHeaders(vectorSig), body, "whsec_!!notbase64", at, 0); !errors.Is(err, ErrWebhookSecret) {
		t.Errorf("bad secret: %v", err)
	}
}

func TestNewWebhookSecret(t *testing.T) {
	a, err := NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewWebhookSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secret %q lacks whsec_", a)
	}
	raw, err := base64.StdEncoding.DecodeString(a[6:])
	if err != nil || len(raw) != 32 {
		t.Fatalf("secret body: %d bytes, %v", len(raw), err)
	}
}
