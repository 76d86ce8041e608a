package dashboard_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

// Invitation and password links, credential changes ending sessions,
// second-factor changes, and invitations that reveal nothing of other
// merchants.

// invite invites email to merchant m as payctl does, at now, and returns
// the link's token.
func invite(t *testing.T, m testenv.Merchant, email string, now time.Time) (token string, until time.Time) {
	t.Helper()
	s := testenv.Stack(t)
	link, until, err := dashboard.InviteUser(context.Background(), s.Store, m.ID, email, dashuser.RoleMember, "payctl", s.Info.APIBase, now)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	return u.Query().Get("token"), until
}

// reset issues an operator's password link for email (payctl user reset).
func reset(t *testing.T, email string, now time.Time) string {
	t.Helper()
	s := testenv.Stack(t)
	link, _, err := dashboard.ResetPassword(context.Background(), s.Store, email, "payctl", s.Info.APIBase, now)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	return u.Query().Get("token")
}

func (u *user) setPassword(token, pw string) page {
	u.t.Helper()
	return u.post("/dashboard/set-password", url.Values{"token": {token}, "password": {pw}, "confirm": {pw}})
}

// An invitation has one live link: inviting again voids the earlier one
// (page and form), using one voids it, links expire after InviteTTL, and
// the page that shows a link says until when it works. The same holds for
// an operator's password links, of which two racing set one password.
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
	// Two password links racing: at most one sets a password, the newer.
	a := reset(t, email, c.Now())
	b := reset(t, email, c.Now())
	var wg sync.WaitGroup
	var pa, pb page
	wg.Add(2)
	go func() { defer wg.Done(); pa = u.setPassword(a, password+" a") }()
	go func() { defer wg.Done(); pb = u.setPassword(b, password+" b") }()
	wg.Wait()
	if pa.status != http.StatusNotFound || pb.status != http.StatusOK {
		t.Errorf("older and newer link at once: %d and %d, want 404 and 200", pa.status, pb.status)
	}
	// Expiry, of an invitation and of a password link.
	other := testenv.NewMerchant(t)
	late, until := invite(t, other, email, c.Now())
	if want := c.Now().Add(dashboard.InviteTTL); !until.Equal(want) || dashboard.InviteTTL > 24*time.Hour {
		t.Errorf("link valid until %v, want %v (InviteTTL %v)", until, want, dashboard.InviteTTL)
	}
	lateReset := reset(t, email, c.Now())
	c.Add(dashboard.InviteTTL + time.Second)
	if p := u.get("/dashboard/set-password?token=" + url.QueryEscape(late)); p.status != http.StatusNotFound {
		t.Errorf("an expired invitation: %d", p.status)
	}
	if p := u.setPassword(lateReset, password+" late"); p.status != http.StatusNotFound {
		t.Errorf("an expired password link: %d", p.status)
	}
	// Where an admin sends an invitation, the page says until when its link works.
	admin := newUser(t, m, dashuser.RoleAdmin)
	admin.mustSignIn()
	p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {"next." + email}, "role": {"member"}})
	shown := regexp.MustCompile(`id="invite-until">([^<]+)<`).FindStringSubmatch(p.body)
	if shown == nil {
		t.Fatalf("the invitation's page does not say until when its link works:\n%s", p.body)
	}
	at, err := time.Parse("2006-01-02 15:04:05 UTC", shown[1])
	if err != nil || at.Sub(time.Now()) > dashboard.InviteTTL || at.Sub(time.Now()) < dashboard.InviteTTL-time.Minute {
		t.Errorf("shown expiry %q (%v)", shown[1], err)
	}
	// Inviting a member again issues no link: an admin cannot reset a
	// person's password (it may open other merchants).
	if p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {email}, "role": {"member"}}); p.status != http.StatusConflict || strings.Contains(p.body, "invite-sent") {
		t.Errorf("re-inviting a member: %d", p.status)
	}
}

