package dashboard_test

// Tests of the dashboard against the real local stack (testenv): the
// function behind the local API gateway, DynamoDB/SQS/S3 emulators, real
// HTTP with a cookie jar, as a browser without JavaScript would use it.
//
//	go test -count=1 ./internal/dashboard/

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

func TestMain(m *testing.M) {
	// The Connectors page checks accounts against these (connectors_test.go).
	stripeAccounts.srv.Start()
	adyenAccounts.srv.Start()
	testenv.Options.Params = map[string]string{"LocalAccountStripeApiBase": stripeAccounts.srv.URL, "LocalAccountAdyenApiBase": adyenAccounts.srv.URL}
	testenv.Main(m)
}

const password = "correct horse battery staple"

// user is a signed-out browser of one person, working in one merchant:
// the tests name a merchant's pages by their short path
// ("/dashboard/profile"), which the browser puts under its merchant's
// address ("/dashboard/m/<merchant>/profile"; see at).
type user struct {
	t        testing.TB
	base     string
	merchant string
	email    string
	client   *http.Client
}

var emailSeq int

// newUser creates a person with password and an active membership of m
// with role, and returns their signed-out browser working in m.
func newUser(t testing.TB, m testenv.Merchant, role string) *user {
	t.Helper()
	emailSeq++
	email := strings.ToLower("u" + strconv.Itoa(emailSeq) + "." + m.ID + "@shop.example")
	newPerson(t, email)
	join(t, email, m.ID, role)
	return newBrowser(t, m.ID, email)
}

// newPerson creates an identity with password.
func newPerson(t testing.TB, email string) {
	t.Helper()
	hash, err := sftpauth.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	testenv.Seeded(t, "dashboard identity", testenv.Stack(t).Store.CreateIdentity(context.Background(),
		&dashuser.Identity{Email: email, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}))
}

// join makes email an active member of merchantID with role.
func join(t testing.TB, email, merchantID, role string) {
	t.Helper()
	now := time.Now()
	st := testenv.Stack(t).Store
	m, err := st.Merchant(context.Background(), merchantID)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Seeded(t, "dashboard membership", st.SaveMemberships(context.Background(), nil,
		&dashuser.Membership{Email: email, MerchantID: merchantID, MerchantName: m.Name, Role: role,
			State: dashuser.StateActive, CreatedAt: now, UpdatedAt: now}))
}

