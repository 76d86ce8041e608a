package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// One person, many merchants, over real HTTP on the local stack.

// A person of two merchants signs in once (address and password: no
// merchant id) and works in both, the two "tabs" one browser's cookie
// apart from their addresses: each page and action is the merchant's of
// its address, a form of one merchant's page does not act at the other,
// and each merchant's audit log records what the person did there.
func TestOnePersonSignsInOnceAndWorksInTwoMerchants(t *testing.T) {
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	tabA := newUser(t, a, dashuser.RoleAdmin)
	join(t, tabA.email, b.ID, dashuser.RoleAdmin)
	tabB := tabA.in(b.ID)
	if p := tabA.signIn(password); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/merchants" {
		t.Fatalf("sign-in of a person of two merchants: %d %s", p.status, p.header.Get("Location"))
	}
	picker := tabA.get("/dashboard/merchants")
	for _, id := range []string{a.ID, b.ID} {
		if !strings.Contains(picker.body, `href="`+dashboard.MerchantPath(id, "/overview")+`"`) {
			t.Errorf("the picker does not offer %s:\n%.1500s", id, picker.body)
		}
	}
	// Both tabs at once, interleaved: each page shows its own merchant.
	for range 2 {
		pa, pb := tabA.get("/dashboard/profile"), tabB.get("/dashboard/profile")
		if pa.status != http.StatusOK || !strings.Contains(pa.body, `id="merchant-id">`+a.ID) || strings.Contains(pa.body, b.ID+"</code>") {
			t.Fatalf("tab A's profile: %d", pa.status)
		}
		if pb.status != http.StatusOK || !strings.Contains(pb.body, `id="merchant-id">`+b.ID) {
			t.Fatalf("tab B's profile: %d", pb.status)
		}
	}
	// A change in each tab lands at its merchant.
	save := func(tab *user, url_ string) page {
		return tab.post("/dashboard/profile", url.Values{"csrf": {csrfOf(t, tab.get("/dashboard/profile"))}, "notifyUrl": {url_}, "notificationFormat": {"form"}})
	}
	if p := save(tabA, "https://a.example/hooks"); p.status != http.StatusOK {
		t.Fatalf("save at A: %d", p.status)
	}
	if p := save(tabB, "https://b.example/hooks"); p.status != http.StatusOK {
		t.Fatalf("save at B: %d", p.status)
	}
	st := testenv.Stack(t).Store
	ma, _ := st.Merchant(context.Background(), a.ID)
	mb, _ := st.Merchant(context.Background(), b.ID)
	if ma.NotifyURL != "https://a.example/hooks" || mb.NotifyURL != "https://b.example/hooks" {
		t.Errorf("notify URLs: A %q, B %q", ma.NotifyURL, mb.NotifyURL)
	}
	// A form of A's page posted to B's address: refused, nothing changes.
	tokenA := csrfOf(t, tabA.get("/dashboard/profile"))
	if p := tabB.post("/dashboard/profile", url.Values{"csrf": {tokenA}, "notifyUrl": {"https://crossed.example/n"}}); p.status != http.StatusForbidden {
		t.Errorf("A's form token at B: %d, want 403", p.status)
	}
	if mb, _ = st.Merchant(context.Background(), b.ID); mb.NotifyURL != "https://b.example/hooks" {
		t.Error("a form of A's page changed B")
	}
	// Each audit log has the person's own change, and only its own.
	for _, c := range []struct {
		tab         *user
		mine, other string
	}{{tabA, "a.example", "b.example"}, {tabB, "b.example", "a.example"}} {
		audit := c.tab.get("/dashboard/audit").body
		if !strings.Contains(audit, c.mine) || strings.Contains(audit, c.other) || !strings.Contains(audit, html(tabA.email)) {
			t.Errorf("the audit log at %s:\n%.1500s", c.tab.merchant, audit)
		}
	}
	// The switcher: the header lists the other merchant; switching opens it
	// and /dashboard lands there from then on.
	pa := tabA.get("/dashboard/overview")
	if !strings.Contains(pa.body, `id="switcher"`) || !strings.Contains(pa.body, `name="merchant" value="`+b.ID+`"`) {
		t.Fatalf("no switcher to B on A's page:\n%.1500s", pa.body)
	}
	p := tabA.post("/dashboard/merchants/switch", url.Values{"csrf": {csrfOf(t, pa)}, "merchant": {b.ID}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != tabB.home() {
		t.Fatalf("switch to B: %d %s", p.status, p.header.Get("Location"))
	}
	if p := tabA.get("/dashboard"); p.header.Get("Location") != tabB.home() {
		t.Errorf("/dashboard after switching lands on %q", p.header.Get("Location"))
	}
	// Tab A keeps working at A: the switch changed the landing page only.
	if p := tabA.get("/dashboard/payments"); p.status != http.StatusOK {
		t.Errorf("tab A after switching in another tab: %d", p.status)
	}
	// A merchant the person does not belong to: 404, not a switch.
	c := testenv.NewMerchant(t)
	if p := tabA.post("/dashboard/merchants/switch", url.Values{"csrf": {csrfOf(t, pa)}, "merchant": {c.ID}}); p.status != http.StatusNotFound {
		t.Errorf("switch to a merchant not theirs: %d", p.status)
	}
	// One second factor, labelled with the service: the authenticator shows
	// which service and which address it is.
	acct := tabA.get("/dashboard/account")
	m := regexp.MustCompile(`id="totp-uri">([^<]+)<`).FindStringSubmatch(acct.body)
	if m == nil {
		t.Fatalf("no TOTP URI on the account page:\n%.2000s", acct.body)
	}
	uri, err := url.Parse(html(m[1]))
	if err != nil || uri.Scheme != "otpauth" || uri.Host != "totp" {
		t.Fatalf("TOTP URI %q: %v", m[1], err)
	}
	if label, want := strings.TrimPrefix(uri.Path, "/"), "PayReq (127.0.0.1):"+tabA.email; label != want || uri.Query().Get("issuer") != "PayReq (127.0.0.1)" {
		t.Errorf("TOTP label %q, issuer %q; want %q and its prefix", label, uri.Query().Get("issuer"), want)
	}
}

// 30 acceptances of one invitation at once, from the signed-in person's
// session: never a 5xx, one membership, one audit entry.
func TestThirtyAcceptancesAtOnceJoinOnce(t *testing.T) {
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	u := newUser(t, b, dashuser.RoleMember)
	invite(t, a, u.email, time.Now())
	u.mustSignIn()
	pick := u.get("/dashboard/merchants")
	if !strings.Contains(pick.body, `id="invitations"`) {
		t.Fatalf("the invitation is not on the person's list:\n%.1500s", pick.body)
	}
	form := url.Values{"csrf": {csrfOf(t, pick)}, "merchant": {a.ID}}
	posts := make([]func() page, burst)
	for i := range posts {
		posts[i] = func() page { return u.post("/dashboard/merchants/accept", form) }
	}
	ps := fire(t, posts)
	for i, p := range ps {
		if !(p.status == http.StatusSeeOther && p.header.Get("Location") == dashboard.MerchantPath(a.ID, "/overview")) && p.status != http.StatusConflict {
			t.Errorf("acceptance %d: %d %s", i, p.status, p.header.Get("Location"))
		}
	}
	if m, err := membership(t, a.ID, u.email); err != nil || !m.Usable() || m.Role != dashuser.RoleMember {
		t.Fatalf("membership after 30 acceptances: %+v %v", m, err)
	}
	if p := u.in(a.ID).get("/dashboard/payments"); p.status != http.StatusOK {
		t.Errorf("A's pages after accepting: %d", p.status)
	}
	entries, _ := testenv.Stack(t).Store.AuditEntries(context.Background(), a.ID, 100)
	joins := 0
	for _, e := range entries {
		if e.Action == "user.join" {
			joins++
		}
	}
	if joins != 1 {
		t.Errorf("%d user.join entries for one acceptance", joins)
	}
}

// An invitation withdrawn (the membership removed) while the person sends
// 30 acceptances at once: when the removal has answered, no acceptance
// brings the membership back, and the person's next request is 404.
func TestAcceptancesRacingAWithdrawalNeverOutliveIt(t *testing.T) {
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	admin := newUser(t, a, dashuser.RoleAdmin)
	admin.mustSignIn()
	u := newUser(t, b, dashuser.RoleMember)
	invite(t, a, u.email, time.Now())
	u.mustSignIn()
	accept := url.Values{"csrf": {csrfOf(t, u.get("/dashboard/merchants"))}, "merchant": {a.ID}}
	withdraw := url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {u.email}}
	posts := make([]func() page, burst)
	for i := range posts {
		posts[i] = func() page { return u.post("/dashboard/merchants/accept", accept) }
	}
	posts[burst/2] = func() page { return admin.post("/dashboard/users/remove", withdraw) }
	ps := fire(t, posts)
	if ps[burst/2].status != http.StatusOK {
		t.Fatalf("the withdrawal: %d\n%.500s", ps[burst/2].status, ps[burst/2].body)
	}
	for i, p := range ps {
		if p.status >= 500 {
			t.Errorf("request %d: %d", i, p.status)
		}
	}
	if m, err := membership(t, a.ID, u.email); !isNotFound(err) {
		t.Errorf("a membership outlived its withdrawal: %+v %v", m, err)
	}
	if p := u.in(a.ID).get("/dashboard/payments"); p.status != http.StatusNotFound {
		t.Errorf("the person's next request at A: %d", p.status)
	}
	if p := u.get("/dashboard/payments"); p.status != http.StatusOK {
		t.Errorf("the person's own merchant: %d", p.status)
	}
}

