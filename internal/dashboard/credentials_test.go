package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/testenv"
)

// Set-password links, credential changes ending sessions, second-factor
// changes, and invitations that reveal nothing of other merchants.

// invite issues a link for merchant m's user email as payctl does, at now.
func invite(t *testing.T, m testenv.Merchant, email string, now time.Time) (token string, until time.Time) {
	t.Helper()
	s := testenv.Stack(t)
	link, until, err := dashboard.InviteUser(context.Background(), s.Store, isNotFound, m.ID, email, dashboard.RoleMember, "payctl", s.Info.APIBase, now)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	return u.Query().Get("token"), until
}

func (u *user) setPassword(token, pw string) page {
	u.t.Helper()
	return u.post("/dashboard/set-password", url.Values{"token": {token}, "password": {pw}, "confirm": {pw}})
}

// A user has one live link: issuing one voids the earlier ones (page and
// form), using one voids it, links expire after InviteTTL, and the page
// that shows a link says until when it works.
func TestOnlyTheNewestSetPasswordLinkWorksAndLinksExpire(t *testing.T) {
	c := newClock()
	m := testenv.NewMerchant(t)
	email := "links." + strings.ToLower(m.ID) + "@shop.example"
	u := newBrowser(t, m.ID, email)
	u.base = clockedDashboard(t, c)
	older, _ := invite(t, m, email, c.Now())
	newer, _ := invite(t, m, email, c.Now())
	if p := u.get("/dashboard/set-password?token=" + url.QueryEscape(older)); p.status != http.StatusNotFound {
		t.Errorf("the older link's page after a newer link: %d", p.status)
	}
	if p := u.setPassword(older, password+" old"); p.status != http.StatusNotFound {
		t.Fatalf("the older link set a password: %d", p.status)
	}
	if p := u.setPassword(newer, password); p.status != http.StatusOK {
		t.Fatalf("the newer link: %d\n%s", p.status, p.body)
	}
	if p := u.setPassword(newer, password+" again"); p.status != http.StatusNotFound {
		t.Errorf("a used link worked again: %d", p.status)
	}
	u.mustSignIn()
	// Two links racing: at most one sets a password.
	a, _ := invite(t, m, email, c.Now())
	b, _ := invite(t, m, email, c.Now())
	var wg sync.WaitGroup
	var pa, pb page
	wg.Add(2)
	go func() { defer wg.Done(); pa = u.setPassword(a, password+" a") }()
	go func() { defer wg.Done(); pb = u.setPassword(b, password+" b") }()
	wg.Wait()
	if pa.status != http.StatusNotFound || pb.status != http.StatusOK {
		t.Errorf("older and newer link at once: %d and %d, want 404 and 200", pa.status, pb.status)
	}
	// Expiry.
	late, until := invite(t, m, email, c.Now())
	if want := c.Now().Add(dashboard.InviteTTL); !until.Equal(want) || dashboard.InviteTTL > 24*time.Hour {
		t.Errorf("link valid until %v, want %v (InviteTTL %v)", until, want, dashboard.InviteTTL)
	}
	c.Add(dashboard.InviteTTL + time.Second)
	if p := u.setPassword(late, password+" late"); p.status != http.StatusNotFound {
		t.Errorf("an expired link: %d", p.status)
	}
	// Where an admin gets a link, the page says until when it works.
	admin := newUser(t, m, dashboard.RoleAdmin)
	admin.mustSignIn()
	p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {email}, "role": {"member"}})
	shown := regexp.MustCompile(`id="invite-until">([^<]+)<`).FindStringSubmatch(p.body)
	if shown == nil {
		t.Fatalf("the link's page does not say until when it works:\n%s", p.body)
	}
	at, err := time.Parse("2006-01-02 15:04:05 UTC", shown[1])
	if err != nil || at.Sub(time.Now()) > dashboard.InviteTTL || at.Sub(time.Now()) < dashboard.InviteTTL-time.Minute {
		t.Errorf("shown expiry %q (%v)", shown[1], err)
	}
}