// newBrowser is a signed-out browser of the person email, working in merchantID.
func newBrowser(t testing.TB, merchantID, email string) *user {
	jar, _ := cookiejar.New(nil)
	return &user{t: t, base: testenv.Stack(t).Info.APIBase, merchant: merchantID, email: email, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// merchantPages are the first segments of a merchant's pages.
var merchantPages = []string{"overview", "profile", "payments", "batches", "users", "audit", "connectors"}

// at is the address of path for this browser: a merchant's page named by
// its short path goes under the browser's merchant; any other path (the
// person's pages, or a full /dashboard/m/... address) stays.
func (u *user) at(path string) string {
	rest, ok := strings.CutPrefix(path, "/dashboard/")
	if !ok {
		return path
	}
	first, _, _ := strings.Cut(rest, "/")
	first, _, _ = strings.Cut(first, "?")
	if slices.Contains(merchantPages, first) {
		return dashboard.MerchantPath(u.merchant, "/"+rest)
	}
	return path
}

// home is where a person of one merchant lands: its overview.
func (u *user) home() string { return dashboard.MerchantPath(u.merchant, "/overview") }

type page struct {
	status int
	header http.Header
	body   string
}

func (u *user) get(path string) page {
	u.t.Helper()
	return u.do(http.MethodGet, path, nil)
}

func (u *user) post(path string, form url.Values) page {
	u.t.Helper()
	return u.do(http.MethodPost, path, form)
}

func (u *user) do(method, path string, form url.Values) page {
	u.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u.base+u.at(path), body)
	if err != nil {
		u.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := u.client.Do(req)
	if err != nil {
		u.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header, string(b)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF field in the page (%d):\n%s", p.status, p.body)
	}
	return m[1]
}

func (u *user) cookie(name string) string {
	base, _ := url.Parse(u.base)
	for _, c := range u.client.Jar.Cookies(base) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// signIn signs in with pw and returns the response of the form post.
func (u *user) signIn(pw string) page {
	u.t.Helper()
	login := u.get("/dashboard/login")
	return u.post("/dashboard/login", url.Values{"csrf": {csrfOf(u.t, login)}, "email": {u.email}, "password": {pw}})
}

// mustSignIn signs in: a person of one merchant lands on its overview, a
// person of several on their merchants.
func (u *user) mustSignIn() {
	u.t.Helper()
	p := u.signIn(password)
	if to := p.header.Get("Location"); p.status != http.StatusSeeOther || (to != u.home() && to != "/dashboard/merchants") {
		u.t.Fatalf("sign-in: %d %s\n%s", p.status, to, p.body)
	}
}

// The local stack serves over plain http, so the cookie is the documented
// local variant: no Secure, no __Host- prefix; HttpOnly and SameSite=Strict
// always.
const sessionCookie = "payreq_session"

func TestSignInIssuesAFreshSessionIDAndSignOutEndsIt(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	// A fixation attempt: the attacker plants a session id of their own.
	base, _ := url.Parse(u.base)
	planted := dashuser.NewToken()
	u.client.Jar.SetCookies(base, []*http.Cookie{{Name: sessionCookie, Value: planted, Path: "/"}})
	p := u.signIn(password)
	if p.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d\n%s", p.status, p.body)
	}
	set := strings.Join(p.header.Values("Set-Cookie"), "\n")
	if !strings.Contains(set, sessionCookie+"=") || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") {
		t.Errorf("session cookie attributes: %s", set)
	}
	first := u.cookie(sessionCookie)
	if first == "" || first == planted {
		t.Fatalf("the session id was not renewed at sign-in (planted %q, now %q)", planted, first)
	}
	if got := u.get("/dashboard/profile"); got.status != http.StatusOK || !strings.Contains(got.body, m.ID) {
		t.Fatalf("profile after sign-in: %d", got.status)
	}
	// Signing in again (same browser) issues yet another id and kills the old one.
	u.mustSignIn()
	second := u.cookie(sessionCookie)
	if second == first {
		t.Error("a second sign-in kept the session id")
	}
	old := newBrowser(t, u.merchant, u.email)
	old.client.Jar.SetCookies(base, []*http.Cookie{{Name: sessionCookie, Value: first, Path: "/"}})
	if got := old.get("/dashboard/profile"); got.status != http.StatusSeeOther {
		t.Errorf("the replaced session id still opens the profile: %d", got.status)
	}
	// The table holds the hash of the id only.
	if _, err := testenv.Stack(t).Store.Session(context.Background(), second, time.Now()); err == nil {
		t.Error("the session is stored under its plain id")
	}
	out := u.post("/dashboard/logout", url.Values{"csrf": {csrfOf(t, u.get("/dashboard/profile"))}})
	if out.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", out.status)
	}
	again := newBrowser(t, u.merchant, u.email)
	again.client.Jar.SetCookies(base, []*http.Cookie{{Name: sessionCookie, Value: second, Path: "/"}})
	if got := again.get("/dashboard/profile"); got.status != http.StatusSeeOther {
		t.Errorf("the session still works after sign-out: %d", got.status)
	}
}

