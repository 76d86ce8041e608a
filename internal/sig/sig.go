// Package sig signs and verifies provider callbacks (and the pre-signed
// links of the sandbox 3-D Secure page) with HMAC-SHA256 and a timestamp:
//
//	X-Provider-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, t + "." + payload)>
//
// The payload is the raw request body of a POST, or for a GET the raw query
// string without its "t" and "sig" parameters (order kept as sent); a GET
// may carry the signature in those two query parameters instead of the
// header, which is how a link opened by a browser is signed. Signatures are
// compared in constant time and accepted within Tolerance of the signing
// time, in either direction.
package sig

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Header carries the signature of a callback.
const Header = "X-Provider-Signature"

// Query parameter names of a signed GET.
const (
	ParamTime = "t"
	ParamSig  = "sig"
)

// Tolerance is how far the signing time may be from now.
const Tolerance = 5 * time.Minute

// HKDF info strings: one key per purpose, all derived from SEAL_KEY.
const (
	InfoProviderCallback = "payreq/provider-callback/v1"
	InfoThreeDSRedirect  = "payreq/threeds-redirect/v1"
)

// Errors of Verify.
var (
	ErrMissing = errors.New("signature missing")
	ErrInvalid = errors.New("signature invalid")
	ErrExpired = errors.New("signature timestamp outside the tolerance")
)

// DeriveKey derives a 32-byte key for info from the deployment secret.
func DeriveKey(secret, info string) ([]byte, error) {
	secret = strings.TrimSpace(secret)
	if len(secret) < 32 {
		return nil, fmt.Errorf("secret must be at least 32 characters, got %d", len(secret))
	}
	return hkdf.Key(sha256.New, []byte(secret), nil, info, 32)
}

// MAC returns hex HMAC-SHA256(key, ts + "." + payload).
func MAC(key []byte, ts string, payload []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(payload)
	return hex.EncodeToString(m.Sum(nil))
}

// Sign returns the header value for payload signed at t.
func Sign(key []byte, t time.Time, payload []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + MAC(key, ts, payload)
}

// ParseHeader splits "t=...,v1=..." (several v1 values allowed, for key
// rotation).
func ParseHeader(h string) (ts string, sigs []string) {
	for _, part := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	return ts, sigs
}

// Verify checks a header value against payload at now.
func Verify(key []byte, header string, payload []byte, now time.Time) error {
	if header == "" {
		return ErrMissing
	}
	ts, sigs := ParseHeader(header)
	return check(key, ts, sigs, payload, now)
}

func check(key []byte, ts string, sigs []string, payload []byte, now time.Time) error {
	if ts == "" || len(sigs) == 0 {
		return ErrMissing
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrInvalid
	}
	want := []byte(MAC(key, ts, payload))
	ok := false
	for _, s := range sigs {
		if hmac.Equal(want, []byte(strings.ToLower(s))) {
			ok = true
		}
	}
	if !ok {
		return ErrInvalid
	}
	if d := now.Sub(time.Unix(unix, 0)); d > Tolerance || d < -Tolerance {
		return ErrExpired
	}
	return nil
}

// CanonicalQuery is rawQuery without its "t" and "sig" parameters, the
// other parameters kept byte for byte in their order.
func CanonicalQuery(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	parts := strings.Split(rawQuery, "&")
	kept := parts[:0]
	for _, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if k == ParamTime || k == ParamSig || p == "" {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "&")
}

// SignQuery returns the encoded query of v with "t" and "sig" appended: a
// URL carrying it verifies with VerifyQuery.
func SignQuery(key []byte, v url.Values, t time.Time) string {
	q := v.Encode()
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := MAC(key, ts, []byte(q))
	signed := ParamTime + "=" + ts + "&" + ParamSig + "=" + mac
	if q == "" {
		return signed
	}
	return q + "&" + signed
}

// VerifyQuery checks a GET: the signature comes from the header when one is
// given, else from the "t" and "sig" query parameters.
func VerifyQuery(key []byte, header, rawQuery string, now time.Time) error {
	payload := []byte(CanonicalQuery(rawQuery))
	if header != "" {
		return Verify(key, header, payload, now)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return ErrInvalid
	}
	return check(key, q.Get(ParamTime), q[ParamSig], payload, now)
}