// A new password (an operator's link) and a second-factor change end every
// existing session of the person on its next request, at every merchant;
// the browser that changed its factor stays signed in.
func TestCredentialChangesEndEverySessionOfTheUser(t *testing.T) {
	m, m2 := testenv.NewMerchant(t), testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	join(t, u.email, m2.ID, dashuser.RoleMember)
	other := newBrowser(t, m.ID, u.email)
	u.mustSignIn()
	other.mustSignIn()
	open := func(b *user) bool { return b.get("/dashboard/payments").status == http.StatusOK }
	openAt2 := func(b *user) bool { return b.in(m2.ID).get("/dashboard/payments").status == http.StatusOK }

	// Reset: a new link, used from a third browser.
	tok := reset(t, u.email, time.Now())
	if !open(u) || !open(other) || !openAt2(u) {
		t.Fatal("issuing a link alone ended the sessions")
	}
	const newPW = "a brand new password after reset"
	if p := newBrowser(t, m.ID, u.email).setPassword(tok, newPW); p.status != http.StatusOK {
		t.Fatalf("reset: %d", p.status)
	}
	if open(u) || open(other) || openAt2(u) {
		t.Fatal("a session opened before the password reset still works")
	}
	if p := u.signIn(password); p.status != http.StatusUnauthorized {
		t.Errorf("old password after reset: %d", p.status)
	}
	for _, b := range []*user{u, other} {
		if p := b.signIn(newPW); p.header.Get("Location") != "/dashboard/merchants" {
			t.Fatalf("new password: %d %s", p.status, p.header.Get("Location"))
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
	if !open(u) || !openAt2(u) {
		t.Error("the browser that turned TOTP on was signed out")
	}
	if open(other) {
		t.Error("another session survived turning TOTP on")
	}
	// Both merchants record it.
	for _, id := range []string{m.ID, m2.ID} {
		entries, _ := testenv.Stack(t).Store.AuditEntries(context.Background(), id, 20)
		found := false
		for _, e := range entries {
			found = found || (e.Action == "user.totp" && e.Actor == u.email)
		}
		if !found {
			t.Errorf("merchant %s's audit log lacks the second-factor change", id)
		}
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
	u := newUser(t, testenv.NewMerchant(t), dashuser.RoleMember)
	u.base = clockedDashboard(t, c)
	stored := func() *dashuser.Identity { return storedUser(t, u) }
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
	if p := signInTOTP(t, w, newSecret, now+1); p.header.Get("Location") != w.home() {
		t.Errorf("the new key does not sign in: %d", p.status)
	}
}

func (u *user) mustSignInTOTP(secret string, step uint64) {
	u.t.Helper()
	if p := signInTOTP(u.t, u, secret, step); p.header.Get("Location") != u.home() {
		u.t.Fatalf("sign-in with TOTP: %d\n%.600s", p.status, p.body)
	}
}

// recordingStore notes every read or write of people: the merchant of a
// membership, "identity:<email>" for an identity, "merchant:<id>" for a
// merchant.
type recordingStore struct {
	dashboard.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *recordingStore) note(m string) {
	s.mu.Lock()
	s.calls[m]++
	s.mu.Unlock()
}

func (s *recordingStore) Merchant(ctx context.Context, id string) (*merchant.Merchant, error) {
	s.note("merchant:" + id)
	return s.Store.Merchant(ctx, id)
}

func (s *recordingStore) Identity(ctx context.Context, email string) (*dashuser.Identity, []*dashuser.Membership, error) {
	s.note("identity:" + email)
	return s.Store.Identity(ctx, email)
}

func (s *recordingStore) UpdateIdentity(ctx context.Context, id *dashuser.Identity) error {
	s.note("identity:" + id.Email)
	return s.Store.UpdateIdentity(ctx, id)
}

func (s *recordingStore) Membership(ctx context.Context, email, merchantID string) (*dashuser.Membership, error) {
	s.note(merchantID)
	return s.Store.Membership(ctx, email, merchantID)
}

func (s *recordingStore) SaveMemberships(ctx context.Context, id *dashuser.Identity, ms ...*dashuser.Membership) error {
	if id != nil {
		s.note("identity:" + id.Email)
	}
	for _, m := range ms {
		s.note(m.MerchantID)
	}
	return s.Store.SaveMemberships(ctx, id, ms...)
}

// An admin inviting an address that is another merchant's person gets the
// answer a new address gets, from the same reads and writes (this
// merchant's membership only: never the identity nor another merchant's
// records, so no timing either), and never the link: it goes by e-mail to
// the address only, so the admin cannot learn what the link's page would
// ask (choose a password, or sign in and accept). Neither page nor log
// holds it. The person then accepts signed in, with their one password: no
// second identity, and their session at the other merchant is untouched.
func TestInvitingAnotherMerchantsAddressRevealsNothing(t *testing.T) {
	c := newClock()
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	rec := &recordingStore{calls: map[string]int{}}
	var logs syncBuffer
	base := clockedDashboardWith(t, c, func(d *dashboard.Deps) {
		rec.Store = d.Store
		d.Store = rec
		d.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	admin := newUser(t, a, dashuser.RoleAdmin)
	admin.base = base
	admin.mustSignIn()
	theirs := newUser(t, b, dashuser.RoleAdmin) // B's person, signed in at B
	theirs.mustSignIn()
	fresh := "fresh." + strings.ToLower(a.ID) + "@elsewhere.example"

	inviteAs := func(email string) (page, map[string]int) {
		form := url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {email}, "role": {"member"}}
		rec.mu.Lock()
		rec.calls = map[string]int{}
		rec.mu.Unlock()
		p := admin.post("/dashboard/users", form)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return p, maps.Clone(rec.calls)
	}
	pNew, rNew := inviteAs(fresh)
	pTaken, rTaken := inviteAs(theirs.email)
	norm := func(p page, email string) string {
		s := strings.ReplaceAll(p.body, email, "ADDRESS")
		s = regexp.MustCompile(`value="[A-Za-z0-9_-]{43}"`).ReplaceAllString(s, `value="CSRF"`)
		// The list holds both invited addresses after the second invite.
		s = regexp.MustCompile(`(?s)<ul id="users">.*?</ul>`).ReplaceAllString(s, "LIST")
		return s
	}
	if pNew.status != http.StatusOK || pTaken.status != pNew.status || norm(pTaken, theirs.email) != norm(pNew, fresh) {
		t.Errorf("answers differ: new address %d, another merchant's %d\n%s\n----\n%s", pNew.status, pTaken.status,
			norm(pNew, fresh), norm(pTaken, theirs.email))
	}
	for _, p := range []page{pNew, pTaken} {
		if !strings.Contains(p.body, `id="invite-sent"`) || strings.Contains(p.body, "set-password") || strings.Contains(p.body, "token") {
			t.Errorf("the admin's page does not say the invitation was sent, or shows its link:\n%s", p.body)
		}
	}
	if !maps.Equal(rNew, rTaken) {
		t.Errorf("the invitations made different calls: new address %v, another merchant's person %v", rNew, rTaken)
	}
	for k := range rTaken {
		if k != a.ID && k != "merchant:"+a.ID && k != "identity:"+admin.email {
			t.Errorf("an invitation read or wrote %q (only merchant A's membership and record, and the acting admin's session check)", k)
		}
	}
	// The links went to the addresses' mailboxes, with the same words.
	tok := mailedToken(t, theirs.email)
	freshTok := mailedToken(t, fresh)
	mNew, _, _ := testenv.Mailbox(t).Latest(fresh)
	mTaken, _, _ := testenv.Mailbox(t).Latest(theirs.email)
	if strings.ReplaceAll(mNew.Text, freshTok, "T") != strings.ReplaceAll(mTaken.Text, tok, "T") || mNew.Subject != mTaken.Subject {
		t.Errorf("the e-mails differ beyond their links:\n%s\n----\n%s", mNew.Text, mTaken.Text)
	}
	if logs.Len() == 0 || !strings.Contains(logs.String(), `"msg":"request"`) {
		t.Fatalf("the dashboard logged no request: the check below would prove nothing\n%s", logs.String())
	}
	for _, secret := range []string{tok, freshTok, "set-password?token"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds an invitation's link (%q)", secret)
		}
	}
	// The person's session at B is untouched.
	if p := theirs.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("B's person lost their session: %d", p.status)
	}
	// The link does not set a second password for a person who has one.
	stranger := newBrowser(t, a.ID, theirs.email)
	stranger.base = base
	if p := stranger.setPassword(tok, "the password someone else chose"); p.status != http.StatusConflict {
		t.Fatalf("the link set a password of an existing person: %d", p.status)
	}
	if p := stranger.signIn("the password someone else chose"); p.status != http.StatusUnauthorized {
		t.Errorf("the link's password signs in: %d", p.status)
	}
	// Signed in with their one password, the person accepts from the link's page.
	mine := theirs.in(a.ID)
	mine.base = base
	page := mine.get("/dashboard/set-password?token=" + url.QueryEscape(tok))
	if page.status != http.StatusOK || !strings.Contains(page.body, `id="accept"`) {
		t.Fatalf("the link's page for the signed-in person: %d\n%s", page.status, page.body)
	}
	if p := mine.post("/dashboard/merchants/accept", url.Values{"csrf": {csrfOf(t, page)}, "merchant": {a.ID}}); p.status != http.StatusSeeOther || p.header.Get("Location") != mine.home() {
		t.Fatalf("accept: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if p := mine.get("/dashboard/payments"); p.status != http.StatusOK {
		t.Errorf("A's pages after accepting: %d", p.status)
	}
	if p := theirs.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("B's pages after accepting A's invitation: %d", p.status)
	}
	if p := mine.get("/dashboard/set-password?token=" + url.QueryEscape(tok)); p.status != http.StatusNotFound {
		t.Errorf("the invitation's link after accepting: %d", p.status)
	}
}

// syncBuffer is a log destination the handler's goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int { return len(s.String()) }

// interfering changes the record a set-password write is about to replace,
// once, just before it (as a concurrent sign-in or admin would): the
// handler's guarded write meets a conflict and must try again on what is
// stored, though its link is used up by then.
type interfering struct {
	dashboard.Store
	once sync.Once
}

func (s *interfering) bump(ctx context.Context, email string) {
	s.once.Do(func() {
		id, ms, _ := s.Store.Identity(ctx, email)
		if id != nil {
			id.UpdatedAt = time.Now()
			_ = s.Store.UpdateIdentity(ctx, id)
		}
		for _, m := range ms {
			m.UpdatedAt = time.Now()
			_ = s.Store.SaveMemberships(ctx, nil, m)
		}
	})
}

func (s *interfering) UpdateIdentity(ctx context.Context, id *dashuser.Identity) error {
	s.bump(ctx, id.Email)
	return s.Store.UpdateIdentity(ctx, id)
}

func (s *interfering) SaveMemberships(ctx context.Context, id *dashuser.Identity, ms ...*dashuser.Membership) error {
	if len(ms) > 0 {
		s.bump(ctx, ms[0].Email)
	}
	return s.Store.SaveMemberships(ctx, id, ms...)
}

// A set-password write that loses a race to another change of the same
// records (its guard fails once) tries again and sets the password: the
// link, used up by then, is judged by the records it acts on. Both for an
// invitation (a new person) and an operator's password link.
func TestSetPasswordSurvivesAConcurrentChange(t *testing.T) {
	c := newClock()
	m := testenv.NewMerchant(t)
	email := "raced." + strings.ToLower(m.ID) + "@shop.example"
	tok, _ := invite(t, m, email, time.Now())
	st := &interfering{}
	u := newBrowser(t, m.ID, email)
	u.base = clockedDashboardWith(t, c, func(d *dashboard.Deps) { st.Store = d.Store; d.Store = st })
	if p := u.setPassword(tok, password); p.status != http.StatusOK {
		t.Fatalf("first password after a concurrent change: %d\n%.800s", p.status, p.body)
	}
	u.mustSignIn()
	st.once = sync.Once{}
	reset := reset(t, email, time.Now())
	const newPW = "a new password despite the race"
	if p := u.setPassword(reset, newPW); p.status != http.StatusOK {
		t.Fatalf("reset after a concurrent change: %d\n%.800s", p.status, p.body)
	}
	if p := u.signIn(newPW); p.status != http.StatusSeeOther {
		t.Errorf("the new password: %d", p.status)
	}
}