func TestEveryChangeNeedsTheSessionsCSRFToken(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	token := csrfOf(t, u.get("/dashboard/profile"))
	other := newUser(t, testenv.NewMerchant(t), dashuser.RoleAdmin)
	other.mustSignIn()
	otherToken := csrfOf(t, other.get("/dashboard/profile"))
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "notifyUrl": {"https://shop.example/changed"}, "notificationFormat": {"form"}}
	}
	for name, csrf := range map[string]string{"missing": "", "another session's": otherToken, "altered": alter(token)} {
		if p := u.post("/dashboard/profile", form(csrf)); p.status != http.StatusForbidden {
			t.Errorf("%s token: %d, want 403", name, p.status)
		}
	}
	// A rotate-key request without the token changes nothing either.
	if p := u.post("/dashboard/profile/api-key", url.Values{}); p.status != http.StatusForbidden {
		t.Errorf("rotate without token: %d", p.status)
	}
	got, err := testenv.Stack(t).Store.Merchant(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.NotifyURL != "" || got.APIKeyHash != m.APIKeyHash {
		t.Fatalf("a refused request changed the merchant: notifyUrl %q, key changed %v", got.NotifyURL, got.APIKeyHash != m.APIKeyHash)
	}
	if p := u.post("/dashboard/profile", form(token)); p.status != http.StatusOK {
		t.Fatalf("with the token: %d\n%s", p.status, p.body)
	}
	// The sign-in form has its own double-submit token.
	fresh := newBrowser(t, u.merchant, u.email)
	if p := fresh.post("/dashboard/login", url.Values{"email": {u.email}, "password": {password}}); p.status != http.StatusForbidden {
		t.Errorf("sign-in without the form's token: %d", p.status)
	}
}

// alter changes the first character of a token to a different one: never
// equal to the original, whatever the token is.
func alter(tok string) string {
	c := byte('A')
	if tok[0] == 'A' {
		c = 'B'
	}
	return string(c) + tok[1:]
}

func TestRepeatedFailuresLockTheUserOutWithBackOff(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	for i := 1; i <= lockout.MaxFailures; i++ {
		if p := u.signIn("wrong password " + strconv.Itoa(i)); p.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, p.status)
		}
	}
	// Locked: even the right password is refused, with the same answer.
	p := u.signIn(password)
	if p.status != http.StatusUnauthorized || u.cookie(sessionCookie) != "" {
		t.Fatalf("right password while locked: %d", p.status)
	}
	stored := attempts(t, u)
	if stored.Failures != lockout.MaxFailures || time.Until(stored.LockedUntil) <= 0 || time.Until(stored.LockedUntil) > lockout.LockFor(lockout.MaxFailures) {
		t.Errorf("failures %d, locked until %v", stored.Failures, stored.LockedUntil)
	}
	// An unknown address gets the same answer as a wrong password.
	ghost := newBrowser(t, m.ID, "nobody."+m.ID+"@shop.example")
	if g := ghost.signIn(password); g.status != p.status || !strings.Contains(g.body, "locked for a while") {
		t.Errorf("unknown address: %d", g.status)
	}
}

func TestLockForDoublesUpToAnHour(t *testing.T) {
	if lockout.LockFor(lockout.MaxFailures-1) != 0 {
		t.Error("locked before lockout.MaxFailures")
	}
	prev := lockout.LockFor(lockout.MaxFailures)
	if prev <= 0 {
		t.Fatal("no lock at lockout.MaxFailures")
	}
	for f := lockout.MaxFailures + 1; f < lockout.MaxFailures+12; f++ {
		d := lockout.LockFor(f)
		if d != min(2*prev, time.Hour) {
			t.Errorf("failure %d: %v after %v", f, d, prev)
		}
		prev = d
	}
}

