package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/testenv"
)

// Attempt counting under concurrency: 30 attempts at once, as an attacker
// sends them, the right secret among them.

const burst = 30

// fire sends the posts at the same moment, each from its own browser
// prepared beforehand, and returns their answers in order.
func fire(t *testing.T, posts []func() page) []page {
	t.Helper()
	out := make([]page, len(posts))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = p()
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// passwordBurst prepares one sign-in form per password (a browser each) and
// posts them all at once.
func passwordBurst(t *testing.T, base string, u *user, pws []string) []page {
	t.Helper()
	posts := make([]func() page, len(pws))
	for i, pw := range pws {
		b := newBrowser(t, u.merchant, u.email)
		b.base = base
		form := url.Values{"csrf": {csrfOf(t, b.get("/dashboard/login"))}, "email": {u.email}, "password": {pw}}
		posts[i] = func() page { return b.post("/dashboard/login", form) }
	}
	return fire(t, posts)
}

// tally checks that every answer is a refusal (401), a sign-in (303 to
// success) or "busy, try again" (429 with Retry-After: an attempt that could
// not be counted in its time, so was not checked), never a 5xx, and returns
// the sign-ins.
func tally(t *testing.T, what string, ps []page, success string) int {
	t.Helper()
	opened, busy := 0, 0
	defer func() {
		if busy > 0 {
			t.Logf("%s: %d of %d refused as busy (429)", what, busy, len(ps))
		}
	}()
	for i, p := range ps {
		switch {
		case p.status == http.StatusSeeOther && p.header.Get("Location") == success:
			opened++
		case p.status == http.StatusUnauthorized:
		case p.status == http.StatusTooManyRequests && p.header.Get("Retry-After") != "":
			busy++
		default:
			t.Errorf("%s, attempt %d: %d %s\n%.300s", what, i, p.status, p.header.Get("Location"), p.body)
		}
	}
	return opened
}

func countStatus(ps []page, status int) int {
	n := 0
	for _, p := range ps {
		if p.status == status {
			n++
		}
	}
	return n
}

// storedUser reads the person of a browser.
func storedUser(t *testing.T, who *user) *dashuser.Identity {
	t.Helper()
	id, _, err := testenv.Stack(t).Store.Identity(context.Background(), who.email)
	if err != nil || id == nil {
		t.Fatalf("identity of %s: %v", who.email, err)
	}
	return id
}

func locked(t *testing.T, who *user) bool {
	t.Helper()
	return attempts(t, who).Locked(time.Now())
}

func mixed(right string, wrong func(i int) string) []string {
	out := make([]string, burst)
	for i := range out {
		out[i] = wrong(i)
	}
	out[burst/2] = right
	return out
}

func lockedNow(t *testing.T, who *user) lockout.Counter {
	t.Helper()
	c := attempts(t, who)
	// A right secret among the burst takes back the failures counted before
	// it (not the lock), so the count may be below MaxFailures, and is 0 when
	// the right one was the attempt that reached the limit (seen under load);
	// the lock that a later failure set holds either way, and is what this checks.
	if !c.Locked(time.Now()) {
		t.Errorf("after the burst: %d failures, locked until %v; want a lock in force", c.Failures, c.LockedUntil)
	}
	return c
}

// On the local stack's function: 29 wrong passwords and the right one at
// once answer 401 or sign in, never 5xx; the account is locked afterwards,
// and then 30 right passwords at once open no session.
func TestParallelPasswordAttemptsKeepTheLockout(t *testing.T) {
	u := newUser(t, testenv.NewMerchant(t), dashuser.RoleMember)
	ps := passwordBurst(t, u.base, u, mixed(password, func(i int) string { return "wrong password " + strconv.Itoa(i) }))
	opened := tally(t, "wrong and right at once", ps, u.home())
	if opened > 1 {
		t.Errorf("%d sessions from one right password", opened)
	}
	topUpUnderLoad(t, u, ps, func(i int) {
		b := newBrowser(t, u.merchant, u.email)
		b.base = u.base
		b.post("/dashboard/login", url.Values{"csrf": {csrfOf(t, b.get("/dashboard/login"))},
			"email": {u.email}, "password": {"wrong again " + strconv.Itoa(i)}})
	})
	lockedNow(t, u)
	right := make([]string, burst)
	for i := range right {
		right[i] = password
	}
	if n := tally(t, "right while locked", passwordBurst(t, u.base, u, right), u.home()); n != 0 {
		t.Errorf("the right password opened %d sessions while the account was locked", n)
	}
}

// With a probe around the password check (the real handler over HTTP on
// the stack's store): of 30 wrong passwords at once at most MaxFailures
// are checked; while locked none is, not even the right one; after the
// lock the right one signs in and clears the count.
func TestNoPasswordIsCheckedBeyondTheLimitOrWhileLocked(t *testing.T) {
	c := newClock()
	u := newUser(t, testenv.NewMerchant(t), dashuser.RoleMember)
	stored := storedUser(t, u)
	var checks atomic.Int32
	base := clockedDashboardWith(t, c, func(d *dashboard.Deps) {
		check := d.CheckPassword
		d.CheckPassword = func(hash, pw string) bool {
			if hash == stored.PasswordHash {
				checks.Add(1)
			}
			return check(hash, pw)
		}
	})
	wrong := make([]string, burst)
	for i := range wrong {
		wrong[i] = "wrong password " + strconv.Itoa(i)
	}
	tally(t, "30 wrong", passwordBurst(t, base, u, wrong), u.home())
	if n := checks.Load(); n == 0 || n > lockout.MaxFailures {
		t.Errorf("%d of %d wrong passwords sent at once were checked, want 1..%d", n, burst, lockout.MaxFailures)
	}
	after := lockedNow(t, u)
	checks.Store(0)
	right := []string{password, password, password}
	if n := tally(t, "right while locked", passwordBurst(t, base, u, right), u.home()); n != 0 {
		t.Errorf("signed in while locked (%d)", n)
	}
	if n := checks.Load(); n != 0 {
		t.Errorf("%d passwords checked while locked", n)
	}
	c.Add(after.LockedUntil.Sub(c.Now()) + time.Second)
	u.base = base
	u.mustSignIn()
	if got := attempts(t, u); got.Failures != 0 || !got.LockedUntil.IsZero() {
		t.Errorf("after a right password: %d failures, locked until %v", got.Failures, got.LockedUntil)
	}
}

// totpUser creates a user with TOTP on and returns it with its secret.
func totpUser(t *testing.T) (*user, string) {
	t.Helper()
	u := newUser(t, testenv.NewMerchant(t), dashuser.RoleMember)
	secret := dashboard.NewTOTPSecret()
	stored := storedUser(t, u)
	stored.SealedTOTP = stackSealer(t).Seal(secret, "totp:"+u.email)
	if err := testenv.Stack(t).Store.UpdateIdentity(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	return u, secret
}

// codeBurst signs u in with the password (a pending session) and posts the
// codes at once on that session, each from its own client.
func codeBurst(t *testing.T, u *user, codes []string) []page {
	t.Helper()
	if p := u.signIn(password); p.header.Get("Location") != "/dashboard/totp" {
		t.Fatalf("password step: %d %s", p.status, p.header.Get("Location"))
	}
	csrf := csrfOf(t, u.get("/dashboard/totp"))
	base, _ := url.Parse(u.base)
	posts := make([]func() page, len(codes))
	for i, code := range codes {
		b := newBrowser(t, u.merchant, u.email)
		b.base = u.base
		b.client.Jar.SetCookies(base, []*http.Cookie{{Name: sessionCookie, Value: u.cookie(sessionCookie), Path: "/"}})
		form := url.Values{"csrf": {csrf}, "code": {code}}
		posts[i] = func() page { return b.post("/dashboard/totp", form) }
	}
	return fire(t, posts)
}

// On the local stack's function: 29 wrong codes and the right one at once
// on one password-checked session answer 401 or sign in, never 5xx, and
// the account is locked afterwards.
func TestParallelTOTPAttemptsKeepTheLockout(t *testing.T) {
	u, secret := totpUser(t)
	code, _ := dashboard.TOTPCode(secret, dashboard.TOTPStep(time.Now()))
	wrong := wrongCode(t, secret)
	ps := codeBurst(t, u, mixed(code, func(i int) string { return wrong }))
	opened := tally(t, "codes at once", ps, u.home())
	if opened > 1 {
		t.Errorf("%d sessions from one code", opened)
	}
	// Every code checked was counted first: with no sign-in to take
	// failures back and no lock, each refusal is a failure on record.
	if opened == 0 {
		stored, refused := attempts(t, u), countStatus(ps, http.StatusUnauthorized)
		if !stored.Locked(time.Now()) && stored.Failures < refused { // not locked
			t.Errorf("%d codes refused, %d failures counted", refused, stored.Failures)
		}
	}
	topUpUnderLoad(t, u, ps, func(int) {
		form := u.get("/dashboard/totp")
		if form.status != http.StatusOK { // the right code signed in and ended the pending session
			if p := u.signIn(password); p.header.Get("Location") != "/dashboard/totp" {
				t.Fatalf("password step again: %d %s", p.status, p.header.Get("Location"))
			}
			form = u.get("/dashboard/totp")
		}
		u.post("/dashboard/totp", url.Values{"csrf": {csrfOf(t, form)}, "code": {wrong}})
	})
	lockedNow(t, u)
}

// topUpUnderLoad sends failures one at a time (fail) until the account
// locks, when too few of a burst were refused outright to lock it for
// certain. A right secret in the burst takes back the failures counted
// before it, so a burst locks for certain once 2×MaxFailures−1 wrong ones
// were refused; on a loaded machine most of it may be answered "busy"
// (429, never checked), and the lock must then follow from the failures
// still to come.
func topUpUnderLoad(t *testing.T, u *user, ps []page, fail func(i int)) {
	t.Helper()
	if refused := countStatus(ps, http.StatusUnauthorized); refused < 2*lockout.MaxFailures-1 {
		t.Logf("only %d of %d refused outright under load; topping the failures up one at a time", refused, burst)
		for i := 0; i < lockout.MaxFailures && !locked(t, u); i++ {
			fail(i)
		}
	}
}

// With a probe on the sealer (opening the TOTP secret is checking a code):
// of 30 wrong codes at once at most MaxFailures are checked; while locked
// the right code is not checked and opens nothing.
func TestNoCodeIsCheckedBeyondTheLimitOrWhileLocked(t *testing.T) {
	c := newClock()
	u, secret := totpUser(t)
	var opens atomic.Int32
	u.base = clockedDashboardWith(t, c, func(d *dashboard.Deps) {
		d.Sealer = countingSealer{d.Sealer, "totp:" + u.email, &opens}
	})
	wrong := wrongCode(t, secret)
	tally(t, "30 wrong codes", codeBurst(t, u, mixed(wrong, func(int) string { return wrong })), u.home())
	if n := opens.Load(); n == 0 || n > lockout.MaxFailures {
		t.Errorf("%d of %d wrong codes sent at once were checked, want 1..%d", n, burst, lockout.MaxFailures)
	}
	lockedNow(t, u)
	opens.Store(0)
	// The pending session is still there; the right code now is refused unchecked.
	code, _ := dashboard.TOTPCode(secret, dashboard.TOTPStep(c.Now()))
	p := u.post("/dashboard/totp", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/totp"))}, "code": {code}})
	if p.status != http.StatusUnauthorized || opens.Load() != 0 {
		t.Errorf("right code while locked: %d, %d checks", p.status, opens.Load())
	}
}

type countingSealer struct {
	dashboard.Sealer
	owner string
	n     *atomic.Int32
}

func (s countingSealer) Open(sealed, owner string) (string, error) {
	if owner == s.owner {
		s.n.Add(1)
	}
	return s.Sealer.Open(sealed, owner)
}

// A successful sign-in clears the failures and leaves no lock behind:
// five wrong passwords, the lock waited out, the right password signs in,
// and the same password from a second browser at once signs in too (the
// right attempt's own admission, failure 6, had set a 60 s lock that the
// success kept). The real handler on the stack's store, on a settable clock.
func TestASuccessfulSignInLeavesNoLockBehind(t *testing.T) {
	c := newClock()
	u := newUser(t, testenv.NewMerchant(t), dashuser.RoleMember)
	u.base = clockedDashboard(t, c)
	for i := range lockout.MaxFailures {
		if p := u.signIn("wrong password " + strconv.Itoa(i)); p.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, p.status)
		}
	}
	if p := u.signIn(password); p.status != http.StatusUnauthorized {
		t.Fatalf("right password while locked: %d", p.status)
	}
	c.Add(lockout.LockFor(lockout.MaxFailures) + time.Second)
	u.mustSignIn()
	if got := attempts(t, u); got.Failures != 0 || !got.LockedUntil.IsZero() {
		t.Errorf("after the sign-in: %d failures, locked until %v; want none", got.Failures, got.LockedUntil)
	}
	second := newBrowser(t, u.merchant, u.email)
	second.base = u.base
	second.mustSignIn()
	// And the count starts again from zero: the next lock is the first one.
	for i := range lockout.MaxFailures {
		second.signIn("wrong again " + strconv.Itoa(i))
	}
	if got := attempts(t, u); got.Failures != lockout.MaxFailures || got.LockedUntil.Sub(c.Now()) > lockout.LockFor(lockout.MaxFailures) {
		t.Errorf("after five more failures: %d failures, locked for %v; want %d and the first lock", got.Failures, got.LockedUntil.Sub(c.Now()), lockout.MaxFailures)
	}
}
