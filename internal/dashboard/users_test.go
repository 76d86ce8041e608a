package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/testenv"
)

// setRole and remove post the Users page's forms as admin u.
func (u *user) setRole(email, role string) page {
	u.t.Helper()
	return u.post("/dashboard/users/role", url.Values{"csrf": {csrfOf(u.t, u.get("/dashboard/users"))}, "email": {email}, "role": {role}})
}

func (u *user) remove(email string) page {
	u.t.Helper()
	return u.post("/dashboard/users/remove", url.Values{"csrf": {csrfOf(u.t, u.get("/dashboard/users"))}, "email": {email}})
}

// in is the same person's browser (the same session) at another merchant.
func (u *user) in(merchantID string) *user {
	v := *u
	v.merchant = merchantID
	return &v
}

func membership(t *testing.T, merchantID, email string) (*dashuser.Membership, error) {
	t.Helper()
	return testenv.Stack(t).Store.Membership(context.Background(), email, merchantID)
}

func roleOf(t *testing.T, merchantID, email string) string {
	t.Helper()
	m, err := membership(t, merchantID, email)
	if err != nil {
		t.Fatalf("membership of %s: %v", email, err)
	}
	return m.Role
}

// A removal or a role change acts on the person's next request at that
// merchant, without ending their session; their other merchants are
// untouched.
func TestRemovedAndDemotedMembersLoseAccessOnTheirNextRequest(t *testing.T) {
	m, other := testenv.NewMerchant(t), testenv.NewMerchant(t)
	a := newUser(t, m, dashuser.RoleAdmin)
	b := newUser(t, m, dashuser.RoleAdmin)
	c := newUser(t, m, dashuser.RoleMember)
	join(t, c.email, other.ID, dashuser.RoleMember) // c works for another merchant too
	for _, u := range []*user{a, b, c} {
		u.mustSignIn()
	}
	if p := b.get("/dashboard/users"); p.status != http.StatusOK {
		t.Fatalf("admin b before the change: %d", p.status)
	}

	// Demoted: b's very next request has the member pages only, in the
	// same session.
	if p := a.setRole(b.email, dashuser.RoleMember); p.status != http.StatusOK || !strings.Contains(p.body, b.email+" (member)") {
		t.Fatalf("demote b: %d\n%.800s", p.status, p.body)
	}
	if p := b.get("/dashboard/users"); p.status != http.StatusForbidden {
		t.Errorf("demoted admin still opens the users page: %d", p.status)
	}
	if p := b.post("/dashboard/profile/api-key", url.Values{"csrf": {csrfOf(t, b.get("/dashboard/profile"))}}); p.status != http.StatusForbidden {
		t.Errorf("demoted admin still rotates the key: %d", p.status)
	}
	if p := b.get("/dashboard/payments"); p.status != http.StatusOK || strings.Contains(p.body, `/users"`) {
		t.Errorf("demoted admin's member pages: %d (users link shown: %v)", p.status, strings.Contains(p.body, `/users"`))
	}

	// Removed: c's next request at m is 404, and so is every action there;
	// c's session still works at the other merchant.
	if p := a.remove(c.email); p.status != http.StatusOK || strings.Contains(p.body, c.email+" (") {
		t.Fatalf("remove c: %d\n%.800s", p.status, p.body)
	}
	if p := c.get("/dashboard/payments"); p.status != http.StatusNotFound {
		t.Errorf("removed member's page: %d, want 404", p.status)
	}
	if p := c.post("/dashboard/payments/1/redeliver", url.Values{"csrf": {"x"}}); p.status != http.StatusNotFound {
		t.Errorf("removed member's POST: %d", p.status)
	}
	if p := c.in(other.ID).get("/dashboard/payments"); p.status != http.StatusOK {
		t.Errorf("the removal ended c's access to another merchant: %d", p.status)
	}
	if _, err := membership(t, m.ID, c.email); !isNotFound(err) {
		t.Errorf("removed membership still stored: %v", err)
	}
	// Signing in again lands on c's only merchant left.
	if p := c.signIn(password); p.header.Get("Location") != dashboard.MerchantPath(other.ID, "/overview") {
		t.Errorf("c signs in to %q, want the other merchant", p.header.Get("Location"))
	}

	// The last admin can be neither demoted nor removed, not even by itself.
	if p := a.setRole(a.email, dashuser.RoleMember); p.status != http.StatusBadRequest || !strings.Contains(p.body, "at least one administrator") {
		t.Errorf("demote the last admin: %d", p.status)
	}
	if p := a.remove(a.email); p.status != http.StatusBadRequest {
		t.Errorf("remove the last admin: %d", p.status)
	}
	if roleOf(t, m.ID, a.email) != dashuser.RoleAdmin {
		t.Fatal("the last admin lost the role")
	}

	// Promoted: b gets the admin pages on its next request; then a may step down.
	if p := a.setRole(b.email, dashuser.RoleAdmin); p.status != http.StatusOK {
		t.Fatalf("promote b: %d", p.status)
	}
	if p := b.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("promoted member: %d", p.status)
	}
	if p := a.setRole(a.email, dashuser.RoleMember); p.status != http.StatusSeeOther || p.header.Get("Location") != a.home() {
		t.Fatalf("a steps down: %d %s", p.status, p.header.Get("Location"))
	}
	if p := a.get("/dashboard/audit"); p.status != http.StatusForbidden {
		t.Errorf("a stepped down but still reads the audit log: %d", p.status)
	}

	// Every change is in the audit log, with who did it.
	audit := b.get("/dashboard/audit").body
	for _, want := range []string{
		"user.role", html(b.email + ": admin → member"), html(b.email + ": member → admin"), html(a.email + ": admin → member"),
		"user.remove", html(c.email + " (member, active) removed"),
	} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
	if !strings.Contains(audit, html(a.email)) {
		t.Error("audit log does not name the admin who acted")
	}

	// An admin who is not the last may leave: the merchant's pages close,
	// the session stays (their list of merchants).
	d := newUser(t, m, dashuser.RoleAdmin)
	d.mustSignIn()
	if p := d.remove(d.email); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/merchants" {
		t.Errorf("admin removes itself: %d %s", p.status, p.header.Get("Location"))
	}
	if p := d.get("/dashboard/payments"); p.status != http.StatusNotFound {
		t.Errorf("self-removed admin still opens the merchant: %d", p.status)
	}
	if p := d.get("/dashboard/merchants"); p.status != http.StatusOK {
		t.Errorf("self-removed admin's session: %d", p.status)
	}

	// Invited again, c gets nothing until accepting.
	s := testenv.Stack(t)
	if _, _, err := dashboard.InviteUser(context.Background(), s.Store, m.ID, c.email, dashuser.RoleAdmin, "payctl", s.Info.APIBase, time.Now()); err != nil {
		t.Fatal(err)
	}
	if p := c.get("/dashboard/users"); p.status != http.StatusNotFound {
		t.Errorf("an invitation alone opened the merchant: %d", p.status)
	}
}

