package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// TOTP (RFC 6238): HMAC-SHA1, 30-second steps, 6 digits, the parameters
// every authenticator app supports. A code of the step before or after is
// accepted too, for clock skew; the sign-in remembers the step of the code it
// accepted, so no code works twice.

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewTOTPSecret returns 160 random bits in base32, the RFC 4226 key size.
func NewTOTPSecret() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return b32.EncodeToString(b)
}

// TOTPURI is the otpauth:// URI an authenticator app imports, in Google
// Authenticator's Key Uri Format
// (https://github.com/google/google-authenticator/wiki/Key-Uri-Format): the
// label is the issuer, a colon and the account; the issuer parameter
// repeats the label's prefix. The issuer names this service by its host
// ("PayReq (pay.example.com)"), so an app holding keys of several PayReq
// services tells them apart; neither part may contain a colon (a port is
// dropped, and an address never has one).
func TOTPURI(secret, email, service string) string {
	issuer := TOTPIssuer(service)
	label := url.PathEscape(issuer) + ":" + url.PathEscape(email)
	return fmt.Sprintf("otpauth://totp/%s?secret=%s&issuer=%s&algorithm=SHA1&digits=6&period=30", label, secret, strings.ReplaceAll(url.QueryEscape(issuer), "+", "%20"))
}

// TOTPIssuer is the issuer of the service's keys: "PayReq (<host>)".
func TOTPIssuer(service string) string {
	service = strings.ReplaceAll(service, ":", "")
	if service == "" {
		return "PayReq"
	}
	return "PayReq (" + service + ")"
}

// TOTPCode is the code of secret at step counter.
func TOTPCode(secret string, counter uint64) (string, error) {
	key, err := b32.DecodeString(strings.ToUpper(strings.ReplaceAll(secret, " ", "")))
	if err != nil {
		return "", fmt.Errorf("totp secret: %w", err)
	}
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	m := hmac.New(sha1.New, key)
	m.Write(msg[:])
	sum := m.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	return fmt.Sprintf("%06d", v%1_000_000), nil
}

// TOTPStep is the RFC 6238 time step of t.
func TOTPStep(t time.Time) uint64 { return uint64(t.Unix()) / 30 }

// VerifyTOTP reports whether code is valid for secret at now (one step of
// skew either way) and returns the step it matched.
func VerifyTOTP(secret, code string, now time.Time) (uint64, bool) {
	code = strings.TrimSpace(code)
	if len(code) != 6 {
		return 0, false
	}
	step := TOTPStep(now)
	for _, s := range []uint64{step - 1, step, step + 1} {
		want, err := TOTPCode(secret, s)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return s, true
		}
	}
	return 0, false
}
