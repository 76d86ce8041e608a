package merchant

import (
	"crypto/subtle"
	"fmt"
	"strings"
	"time"
)

// Rotating a merchant's API key or webhook secret with an overlap: the old
// one keeps working for the overlap the merchant chose, so that several
// servers switch one by one without a failed call, and can be ended early.
// One previous key (and one previous secret) at a time: a rotation during
// an overlap ends the earlier previous one at once.

// Overlaps are the choices a rotation offers: none, an hour, a day, a week
// (Stripe's longest is 7 days).
var Overlaps = []time.Duration{0, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// MaxOverlap is the longest overlap.
const MaxOverlap = 7 * 24 * time.Hour

// ParseOverlap reads an overlap: "none" or "0", or one of Overlaps as a
// Go duration ("1h", "24h", "168h") or in days ("7d").
func ParseOverlap(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "0", "none", "0s":
		return 0, nil
	case "1d":
		return 24 * time.Hour, nil
	case "7d":
		return 7 * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil {
		for _, o := range Overlaps {
			if d == o {
				return d, nil
			}
		}
	}
	return 0, fmt.Errorf("overlap %q: choose none, 1h, 24h or 7d", s)
}

// RotateAPIKey makes key (hashed; sealed is the key sealed to the
// merchant) the merchant's key. With an overlap, the key it replaces keeps
// working until now+overlap; without, it stops at once (an API instance
// that cached it still accepts it for its cache time).
func (m *Merchant) RotateAPIKey(key, sealed string, overlap time.Duration, now time.Time) {
	if overlap > 0 {
		m.PrevAPIKeyHash, m.PrevAPIKeyPrefix, m.PrevAPIKeyUntil = m.APIKeyHash, m.APIKeyPrefix, now.Add(overlap).UTC()
	} else {
		m.EndPreviousAPIKey()
	}
	m.APIKeyHash, m.APIKeyPrefix, m.SealedAPIKey = HashAPIKey(key), KeyPrefix(key), sealed
}

// PreviousAPIKeyLive reports whether a rotated-out key still works at now.
func (m *Merchant) PreviousAPIKeyLive(now time.Time) bool {
	return m.PrevAPIKeyHash != "" && now.Before(m.PrevAPIKeyUntil)
}

// EndPreviousAPIKey ends the rotated-out key's overlap now.
func (m *Merchant) EndPreviousAPIKey() {
	m.PrevAPIKeyHash, m.PrevAPIKeyPrefix, m.PrevAPIKeyUntil = "", "", time.Time{}
}

// AcceptsKey reports whether a presented key is the merchant's at now,
// comparing in constant time: the current key, or the previous one during
// its overlap (previous true).
func (m *Merchant) AcceptsKey(presented string, now time.Time) (ok, previous bool) {
	h := HashAPIKey(presented)
	cur := subtle.ConstantTimeCompare([]byte(h), []byte(m.APIKeyHash)) == 1
	prev := m.PrevAPIKeyHash != "" && subtle.ConstantTimeCompare([]byte(h), []byte(m.PrevAPIKeyHash)) == 1
	switch {
	case cur:
		return true, false
	case prev && now.Before(m.PrevAPIKeyUntil):
		return true, true
	}
	return false, false
}

// RotateWebhookSecret makes sealed (the new secret, sealed to the
// merchant) the webhook secret. With an overlap, notifications are signed
// with the secret it replaces too, until now+overlap.
func (m *Merchant) RotateWebhookSecret(sealed string, overlap time.Duration, now time.Time) {
	if overlap > 0 && m.SealedSecret != "" {
		m.SealedPrevSecret, m.PrevSecretUntil = m.SealedSecret, now.Add(overlap).UTC()
	} else {
		m.EndPreviousWebhookSecret()
	}
	m.SealedSecret = sealed
}

// PreviousWebhookSecret is the rotated-out secret (sealed) while it still
// signs notifications at now.
func (m *Merchant) PreviousWebhookSecret(now time.Time) (string, bool) {
	if m.SealedPrevSecret == "" || !now.Before(m.PrevSecretUntil) {
		return "", false
	}
	return m.SealedPrevSecret, true
}

// EndPreviousWebhookSecret stops signing with the rotated-out secret now.
func (m *Merchant) EndPreviousWebhookSecret() {
	m.SealedPrevSecret, m.PrevSecretUntil = "", time.Time{}
}