func TestSetPasswordLinkWorksOnceAndSignsInWithTOTP(t *testing.T) {
	m := testenv.NewMerchant(t)
	s := testenv.Stack(t)
	email := "invited." + strings.ToLower(m.ID) + "@shop.example"
	link, _, err := dashboard.InviteUser(context.Background(), s.Store, m.ID, email, dashuser.RoleAdmin, "payctl", s.Info.APIBase, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	u := newBrowser(t, m.ID, email)
	path := strings.TrimPrefix(link, s.Info.APIBase)
	if p := u.get(path); p.status != http.StatusOK || !strings.Contains(p.body, email) {
		t.Fatalf("set-password page: %d", p.status)
	}
	tok := strings.TrimPrefix(path, "/dashboard/set-password?token=")
	tok, _ = url.QueryUnescape(tok)
	if p := u.post("/dashboard/set-password", url.Values{"token": {tok}, "password": {"short"}, "confirm": {"short"}}); p.status != http.StatusBadRequest {
		t.Errorf("short password: %d", p.status)
	}
	if p := u.post("/dashboard/set-password", url.Values{"token": {tok}, "password": {password}, "confirm": {password}}); p.status != http.StatusOK {
		t.Fatalf("set password: %d\n%s", p.status, p.body)
	}
	if p := u.post("/dashboard/set-password", url.Values{"token": {tok}, "password": {password + "2"}, "confirm": {password + "2"}}); p.status != http.StatusNotFound {
		t.Errorf("the link worked twice: %d", p.status)
	}
	u.mustSignIn()

	// Turn TOTP on: the account page's key, a code from it.
	acct := u.get("/dashboard/account")
	secret := regexp.MustCompile(`id="totp-secret">([A-Z2-7]+)<`).FindStringSubmatch(acct.body)
	sealed := regexp.MustCompile(`name="sealed" value="([^"]+)"`).FindStringSubmatch(acct.body)
	if secret == nil || sealed == nil {
		t.Fatalf("account page:\n%s", acct.body)
	}
	code, _ := dashboard.TOTPCode(secret[1], dashboard.TOTPStep(time.Now()))
	if p := u.post("/dashboard/account/totp", url.Values{"csrf": {csrfOf(t, acct)}, "sealed": {html(sealed[1])}, "code": {code}}); p.status != http.StatusOK || !strings.Contains(p.body, "now on") {
		t.Fatalf("enable TOTP: %d\n%s", p.status, p.body)
	}
	// Sign in again: the password alone opens only the code form.
	v := newBrowser(t, m.ID, email)
	if p := v.signIn(password); p.header.Get("Location") != "/dashboard/totp" {
		t.Fatalf("sign-in with TOTP on: %d %s", p.status, p.header.Get("Location"))
	}
	pending := v.cookie(sessionCookie)
	if p := v.get("/dashboard/profile"); p.status != http.StatusSeeOther {
		t.Errorf("a password-only session opens the profile: %d", p.status)
	}
	form := v.get("/dashboard/totp")
	wrong := wrongCode(t, secret[1])
	if p := v.post("/dashboard/totp", url.Values{"csrf": {csrfOf(t, form)}, "code": {wrong}}); p.status != http.StatusUnauthorized {
		t.Errorf("wrong code: %d", p.status)
	}
	// The enrolment code is used up; the next step's code (within the
	// accepted skew) signs in.
	code, _ = dashboard.TOTPCode(secret[1], dashboard.TOTPStep(time.Now())+1)
	if p := v.post("/dashboard/totp", url.Values{"csrf": {csrfOf(t, form)}, "code": {code}}); p.header.Get("Location") != u.home() {
		t.Fatalf("right code: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if v.cookie(sessionCookie) == pending {
		t.Error("the session id was not renewed after the second factor")
	}
	// The same code does not work twice.
	w := newBrowser(t, m.ID, email)
	if p := w.signIn(password); p.header.Get("Location") != "/dashboard/totp" {
		t.Fatalf("second sign-in: %d", p.status)
	}
	if p := w.post("/dashboard/totp", url.Values{"csrf": {csrfOf(t, w.get("/dashboard/totp"))}, "code": {code}}); p.status != http.StatusUnauthorized {
		t.Errorf("a replayed code: %d, want 401", p.status)
	}
	if p := v.get("/dashboard/profile"); p.status != http.StatusOK {
		t.Errorf("profile after TOTP: %d", p.status)
	}
}

// wrongCode returns a code no step near now accepts (never a valid one by chance).
func wrongCode(t *testing.T, secret string) string {
	near := map[string]bool{}
	step := dashboard.TOTPStep(time.Now())
	for s := step - 2; s <= step+3; s++ {
		c, err := dashboard.TOTPCode(secret, s)
		if err != nil {
			t.Fatal(err)
		}
		near[c] = true
	}
	for i := 0; ; i++ {
		if c := strconv.Itoa(100000 + i); !near[c] {
			return c
		}
	}
}

func html(s string) string {
	r := strings.NewReplacer("&#34;", `"`, "&#39;", "'", "&amp;", "&", "&lt;", "<", "&gt;", ">")
	return r.Replace(s)
}

func isNotFound(err error) bool { return errkind.Is(err, errkind.NotFound) }

var mailedLinkRE = regexp.MustCompile(`https?://\S+/dashboard/set-password\?token=\S+`)

// mailedToken is the token of the one-time link in the newest e-mail the
// stack's mailbox holds for email: the dashboard sends an invitation's
// link there (Amazon SES on AWS), never to the admin's page.
func mailedToken(t testing.TB, email string) string {
	t.Helper()
	m, ok, err := testenv.Mailbox(t).Latest(email)
	if err != nil || !ok {
		t.Fatalf("no e-mail to %s in %s (%v)", email, testenv.Mailbox(t), err)
	}
	link := mailedLinkRE.FindString(m.Text)
	if link == "" {
		t.Fatalf("the e-mail to %s holds no link:\n%s", email, m.Text)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("token")
}

// The payment list pages through a merchant's requests newest first, filters
// by status, reference and date, and exports the filtered list as CSV.
func TestPaymentListFiltersPagesAndExports(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	api := testenv.Stack(t).Info.APIBase
	var unpaid []string
	for i := 0; i < 27; i++ {
		r := testenv.Do(t, "POST", api+"/payment-requests", m.APIKey, `{"amount":`+strconv.Itoa(i+1)+`,"unit":"EUR","referenceId":"list-`+strconv.Itoa(i)+`"}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		unpaid = append(unpaid, strconv.FormatInt(int64(r.JSON(t)["id"].(float64)), 10))
	}
	paidID, _ := payH2H(t, m, "list-paid")
	paid := strconv.FormatInt(paidID, 10)
	ids := regexp.MustCompile(`<a href="/dashboard/m/[^/]+/payments/(\d+)">`)
	idsOf := func(p page) []string {
		var out []string
		for _, m := range ids.FindAllStringSubmatch(p.body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	first := u.get("/dashboard/payments")
	got := idsOf(first)
	if len(got) != 25 || got[0] != paid {
		t.Fatalf("first page: %d rows, first %v (want the paid one, newest)", len(got), got[:min(1, len(got))])
	}
	next := regexp.MustCompile(`href="([^"]+)" id="next-page"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatal("no next page link")
	}
	second := idsOf(u.get(strings.ReplaceAll(next[1], "&amp;", "&")))
	if len(second) != 3 {
		t.Fatalf("second page: %d rows", len(second))
	}
	seen := map[string]bool{}
	for _, id := range append(got, second...) {
		if seen[id] {
			t.Errorf("id %s on both pages", id)
		}
		seen[id] = true
	}
	if len(seen) != 28 {
		t.Errorf("%d distinct requests over the pages, want 28", len(seen))
	}
	if g := idsOf(u.get("/dashboard/payments?status=1")); len(g) != 1 || g[0] != paid {
		t.Errorf("status=paid: %v", g)
	}
	if g := idsOf(u.get("/dashboard/payments?ref=list-7")); len(g) != 1 || g[0] != unpaid[7] {
		t.Errorf("ref=list-7: %v", g)
	}
	// A range around now (not "today": the test may run across midnight).
	from, to := time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02"), time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	if g := idsOf(u.get("/dashboard/payments?from=" + from + "&to=" + to + "&status=2")); len(g) != 25 {
		t.Errorf("unpaid in range, first page: %d", len(g))
	}
	if g := idsOf(u.get("/dashboard/payments?from=" + to)); len(g) != 0 {
		t.Errorf("from tomorrow: %v", g)
	}
	if g := idsOf(u.get("/dashboard/payments?to=2000-01-01")); len(g) != 0 {
		t.Errorf("before 2000: %v", g)
	}
	if p := u.get("/dashboard/payments?from=yesterday"); p.status != http.StatusBadRequest {
		t.Errorf("bad date: %d", p.status)
	}
	if p := u.get("/dashboard/payments?cursor=forged"); p.status != http.StatusBadRequest {
		t.Errorf("forged cursor: %d", p.status)
	}
	csv := u.get("/dashboard/payments/export?status=2")
	lines := strings.Split(strings.TrimSpace(csv.body), "\n")
	if csv.status != http.StatusOK || !strings.HasPrefix(csv.header.Get("Content-Type"), "text/csv") || len(lines) != 28 ||
		!strings.HasPrefix(lines[0], "paymentRequestId,createdAt,status,amount") {
		t.Fatalf("CSV export: %d, %d lines\n%.300s", csv.status, len(lines), csv.body)
	}
	if strings.Contains(csv.body, paid) {
		t.Error("the status filter does not apply to the export")
	}
}

// An admin invites a member in the dashboard; the member signs in with the
// link's password and can read but not change settings, keys or users.
func TestAdminInvitesAMemberWhoCannotChangeSettings(t *testing.T) {
	m := testenv.NewMerchant(t)
	admin := newUser(t, m, dashuser.RoleAdmin)
	admin.mustSignIn()
	users := admin.get("/dashboard/users")
	email := "member." + strings.ToLower(m.ID) + "@shop.example"
	p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, users)}, "email": {email}, "role": {"member"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Invitation sent to") || strings.Contains(p.body, "set-password") ||
		!strings.Contains(p.body, email+" (member, invited until") {
		t.Fatalf("invite: %d\n%s", p.status, p.body)
	}
	if bad := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, users)}, "email": {"not an address"}, "role": {"member"}}); bad.status != http.StatusBadRequest {
		t.Errorf("invalid address: %d", bad.status)
	}
	member := newBrowser(t, m.ID, email)
	if r := member.post("/dashboard/set-password", url.Values{"token": {mailedToken(t, email)}, "password": {password}, "confirm": {password}}); r.status != http.StatusOK {
		t.Fatalf("set password: %d", r.status)
	}
	member.mustSignIn()
	prof := member.get("/dashboard/profile")
	if prof.status != http.StatusOK || strings.Contains(prof.body, `id="rotate-key"`) {
		t.Fatalf("member's profile: %d", prof.status)
	}
	token := csrfOf(t, prof)
	for path, form := range map[string]url.Values{
		"/dashboard/profile":                {"notifyUrl": {"https://member.example/n"}},
		"/dashboard/profile/api-key":        {},
		"/dashboard/profile/webhook-secret": {"action": {"reveal"}},
		"/dashboard/profile/sftp":           {"action": {"password"}, "password": {"a member's sftp password"}},
		"/dashboard/users":                  {"email": {"x." + strings.ToLower(m.ID) + "@shop.example"}, "role": {"admin"}},
	} {
		form.Set("csrf", token)
		if r := member.post(path, form); r.status != http.StatusForbidden {
			t.Errorf("member POST %s: %d, want 403", path, r.status)
		}
	}
	for _, path := range []string{"/dashboard/users", "/dashboard/audit"} {
		if r := member.get(path); r.status != http.StatusForbidden {
			t.Errorf("member GET %s: %d, want 403", path, r.status)
		}
	}
	got, err := testenv.Stack(t).Store.Merchant(context.Background(), m.ID)
	if err != nil || got.NotifyURL != "" || got.APIKeyHash != m.APIKeyHash {
		t.Errorf("a member changed the merchant (%v)", err)
	}
}