// Two admins demoting each other at once: the member-change lease
// serialises the last-admin check with the change, so one admin always
// remains.
func TestTwoAdminsDemotingEachOtherLeaveOneAdmin(t *testing.T) {
	m := testenv.NewMerchant(t)
	a := newUser(t, m, dashuser.RoleAdmin)
	b := newUser(t, m, dashuser.RoleAdmin)
	a.mustSignIn()
	b.mustSignIn()
	fa := url.Values{"csrf": {csrfOf(t, a.get("/dashboard/users"))}, "email": {b.email}, "role": {dashuser.RoleMember}}
	fb := url.Values{"csrf": {csrfOf(t, b.get("/dashboard/users"))}, "email": {a.email}, "role": {dashuser.RoleMember}}
	var wg sync.WaitGroup
	var pa, pb page
	wg.Add(2)
	go func() { defer wg.Done(); pa = a.post("/dashboard/users/role", fa) }()
	go func() { defer wg.Done(); pb = b.post("/dashboard/users/role", fb) }()
	wg.Wait()
	admins := 0
	for _, e := range []string{a.email, b.email} {
		if roleOf(t, m.ID, e) == dashuser.RoleAdmin {
			admins++
		}
	}
	if admins != 1 {
		t.Fatalf("%d admins left (answers %d and %d)", admins, pa.status, pb.status)
	}
	// One request succeeded; the other was refused (last admin, or already
	// demoted when it was checked).
	if (pa.status == http.StatusOK) == (pb.status == http.StatusOK) {
		t.Errorf("answers %d and %d: want exactly one 200", pa.status, pb.status)
	}
}

// 30 removals at once: two admins removing each other (15 each) leave
// exactly one admin; 30 removals of one member remove it once (one audit
// entry), never answer 5xx, and leave the member's other merchant alone.
func TestRemovalsAtOnceKeepAnAdminAndRemoveOnce(t *testing.T) {
	m, other := testenv.NewMerchant(t), testenv.NewMerchant(t)
	a := newUser(t, m, dashuser.RoleAdmin)
	b := newUser(t, m, dashuser.RoleAdmin)
	c := newUser(t, m, dashuser.RoleMember)
	join(t, c.email, other.ID, dashuser.RoleAdmin)
	for _, u := range []*user{a, b, c} {
		u.mustSignIn()
	}
	fa := url.Values{"csrf": {csrfOf(t, a.get("/dashboard/users"))}, "email": {b.email}}
	fb := url.Values{"csrf": {csrfOf(t, b.get("/dashboard/users"))}, "email": {a.email}}
	posts := make([]func() page, burst)
	for i := range posts {
		if i%2 == 0 {
			posts[i] = func() page { return a.post("/dashboard/users/remove", fa) }
		} else {
			posts[i] = func() page { return b.post("/dashboard/users/remove", fb) }
		}
	}
	ps := fire(t, posts)
	left := 0
	for _, e := range []string{a.email, b.email} {
		if mm, err := membership(t, m.ID, e); err == nil && mm.Role == dashuser.RoleAdmin {
			left++
		}
	}
	if left != 1 {
		t.Fatalf("%d admins left after removing each other at once", left)
	}
	for i, p := range ps {
		// 200 removed, 400 the last admin, 404 no longer a member, 409
		// busy (the lease, try again): never a 5xx.
		if p.status >= 500 {
			t.Errorf("removal %d: %d", i, p.status)
		}
	}
	admin := a
	if _, err := membership(t, m.ID, a.email); err != nil {
		admin = b
	}
	form := url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {c.email}}
	for i := range posts {
		posts[i] = func() page { return admin.post("/dashboard/users/remove", form) }
	}
	ps = fire(t, posts)
	if ok, gone, busy := countStatus(ps, http.StatusOK), countStatus(ps, http.StatusNotFound), countStatus(ps, http.StatusConflict); ok != 1 || ok+gone+busy != burst {
		t.Errorf("30 removals of one member: %d removed it, %d found it gone, %d busy; want exactly 1 removal and no other answer", ok, gone, busy)
	}
	if p := c.get("/dashboard/overview"); p.status != http.StatusNotFound {
		t.Errorf("the removed member's next request: %d", p.status)
	}
	if p := c.in(other.ID).get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("the removed member's other merchant: %d", p.status)
	}
	entries, err := testenv.Stack(t).Store.AuditEntries(context.Background(), m.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == "user.remove" && strings.HasPrefix(e.Detail, c.email+" ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d audit entries for one removal", n)
	}
}