// A person carried over from two per-merchant users (two passwords, no
// identity password yet) met by 30 sign-ins at once, half with each
// password: every answer is a sign-in, a refusal or "busy", never a 5xx;
// the identity ends with exactly one of the two passwords, every session
// opened was opened with that one, and the other membership still awaits
// its own password. Nothing is merged on trust, even at once.
func TestFirstSignInsAtOnceProveOnePassword(t *testing.T) {
	a, b := testenv.NewMerchant(t), testenv.NewMerchant(t)
	email := "twice." + strings.ToLower(a.ID) + "@shop.example"
	const pwA, pwB = "the password merchant A knew", "the password merchant B knew"
	st := testenv.Stack(t).Store
	now := time.Now()
	for _, x := range []struct{ m, pw string }{{a.ID, pwA}, {b.ID, pwB}} {
		hash, err := sftpauth.HashPassword(x.pw)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Seeded(t, "unproven membership", st.SaveMemberships(context.Background(), nil, &dashuser.Membership{Email: email,
			MerchantID: x.m, Role: dashuser.RoleAdmin, State: dashuser.StateUnproven, LegacyHash: hash, CreatedAt: now, UpdatedAt: now}))
	}
	u := newBrowser(t, a.ID, email)
	pws := make([]string, burst)
	for i := range pws {
		pws[i] = map[bool]string{true: pwA, false: pwB}[i%2 == 0]
	}
	ps := passwordBurst(t, u.base, u, pws)
	opened := map[string]int{}
	for i, p := range ps {
		switch {
		case p.status == http.StatusSeeOther && p.header.Get("Location") == "/dashboard/merchants":
			opened[pws[i]]++
		case p.status == http.StatusUnauthorized, p.status == http.StatusTooManyRequests:
		default:
			t.Errorf("sign-in %d: %d %s", i, p.status, p.header.Get("Location"))
		}
	}
	id, ms, err := st.Identity(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	if len(opened) > 1 {
		t.Fatalf("sessions opened with both passwords: %v", opened)
	}
	if len(opened) == 0 {
		// Under load every admitted attempt may have been refused as busy;
		// the lock waits out, then one sign-in proves a password.
		clearAttempts(t, u)
		if p := u.signIn(pwB); p.status != http.StatusSeeOther {
			t.Fatalf("a sign-in after the burst: %d", p.status)
		}
		opened[pwB]++
		if id, ms, err = st.Identity(context.Background(), email); err != nil {
			t.Fatal(err)
		}
	}
	var won, lost string
	for pw := range opened {
		won = pw
	}
	lost = map[string]string{pwA: pwB, pwB: pwA}[won]
	if id == nil || !sftpauth.CheckPassword(id.PasswordHash, won) || sftpauth.CheckPassword(id.PasswordHash, lost) {
		t.Fatalf("the identity's password is not the one that signed in")
	}
	usableN, unprovenN := 0, 0
	for _, m := range ms {
		switch m.State {
		case dashuser.StateActive:
			usableN++
		case dashuser.StateUnproven:
			unprovenN++
		}
	}
	if usableN != 1 || unprovenN != 1 {
		t.Errorf("after the first sign-ins: %d active, %d unproven; want one of each", usableN, unprovenN)
	}
}

// 30 posts of one new person's invitation link at once, each with its own
// password: one sets the password (the link works once), the others find
// it used; the identity has the winner's password.
func TestThirtyUsesOfAnInvitationLinkSetOnePassword(t *testing.T) {
	m := testenv.NewMerchant(t)
	email := "newbie." + strings.ToLower(m.ID) + "@shop.example"
	tok, _ := invite(t, m, email, time.Now())
	posts := make([]func() page, burst)
	for i := range posts {
		b := newBrowser(t, m.ID, email)
		pw := password + " " + strconv.Itoa(i)
		posts[i] = func() page { return b.setPassword(tok, pw) }
	}
	ps := fire(t, posts)
	winner := -1
	for i, p := range ps {
		switch p.status {
		case http.StatusOK:
			if winner >= 0 {
				t.Errorf("the link set a password twice (%d and %d)", winner, i)
			}
			winner = i
		case http.StatusNotFound:
		default:
			t.Errorf("use %d: %d", i, p.status)
		}
	}
	if winner < 0 {
		t.Fatal("no use set the password")
	}
	id, ms, err := testenv.Stack(t).Store.Identity(context.Background(), email)
	if err != nil || id == nil || len(ms) != 1 || !ms[0].Usable() {
		t.Fatalf("after the link: %+v %+v %v", id, ms, err)
	}
	if !sftpauth.CheckPassword(id.PasswordHash, password+" "+strconv.Itoa(winner)) {
		t.Error("the identity's password is not the winner's")
	}
}