// A password set through a link (a reset), a second-factor change and a
// role change end every existing session of the user on its next request.
func TestCredentialChangesEndEverySessionOfTheUser(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashboard.RoleAdmin)
	other := newBrowser(t, m.ID, u.email)
	u.mustSignIn()
	other.mustSignIn()
	open := func(b *user) bool { return b.get("/dashboard/payments").status == http.StatusOK }

	// Reset: a new link, used from a third browser.
	tok, _ := invite(t, m, u.email, time.Now())
	if !open(u) || !open(other) {
		t.Fatal("issuing a link alone ended the sessions")
	}
	const newPW = "a brand new password after reset"
	if p := newBrowser(t, m.ID, u.email).setPassword(tok, newPW); p.status != http.StatusOK {
		t.Fatalf("reset: %d", p.status)
	}
	if open(u) || open(other) {
		t.Fatal("a session opened before the password reset still works")
	}
	if p := u.signIn(password); p.status != http.StatusUnauthorized {
		t.Errorf("old password after reset: %d", p.status)
	}
	for _, b := range []*user{u, other} {
		if p := b.signIn(newPW); p.header.Get("Location") != "/dashboard/overview" {
			t.Fatalf("new password: %d", p.status)
		}
	}

	// Second factor turned on in one browser: the other's session ends, the
	// acting one continues.
	acct := u.get("/dashboard/account")
	secret := regexp.MustCompile(`id="totp-secret">([A-Z2-7]+)<`).FindStringSubmatch(acct.body)[1]
	sealed := regexp.MustCompile(`name="sealed" value="([^"]+)"`).FindStringSubmatch(acct.body)[1]
	code, _ := dashboard.TOTPCode(secret, dashboard.TOTPStep(time.Now()))
	if p := u.post("/dashboard/account/totp", url.Values{"csrf": {csrfOf(t, acct)}, "sealed": {html(sealed)}, "code": {code}}); p.status != http.StatusOK {
		t.Fatalf("turn TOTP on: %d\n%s", p.status, p.body)
	}
	if !open(u) {
		t.Error("the browser that turned TOTP on was signed out")
	}
	if open(other) {
		t.Error("another session survived turning TOTP on")
	}
	// A role change (by another admin) ends the user's sessions too (and a
	// removal: TestRemovedAndDemotedUsersLoseAccessOnTheirNextRequest).
	a := newUser(t, m, dashboard.RoleAdmin)
	a.mustSignIn()
	if p := a.setRole(u.email, dashboard.RoleMember); p.status != http.StatusOK {
		t.Fatalf("demote: %d", p.status)
	}
	if open(u) {
		t.Error("a session survived a role change")
	}
}