// Reveal shows the webhook secret; rotate replaces it, and the stored
// (sealed) secret is the new one.
func TestWebhookSecretRevealAndRotate(t *testing.T) {
	m := testenv.NewMerchant(t)
	u := newUser(t, m, dashuser.RoleAdmin)
	u.mustSignIn()
	secretRE := regexp.MustCompile(`id="webhook-secret">([^<]+)<`)
	prof := u.get("/dashboard/profile")
	if secretRE.MatchString(prof.body) {
		t.Fatal("the profile shows the webhook secret unasked")
	}
	r := u.post("/dashboard/profile/webhook-secret", url.Values{"csrf": {csrfOf(t, prof)}, "action": {"reveal"}})
	if s := secretRE.FindStringSubmatch(r.body); s == nil || s[1] != m.WebhookSecret {
		t.Fatalf("reveal: %d, %v", r.status, s)
	}
	r = u.post("/dashboard/profile/webhook-secret", url.Values{"csrf": {csrfOf(t, prof)}, "action": {"rotate"}})
	s := secretRE.FindStringSubmatch(r.body)
	if s == nil || s[1] == m.WebhookSecret || !strings.HasPrefix(s[1], "whsec_") {
		t.Fatalf("rotate: %d, %v", r.status, s)
	}
	again := u.post("/dashboard/profile/webhook-secret", url.Values{"csrf": {csrfOf(t, prof)}, "action": {"reveal"}})
	if got := secretRE.FindStringSubmatch(again.body); got == nil || got[1] != s[1] {
		t.Errorf("after rotation, reveal shows %v, want %s", got, s[1])
	}
	audit := u.get("/dashboard/audit").body
	if !strings.Contains(audit, "webhook-secret.rotate") || !strings.Contains(audit, "webhook-secret.reveal") || strings.Contains(audit, s[1]) {
		t.Error("audit log: rotation/reveal missing, or the secret in it")
	}
}

