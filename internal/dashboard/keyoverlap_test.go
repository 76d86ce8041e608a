package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/webhook"
)

// rotateKey rotates m's API key in the dashboard as admin u with overlap
// ("1h", "none", ...) and returns the new key and the page.
func rotateKey(t *testing.T, u *user, overlap string) (string, page) {
	t.Helper()
	p := u.post("/dashboard/profile/api-key", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/profile"))}, "overlap": {overlap}})
	k := newKeyRE.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || k == nil {
		t.Fatalf("rotate with overlap %s: %d\n%.1500s", overlap, p.status, p.body)
	}
	return k[1], p
}

var previousUntilRE = regexp.MustCompile(`id="previous-key-until">([^<]+)<`)

// A key rotated with a 1-hour overlap: both keys work until the hour ends,
// on instances that had the old key cached and on ones that had not; from
// the end on, the old key is refused everywhere (the cache never outlives
// the overlap). The profile shows both keys and the old key's end.
func TestRotatedKeyWorksForItsOverlapAndNotAfter(t *testing.T) {
	m := testenv.NewMerchant(t)
	reqID, _ := payH2H(t, m, "overlap-"+dashuser.NewToken()[:10])
	status := func(base, key string) int {
		t.Helper()
		return testenv.Do(t, "GET", base+"/payment-requests/status/"+strconv.FormatInt(reqID, 10), key, nil).Status
	}
	warmClock := newClock()
	warm := merchantAPI(t, warmClock)
	if got := status(warm, m.APIKey); got != http.StatusOK {
		t.Fatalf("old key before the rotation: %d", got)
	}
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	rotatedAt := time.Now()
	newKey, p := rotateKey(t, u, "1h")
	if !strings.Contains(p.body, `id="old-key-grace"`) || !strings.Contains(p.body, "keeps working until") || !strings.Contains(p.body, "(1 hour)") {
		t.Errorf("the rotation page does not say how long the old key works:\n%.2000s", p.body)
	}
	shown := previousUntilRE.FindStringSubmatch(p.body)
	if shown == nil || !strings.Contains(p.body, m.APIKeyPrefix+"…") {
		t.Fatalf("the profile does not show the previous key with its end")
	}
	until, err := time.Parse("2006-01-02 15:04:05 UTC", shown[1])
	if err != nil || until.Sub(rotatedAt.Add(time.Hour)).Abs() > 10*time.Second {
		t.Errorf("previous key shown until %q, want about %v", shown[1], rotatedAt.Add(time.Hour).UTC())
	}
	coldClock := newClock()
	cold := merchantAPI(t, coldClock)
	for name, api := range map[string]string{"cached": warm, "uncached": cold} {
		if got := status(api, m.APIKey); got != http.StatusOK {
			t.Errorf("old key on the %s instance right after the rotation: %d", name, got)
		}
		if got := status(api, newKey); got != http.StatusOK {
			t.Errorf("new key on the %s instance: %d", name, got)
		}
	}
	// A minute before the end: still accepted (looked up again past the cache time).
	warmClock.Add(59 * time.Minute)
	coldClock.Add(59 * time.Minute)
	for name, api := range map[string]string{"cached": warm, "uncached": cold} {
		if got := status(api, m.APIKey); got != http.StatusOK {
			t.Errorf("old key 59 minutes in, %s instance: %d", name, got)
		}
	}
	// Just past the end: refused, though an instance used it a minute ago.
	warmClock.Add(time.Minute + 10*time.Second)
	coldClock.Add(time.Minute + 10*time.Second)
	for name, api := range map[string]string{"cached": warm, "uncached": cold} {
		if got := status(api, m.APIKey); got != http.StatusUnauthorized {
			t.Errorf("old key after the overlap, %s instance: %d", name, got)
		}
		if got := status(api, newKey); got != http.StatusOK {
			t.Errorf("new key after the overlap, %s instance: %d", name, got)
		}
	}
	audit := u.get("/dashboard/audit").body
	if !strings.Contains(audit, "apikey.rotate") || !strings.Contains(audit, "(1 hour overlap)") {
		t.Error("the audit log lacks the rotation with its overlap")
	}
}

// Ending an overlap early stops the old key within the cache time: an
// instance that had not cached it refuses it at once, one that had accepts
// it for at most apikey.DefaultTTL. Rotating again during an overlap ends
// the earlier previous key at once, and no overlap means none.
func TestEndedKeyStopsWithinTheCacheTime(t *testing.T) {
	m := testenv.NewMerchant(t)
	reqID, _ := payH2H(t, m, "ended-"+dashuser.NewToken()[:10])
	status := func(base, key string) int {
		t.Helper()
		return testenv.Do(t, "GET", base+"/payment-requests/status/"+strconv.FormatInt(reqID, 10), key, nil).Status
	}
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	second, _ := rotateKey(t, u, "24h")
	warmClock := newClock()
	warm := merchantAPI(t, warmClock)
	if got := status(warm, m.APIKey); got != http.StatusOK {
		t.Fatalf("old key during a 24-hour overlap: %d", got)
	}
	p := u.post("/dashboard/profile/api-key", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/profile"))}, "action": {"end-previous"}})
	if p.status != http.StatusOK || strings.Contains(p.body, `id="previous-key"`) {
		t.Fatalf("end the previous key: %d", p.status)
	}
	if got := status(merchantAPI(t, newClock()), m.APIKey); got != http.StatusUnauthorized {
		t.Errorf("ended key on an instance that had not cached it: %d", got)
	}
	warmClock.Add(apikey.DefaultTTL - time.Second)
	if got := status(warm, m.APIKey); got != http.StatusOK {
		t.Errorf("ended key on the instance that cached it, within the cache time: %d", got)
	}
	warmClock.Add(time.Second)
	if got := status(warm, m.APIKey); got != http.StatusUnauthorized {
		t.Errorf("ended key after the cache time: %d", got)
	}
	// Two rotations in a row: the second's previous key is the first's new
	// one; the first's previous key ends.
	third, _ := rotateKey(t, u, "1h")
	fourth, _ := rotateKey(t, u, "1h")
	fresh := merchantAPI(t, newClock())
	for key, want := range map[string]int{second: http.StatusUnauthorized, third: http.StatusOK, fourth: http.StatusOK} {
		if got := status(fresh, key); got != want {
			t.Errorf("after two rotations, key %s…: %d, want %d", merchant.KeyPrefix(key), got, want)
		}
	}
	// No overlap: the previous key ends with the rotation.
	fifth, _ := rotateKey(t, u, "none")
	fresh = merchantAPI(t, newClock())
	if got := status(fresh, fourth); got != http.StatusUnauthorized {
		t.Errorf("the key rotated out without an overlap: %d", got)
	}
	if got := status(fresh, fifth); got != http.StatusOK {
		t.Errorf("the newest key: %d", got)
	}
	audit := u.get("/dashboard/audit").body
	if !strings.Contains(audit, "apikey.end-previous") {
		t.Error("the audit log lacks the early end")
	}
}

// hookRecorder keeps every notification's headers and body.
type hookRecorder struct {
	mu  sync.Mutex
	got []struct {
		h    http.Header
		body []byte
	}
	srv *httptest.Server
}

func newHookRecorder(t *testing.T) *hookRecorder {
	r := &hookRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, struct {
			h    http.Header
			body []byte
		}{req.Header.Clone(), b})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the notification whose body names the request id.
func (r *hookRecorder) wait(t *testing.T, reqID int64) (http.Header, []byte) {
	t.Helper()
	want := strconv.FormatInt(reqID, 10)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, n := range r.got {
			if f, err := url.ParseQuery(string(n.body)); err == nil && f.Get("id") == want {
				r.mu.Unlock()
				return n.h, n.body
			}
		}
		r.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no notification of request %d", reqID)
	return nil, nil
}

var secretShownRE = regexp.MustCompile(`id="webhook-secret">([^<]+)<`)

// A webhook secret rotated with an overlap: notifications carry a
// webhook-signature entry for each secret, so a receiver verifies with
// either; X-Signature is keyed by the current API key alone. Stopping the
// old secret early leaves one entry.
func TestRotatedWebhookSecretSignsWithBothDuringTheOverlap(t *testing.T) {
	hooks := newHookRecorder(t)
	m := testenv.NewMerchant(t, func(mm *merchant.Merchant) { mm.NotifyURL = hooks.srv.URL + "/n" })
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	p := u.post("/dashboard/profile/webhook-secret", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/profile"))}, "action": {"rotate"}, "overlap": {"24h"}})
	sm := secretShownRE.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || sm == nil || !strings.Contains(p.body, `id="previous-secret"`) {
		t.Fatalf("rotate with an overlap: %d\n%.1500s", p.status, p.body)
	}
	oldSecret, newSecret := m.WebhookSecret, sm[1]
	// The API key rotated with an overlap too: X-Signature takes the new key.
	newKey, _ := rotateKey(t, u, "1h")

	reqID, _ := payH2H(t, testenv.Merchant{Merchant: m.Merchant, APIKey: newKey}, "secret-overlap-"+dashuser.NewToken()[:8])
	h, body := hooks.wait(t, reqID)
	entries := strings.Fields(h.Get(webhook.HeaderWebhookSignature))
	if len(entries) != 2 {
		t.Fatalf("webhook-signature during the overlap: %q, want two entries", h.Get(webhook.HeaderWebhookSignature))
	}
	for name, secret := range map[string]string{"old": oldSecret, "new": newSecret} {
		if err := webhook.VerifyStandardWebhook(h, body, secret, time.Now(), 0); err != nil {
			t.Errorf("the %s secret does not verify during the overlap: %v", name, err)
		}
	}
	if !webhook.VerifyXSignature(body, h.Get(webhook.HeaderXSignature), newKey) {
		t.Error("X-Signature is not keyed by the current API key")
	}
	if webhook.VerifyXSignature(body, h.Get(webhook.HeaderXSignature), m.APIKey) {
		t.Error("X-Signature is keyed by the rotated-out key")
	}

	p = u.post("/dashboard/profile/webhook-secret", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/profile"))}, "action": {"end-previous"}})
	if p.status != http.StatusOK || strings.Contains(p.body, `id="previous-secret"`) {
		t.Fatalf("stop the previous secret: %d", p.status)
	}
	reqID, _ = payH2H(t, testenv.Merchant{Merchant: m.Merchant, APIKey: newKey}, "secret-ended-"+dashuser.NewToken()[:8])
	h, body = hooks.wait(t, reqID)
	if n := len(strings.Fields(h.Get(webhook.HeaderWebhookSignature))); n != 1 {
		t.Errorf("webhook-signature after the overlap ended: %d entries", n)
	}
	if err := webhook.VerifyStandardWebhook(h, body, oldSecret, time.Now(), 0); err == nil {
		t.Error("the old secret still verifies after the overlap ended")
	}
	if err := webhook.VerifyStandardWebhook(h, body, newSecret, time.Now(), 0); err != nil {
		t.Errorf("the new secret: %v", err)
	}
	audit := u.get("/dashboard/audit").body
	for _, want := range []string{"webhook-secret.rotate", "(24 hours overlap)", "webhook-secret.end-previous"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit log lacks %q", want)
		}
	}
}