// signInTOTP signs u in with the password and the code of step.
func signInTOTP(t testing.TB, u *user, secret string, step uint64) page {
	t.Helper()
	if p := u.signIn(password); p.header.Get("Location") != "/dashboard/totp" {
		t.Fatalf("password step: %d %s", p.status, p.header.Get("Location"))
	}
	code, _ := dashboard.TOTPCode(secret, step)
	return u.post("/dashboard/totp", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/totp"))}, "code": {code}})
}

// enrolForm is the account page's enrolment form: its key and sealed value.
func enrolForm(t *testing.T, p page) (secret, sealed string) {
	t.Helper()
	k := regexp.MustCompile(`id="totp-secret">([A-Z2-7]+)<`).FindStringSubmatch(p.body)
	f := regexp.MustCompile(`name="sealed" value="([^"]+)"`).FindStringSubmatch(p.body)
	if k == nil || f == nil {
		t.Fatalf("the account page has no enrolment form (%d):\n%.1500s", p.status, p.body)
	}
	return k[1], html(f[1])
}

func codeOf(secret string, step uint64) string {
	c, _ := dashboard.TOTPCode(secret, step)
	return c
}

// While TOTP is on, replacing it or turning it off needs the password and a
// current code; an enrolment form works only in its session and for 15
// minutes; the code that turned TOTP on does not sign in.
func TestSecondFactorChangesNeedTheFactor(t *testing.T) {
	c := newClock()
	u := newUser(t, testenv.NewMerchant(t), dashboard.RoleMember)
	u.base = clockedDashboard(t, c)
	st := testenv.Stack(t).Store
	stored := func() *dashboard.User {
		got, err := st.DashboardUser(context.Background(), u.merchant, u.email)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	u.mustSignIn()
	s0 := dashboard.TOTPStep(c.Now())
	// An enrolment form kept from before TOTP was on...
	keptSecret, keptSealed := enrolForm(t, u.get("/dashboard/account"))
	acct := u.get("/dashboard/account")
	secret, sealed := enrolForm(t, acct)
	if p := u.post("/dashboard/account/totp", url.Values{"csrf": {csrfOf(t, acct)}, "sealed": {sealed}, "code": {codeOf(secret, s0)}}); p.status != http.StatusOK {
		t.Fatalf("turn TOTP on: %d", p.status)
	}
	before := stored().SealedTOTP
	// ...does not replace the factor afterwards without the password.
	kept := url.Values{"csrf": {csrfOf(t, u.get("/dashboard/account"))}, "sealed": {keptSealed}, "code": {codeOf(keptSecret, s0)}}
	if p := u.post("/dashboard/account/totp", kept); p.status != http.StatusBadRequest || stored().SealedTOTP != before {
		t.Fatalf("a kept enrolment form replaced TOTP without the password: %d", p.status)
	}
	// The code that turned TOTP on is used up: it does not sign in.
	w := newBrowser(t, u.merchant, u.email)
	w.base = u.base
	if p := signInTOTP(t, w, secret, s0); p.status != http.StatusUnauthorized {
		t.Errorf("the enrolment code signed in: %d", p.status)
	}
	u.mustSignInTOTP(secret, s0+1)
	c.Add(time.Minute) // now step s0+2: codes of s0+1..s0+3 are within the skew
	acct = u.get("/dashboard/account")
	newSecret, newSealed := enrolForm(t, acct)
	newCode, current := codeOf(newSecret, s0+2), codeOf(secret, s0+2)
	for name, f := range map[string]url.Values{
		"replace with the new code only":   {"sealed": {newSealed}, "code": {newCode}},
		"replace without a current code":   {"sealed": {newSealed}, "code": {newCode}, "password": {password}},
		"replace with a wrong password":    {"sealed": {newSealed}, "code": {newCode}, "password": {"not it"}, "current": {current}},
		"turn off with the password only":  {"action": {"disable"}, "password": {password}},
		"turn off with the sign-in's code": {"action": {"disable"}, "password": {password}, "current": {codeOf(secret, s0+1)}},
	} {
		f.Set("csrf", csrfOf(t, acct))
		if p := u.post("/dashboard/account/totp", f); p.status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, p.status)
		}
		if stored().SealedTOTP != before {
			t.Fatalf("%s changed the second factor", name)
		}
	}
	// Failed confirmations count like sign-ins: clear them for the rest.
	clearAttempts(t, u)
	// A form kept from another session does not open, even with everything right.
	u.mustSignInTOTP(secret, s0+2)
	other := url.Values{"csrf": {csrfOf(t, u.get("/dashboard/account"))}, "sealed": {newSealed}, "code": {newCode},
		"password": {password}, "current": {codeOf(secret, s0+3)}}
	if p := u.post("/dashboard/account/totp", other); p.status != http.StatusBadRequest || stored().SealedTOTP != before {
		t.Errorf("an enrolment form of an earlier session: %d", p.status)
	}
	// A form of this session older than 15 minutes does not open either.
	acct = u.get("/dashboard/account")
	lateSecret, lateSealed := enrolForm(t, acct)
	c.Add(15*time.Minute + time.Second)
	now := dashboard.TOTPStep(c.Now())
	late := url.Values{"csrf": {csrfOf(t, acct)}, "sealed": {lateSealed}, "code": {codeOf(lateSecret, now)},
		"password": {password}, "current": {codeOf(secret, now)}}
	if p := u.post("/dashboard/account/totp", late); p.status != http.StatusBadRequest || stored().SealedTOTP != before {
		t.Errorf("an enrolment form older than 15 minutes: %d", p.status)
	}
	// With the password and a current code, the factor moves to the new key,
	// and the new key's enrolment code is used up: it does not sign in.
	acct = u.get("/dashboard/account")
	newSecret, newSealed = enrolForm(t, acct)
	right := url.Values{"csrf": {csrfOf(t, acct)}, "sealed": {newSealed}, "code": {codeOf(newSecret, now)},
		"password": {password}, "current": {codeOf(secret, now)}}
	if p := u.post("/dashboard/account/totp", right); p.status != http.StatusOK || !strings.Contains(p.body, "now replaced") {
		t.Fatalf("replace with password and current code: %d\n%.600s", p.status, p.body)
	}
	if p := signInTOTP(t, w, newSecret, now); p.status != http.StatusUnauthorized {
		t.Errorf("the new key's enrolment code signed in: %d", p.status)
	}
	if p := signInTOTP(t, w, secret, now+1); p.status != http.StatusUnauthorized {
		t.Errorf("the replaced key still signs in: %d", p.status)
	}
	if p := signInTOTP(t, w, newSecret, now+1); p.header.Get("Location") != "/dashboard/overview" {
		t.Errorf("the new key does not sign in: %d", p.status)
	}
}

func (u *user) mustSignInTOTP(secret string, step uint64) {
	u.t.Helper()
	if p := signInTOTP(u.t, u, secret, step); p.header.Get("Location") != "/dashboard/overview" {
		u.t.Fatalf("sign-in with TOTP: %d\n%.600s", p.status, p.body)
	}
}

