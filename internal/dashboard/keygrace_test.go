package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/merchantapi"
	"github.com/payreq/payreq/internal/testenv"
)

// merchantAPI serves the real merchant API handler over real HTTP with the
// local stack's store; its key cache runs on c.
func merchantAPI(t *testing.T, c *clock) string {
	t.Helper()
	auth := apikey.New(testenv.Stack(t).Store)
	auth.Now = c.Now
	srv := httptest.NewServer(merchantapi.New(merchantapi.Deps{Store: testenv.Stack(t).Store, Auth: auth,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return srv.URL
}

var newKeyRE = regexp.MustCompile(`<code id="new-api-key">([^<]+)</code>`)
var untilRE = regexp.MustCompile(`until (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC) at the latest`)

// The old key's grace after a rotation in the dashboard is the API
// instances' key cache: an instance that used the old key accepts it until
// its entry runs out (apikey.DefaultTTL, the time the dashboard shows), then
// refuses it; an instance that had not cached it refuses it at once.
func TestOldAPIKeyWorksDuringTheCacheGraceAndIsRefusedAfter(t *testing.T) {
	m := testenv.NewMerchant(t)
	reqID, _ := payH2H(t, m, "grace-"+dashuser.NewToken()[:10])
	c := newClock()
	warm := merchantAPI(t, c)
	status := func(base, key string) int {
		t.Helper()
		return testenv.Do(t, "GET", base+"/payment-requests/status/"+strconv.FormatInt(reqID, 10), key, nil).Status
	}
	if got := status(warm, m.APIKey); got != http.StatusOK {
		t.Fatalf("old key before the rotation: %d", got)
	}
	cachedAt := c.Now()

	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	p := u.post("/dashboard/profile/api-key", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/profile"))}})
	km, um := newKeyRE.FindStringSubmatch(p.body), untilRE.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || km == nil || um == nil {
		t.Fatalf("rotate: %d\n%.1500s", p.status, p.body)
	}
	newKey := km[1]
	shown, err := time.Parse("2006-01-02 15:04:05 UTC", um[1])
	if err != nil {
		t.Fatal(err)
	}
	// The time shown is the rotation plus the cache's lifetime.
	if d := shown.Sub(time.Now().Add(apikey.DefaultTTL)); d < -10*time.Second || d > time.Second {
		t.Errorf("grace shown until %v, want about %v from now", shown, apikey.DefaultTTL)
	}

	// A cold instance: the old key is refused at once, the new one works.
	cold := merchantAPI(t, newClock())
	if got := status(cold, m.APIKey); got != http.StatusUnauthorized {
		t.Errorf("old key on an instance that had not cached it: %d", got)
	}
	if got := status(cold, newKey); got != http.StatusOK {
		t.Errorf("new key: %d", got)
	}

	// The warm instance: the old key works until its cache entry runs out...
	c.Add(apikey.DefaultTTL - time.Second)
	if got := status(warm, m.APIKey); got != http.StatusOK {
		t.Errorf("old key within the grace (%v after it was cached): %d", c.Now().Sub(cachedAt), got)
	}
	if got := status(warm, newKey); got != http.StatusOK {
		t.Errorf("new key during the grace: %d", got)
	}
	// ...and is refused from then on; the new key keeps working.
	c.Add(time.Second)
	if got := status(warm, m.APIKey); got != http.StatusUnauthorized {
		t.Errorf("old key after the grace: %d", got)
	}
	if got := status(warm, newKey); got != http.StatusOK {
		t.Errorf("new key after the grace: %d", got)
	}
	if !strings.Contains(p.body, m.APIKeyPrefix) {
		t.Error("the rotation page does not name the old key")
	}
}