// The local stack seeds an admin of its sandbox merchant and publishes the
// credentials in stack.json (and the paydev banner).
func TestLocalStackSeedsADashboardAdmin(t *testing.T) {
	s := testenv.Stack(t)
	info, err := devstack.ReadInfo(testenv.StateDir(t))
	if err != nil {
		t.Fatal(err)
	}
	d := info.Dashboard
	if d.URL != s.Info.APIBase+"/dashboard" || d.Email == "" || len(d.Password) < dashboard.MinPasswordLen {
		t.Fatalf("stack.json dashboard: %+v", d)
	}
	u := newBrowser(t, d.MerchantID, d.Email)
	if p := u.signIn(d.Password); p.header.Get("Location") != u.home() {
		t.Fatalf("seeded sign-in: %d", p.status)
	}
	if p := u.get("/dashboard/profile"); !strings.Contains(p.body, s.Info.Merchant.ID) || !strings.Contains(p.body, `id="rotate-key"`) {
		t.Error("the seeded user is not an admin of the sandbox merchant")
	}
}

// The profile shows the host-to-host methods the merchant has, by kind, as
// operators set them (payctl merchant update --methods); a member sees them
// too, and nothing on the page changes them.
func TestProfileShowsTheMerchantsMethods(t *testing.T) {
	m := testenv.NewMerchant(t, func(m *merchant.Merchant) { m.Methods = []int{1, 30, 44, 45, 27} })
	u := newUser(t, m, dashuser.RoleMember)
	u.mustSignIn()
	prof := u.get("/dashboard/profile").body
	i := strings.Index(prof, `id="methods"`)
	if i < 0 {
		t.Fatal("no payment methods section on the profile")
	}
	got := prof[i:]
	got = got[:strings.Index(got, "</dl>")]
	want := `id="methods"><dt>Wallet A (Google Pay)</dt><dd>selectors 44, 45</dd><dt>Wallet B (Apple Pay)</dt><dd>not enabled</dd>` +
		`<dt>UPI</dt><dd>selectors 30</dd><dt>Alternative methods</dt><dd>selectors 27</dd><dt>Test selector</dt><dd>selectors 1</dd>`
	if got != want {
		t.Errorf("methods section\n got %s\nwant %s", got, want)
	}
	if strings.Contains(prof, `name="methods"`) {
		t.Error("the profile offers to change the methods; operators set them")
	}
}