// recordingStore notes the merchant of every user read or write.
type recordingStore struct {
	dashboard.Store
	mu        sync.Mutex
	merchants map[string]int
}

func (s *recordingStore) note(m string) {
	s.mu.Lock()
	s.merchants[m]++
	s.mu.Unlock()
}

func (s *recordingStore) DashboardUser(ctx context.Context, merchantID, email string) (*dashboard.User, error) {
	s.note(merchantID)
	return s.Store.DashboardUser(ctx, merchantID, email)
}

func (s *recordingStore) CreateDashboardUser(ctx context.Context, u *dashboard.User) error {
	s.note(u.MerchantID)
	return s.Store.CreateDashboardUser(ctx, u)
}

func (s *recordingStore) UpdateDashboardUser(ctx context.Context, u *dashboard.User) error {
	s.note(u.MerchantID)
	return s.Store.UpdateDashboardUser(ctx, u)
}

// An admin inviting an address that is another merchant's user gets the
// answer a new address gets, from the same reads and writes (none of the
// other merchant's records, so no timing either); the two users are
// separate identities that sign in separately.
func TestInvitingAnotherMerchantsAddressRevealsNothing(t *testing.T) {
	c := newClock()
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	rec := &recordingStore{merchants: map[string]int{}}
	base := clockedDashboardWith(t, c, func(d *dashboard.Deps) { rec.Store = d.Store; d.Store = rec })
	admin := newUser(t, a, dashboard.RoleAdmin)
	admin.base = base
	admin.mustSignIn()
	theirs := newUser(t, b, dashboard.RoleAdmin) // B's user, signed in at B
	theirs.mustSignIn()
	fresh := "fresh." + strings.ToLower(a.ID) + "@elsewhere.example"

	inviteAs := func(email string) (page, map[string]int) {
		form := url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {email}, "role": {"member"}}
		rec.mu.Lock()
		rec.merchants = map[string]int{}
		rec.mu.Unlock()
		p := admin.post("/dashboard/users", form)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return p, rec.merchants
	}
	pNew, rNew := inviteAs(fresh)
	pTaken, rTaken := inviteAs(theirs.email)
	norm := func(p page, email string) string {
		s := strings.ReplaceAll(p.body, email, "ADDRESS")
		s = regexp.MustCompile(`token=[A-Za-z0-9_%-]+`).ReplaceAllString(s, "token=T")
		s = regexp.MustCompile(`value="[A-Za-z0-9_-]{43}"`).ReplaceAllString(s, `value="CSRF"`)
		// The list holds both invited addresses after the second invite.
		s = regexp.MustCompile(`(?s)<ul id="users">.*?</ul>`).ReplaceAllString(s, "LIST")
		return s
	}
	if pNew.status != http.StatusOK || pTaken.status != pNew.status || norm(pTaken, theirs.email) != norm(pNew, fresh) {
		t.Errorf("answers differ: new address %d, another merchant's %d\n%s\n----\n%s", pNew.status, pTaken.status,
			norm(pNew, fresh), norm(pTaken, theirs.email))
	}
	for _, r := range []map[string]int{rNew, rTaken} {
		if len(r) != 1 || r[a.ID] == 0 {
			t.Errorf("an invitation read or wrote users of other merchants: %v", r)
		}
	}
	// B's user is untouched and still signed in; A's user of the address is
	// another identity, with its own password.
	if p := theirs.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("B's user lost its session: %d", p.status)
	}
	link := regexp.MustCompile(`id="invite-link" class="wrap">([^<]+)<`).FindStringSubmatch(pTaken.body)
	if link == nil {
		t.Fatal("no link for the address another merchant uses")
	}
	lu, _ := url.Parse(html(link[1]))
	mine := newBrowser(t, a.ID, theirs.email)
	mine.base = base
	const aPW = "the password at merchant A"
	if p := mine.setPassword(lu.Query().Get("token"), aPW); p.status != http.StatusOK {
		t.Fatalf("A's link: %d", p.status)
	}
	if p := mine.signIn(aPW); p.header.Get("Location") != "/dashboard/overview" || mine.get("/dashboard/account").status != http.StatusOK {
		t.Errorf("A's user of the address: %d", p.status)
	}
	if p := theirs.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("B's user's session after A's user set a password: %d", p.status)
	}
	other := newBrowser(t, b.ID, theirs.email)
	if p := other.signIn(aPW); p.status != http.StatusUnauthorized {
		t.Errorf("A's password signs in at B: %d", p.status)
	}
	other.mustSignIn()
}
