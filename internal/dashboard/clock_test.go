package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
	dashweb "github.com/payreq/payreq/web/dashboard"
)

// clock is a settable time source; it starts at the real now so that users
// created by the tests (time.Now) are older than its sessions.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// clockedDashboard serves the real dashboard handler over real HTTP with the
// local stack's store (the DynamoDB emulator) and sealer, on clock c: time
// limits are tested by moving the clock, not by waiting. It serves the
// sign-in, session and account pages (no Ops).
func clockedDashboard(t *testing.T, c *clock) string {
	t.Helper()
	return clockedDashboardWith(t, c, nil)
}

// stackSealer is the local stack's sealer (the key the functions use).
func stackSealer(t *testing.T) *seal.Sealer {
	t.Helper()
	key, err := devstack.SealKey(testenv.StateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}

// stackKeys names sign-in attempt counters as the local stack's function does.
func stackKeys(t testing.TB) *lockout.Keyer {
	t.Helper()
	key, err := devstack.SealKey(testenv.StateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	k, err := lockout.NewKeyer(key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// attempts reads the sign-in attempt counter of u's address.
func attempts(t testing.TB, u *user) lockout.Counter {
	t.Helper()
	c, err := testenv.Stack(t).Store.LoginAttempts(context.Background(), stackKeys(t).Key("dashboard", u.email))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clearAttempts takes back u's failures and lock (as a new password does).
func clearAttempts(t testing.TB, u *user) {
	t.Helper()
	l := lockout.Counting{Store: testenv.Stack(t).Store}
	if err := l.Clear(context.Background(), stackKeys(t).Key("dashboard", u.email)); err != nil {
		t.Fatal(err)
	}
}

// clockedDashboardWith is clockedDashboard with deps changed by edit first
// (a test's probe around the password check or the sealer).
func clockedDashboardWith(t *testing.T, c *clock, edit func(*dashboard.Deps)) string {
	t.Helper()
	return clockedDashboardServing(t, c, edit, nil)
}

// clockedDashboardServing is clockedDashboardWith with wrap around the
// handler (nil: none), as Lambda's runtime puts its deadline on a request.
func clockedDashboardServing(t *testing.T, c *clock, edit func(*dashboard.Deps), wrap func(http.Handler) http.Handler) string {
	t.Helper()
	s := testenv.Stack(t)
	d := dashboard.Deps{Store: s.Store, Sealer: stackSealer(t), AttemptKeys: stackKeys(t),
		Files: dashweb.Files, InsecureCookies: true, Mailer: testenv.Mailbox(t),
		HashPassword: sftpauth.HashPassword, CheckPassword: sftpauth.CheckPassword, Now: c.Now}
	if edit != nil {
		edit(&d)
	}
	h, err := dashboard.New(d)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// storedSession reads u's session as stored.
func storedSession(t *testing.T, u *user, now time.Time) (*dashuser.Session, error) {
	t.Helper()
	return testenv.Stack(t).Store.Session(context.Background(), dashuser.HashToken(u.cookie(sessionCookie)), now)
}

func TestIdleSessionsEndAndLastSeenIsWrittenAtMostOncePerMinute(t *testing.T) {
	c := newClock()
	base := clockedDashboard(t, c)
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	u.base = base
	u.mustSignIn()
	signedIn := c.Now()
	seen := func() time.Time {
		t.Helper()
		s, err := storedSession(t, u, c.Now())
		if err != nil {
			t.Fatalf("session: %v", err)
		}
		return s.LastSeen
	}
	ok := func(when string) {
		t.Helper()
		if p := u.get("/dashboard/account"); p.status != http.StatusOK {
			t.Fatalf("%s: %d %s", when, p.status, p.header.Get("Location"))
		}
	}
	if got := seen(); !got.Equal(signedIn.Truncate(time.Millisecond)) {
		t.Fatalf("last seen at sign-in: %v, want %v", got, signedIn)
	}
	// Requests within a minute of the last write do not write again.
	c.Add(20 * time.Second)
	ok("after 20 s")
	c.Add(20 * time.Second)
	ok("after 40 s")
	if got := seen(); !got.Equal(signedIn.Truncate(time.Millisecond)) {
		t.Errorf("last seen written within the minute: %v (signed in %v)", got, signedIn)
	}
	// A request a minute or more after the last write records it.
	c.Add(21 * time.Second)
	ok("after 61 s")
	if got, want := seen(), c.Now().Truncate(time.Millisecond); !got.Equal(want) {
		t.Errorf("last seen after 61 s: %v, want %v", got, want)
	}
	// Active use keeps the session beyond the idle limit since sign-in...
	c.Add(dashboard.IdleTimeout - time.Second)
	ok("just under the idle limit")
	if c.Now().Sub(signedIn) < dashboard.IdleTimeout {
		t.Fatal("test setup: not yet past the idle limit since sign-in")
	}
	// ...and an idle limit without a request ends it, server-side.
	c.Add(dashboard.IdleTimeout)
	if p := u.get("/dashboard/account"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/login" {
		t.Fatalf("idle session: %d %s", p.status, p.header.Get("Location"))
	}
	if _, err := storedSession(t, u, c.Now()); !isNotFound(err) {
		t.Errorf("the idle session is still stored: %v", err)
	}
}

func TestSessionsEndAtTheAbsoluteLimitEvenWhenActive(t *testing.T) {
	c := newClock()
	u := newUser(t, testenv.NewMerchant(t), dashuser.RoleMember)
	u.base = clockedDashboard(t, c)
	u.mustSignIn()
	start := c.Now()
	for c.Now().Sub(start) < dashboard.SessionTTL-dashboard.IdleTimeout/2 {
		c.Add(dashboard.IdleTimeout / 2)
		if p := u.get("/dashboard/account"); p.status != http.StatusOK {
			t.Fatalf("%v after sign-in: %d", c.Now().Sub(start), p.status)
		}
	}
	c.Add(dashboard.IdleTimeout / 2) // exactly SessionTTL after sign-in
	if p := u.get("/dashboard/account"); p.status != http.StatusSeeOther {
		t.Fatalf("at the absolute limit: %d", p.status)
	}
}
