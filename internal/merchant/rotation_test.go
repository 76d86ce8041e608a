package merchant

import (
	"testing"
	"time"
)

func TestParseOverlapOffersNoneAnHourADayAWeek(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "none": 0, "0": 0, "1h": time.Hour, "24h": 24 * time.Hour, "1d": 24 * time.Hour,
		"7d": 7 * 24 * time.Hour, "168h0m0s": 7 * 24 * time.Hour} {
		if got, err := ParseOverlap(in); err != nil || got != want {
			t.Errorf("ParseOverlap(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"2h", "8d", "-1h", "forever", "30s"} {
		if _, err := ParseOverlap(in); err == nil {
			t.Errorf("ParseOverlap(%q) accepted", in)
		}
	}
}

// The key rotated out works until the overlap ends, and only one previous
// key at a time: rotating again ends the earlier one; no overlap, none.
func TestRotateAPIKeyKeepsThePreviousKeyForTheOverlap(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k1, k2, k3, k4 := NewAPIKey(true), NewAPIKey(true), NewAPIKey(true), NewAPIKey(true)
	m := &Merchant{APIKeyHash: HashAPIKey(k1), APIKeyPrefix: KeyPrefix(k1)}
	m.RotateAPIKey(k2, "sealed2", time.Hour, now)
	for _, c := range []struct {
		key          string
		at           time.Time
		ok, previous bool
	}{
		{k2, now, true, false}, {k1, now, true, true}, {k1, now.Add(time.Hour - time.Nanosecond), true, true},
		{k1, now.Add(time.Hour), false, false}, {k2, now.Add(48 * time.Hour), true, false}, {k3, now, false, false},
	} {
		if ok, prev := m.AcceptsKey(c.key, c.at); ok != c.ok || prev != c.previous {
			t.Errorf("key %s at +%v: %v %v, want %v %v", KeyPrefix(c.key), c.at.Sub(now), ok, prev, c.ok, c.previous)
		}
	}
	if m.PrevAPIKeyPrefix != KeyPrefix(k1) || !m.PreviousAPIKeyLive(now) || m.PreviousAPIKeyLive(now.Add(time.Hour)) {
		t.Errorf("previous key fields: %+v", m)
	}
	m.RotateAPIKey(k3, "sealed3", 24*time.Hour, now)
	if ok, _ := m.AcceptsKey(k1, now); ok {
		t.Error("a second rotation kept the first previous key")
	}
	if ok, prev := m.AcceptsKey(k2, now.Add(23*time.Hour)); !ok || !prev {
		t.Error("the second rotation's previous key")
	}
	m.RotateAPIKey(k4, "sealed4", 0, now)
	if ok, _ := m.AcceptsKey(k3, now); ok || m.PrevAPIKeyHash != "" {
		t.Error("a rotation without overlap kept a previous key")
	}
	m.RotateAPIKey(k1, "sealed1", 7*24*time.Hour, now)
	m.EndPreviousAPIKey()
	if ok, _ := m.AcceptsKey(k4, now); ok {
		t.Error("an ended previous key still works")
	}
}

func TestRotateWebhookSecretKeepsThePreviousForTheOverlap(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := &Merchant{SealedSecret: "old"}
	m.RotateWebhookSecret("new", 24*time.Hour, now)
	if s, ok := m.PreviousWebhookSecret(now.Add(23 * time.Hour)); !ok || s != "old" || m.SealedSecret != "new" {
		t.Errorf("during the overlap: %q %v", s, ok)
	}
	if _, ok := m.PreviousWebhookSecret(now.Add(24 * time.Hour)); ok {
		t.Error("the previous secret outlived its overlap")
	}
	m.RotateWebhookSecret("newer", 0, now)
	if _, ok := m.PreviousWebhookSecret(now); ok {
		t.Error("a rotation without overlap kept the previous secret")
	}
}
