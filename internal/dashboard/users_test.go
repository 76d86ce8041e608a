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

func roleOf(t *testing.T, merchantID, email string) string {
	t.Helper()
	u, err := testenv.Stack(t).Store.DashboardUser(context.Background(), merchantID, email)
	if err != nil {
		t.Fatalf("user %s: %v", email, err)
	}
	return u.Role
}

func TestRemovedAndDemotedUsersLoseAccessOnTheirNextRequest(t *testing.T) {
	m := testenv.NewMerchant(t)
	a := newUser(t, m, dashboard.RoleAdmin)
	b := newUser(t, m, dashboard.RoleAdmin)
	c := newUser(t, m, dashboard.RoleMember)
	for _, u := range []*user{a, b, c} {
		u.mustSignIn()
	}
	if p := b.get("/dashboard/users"); p.status != http.StatusOK {
		t.Fatalf("admin b before the change: %d", p.status)
	}

	// Demoted: a role change ends b's sessions on their next request; signed
	// in again, b has the member pages only.
	if p := a.setRole(b.email, dashboard.RoleMember); p.status != http.StatusOK || !strings.Contains(p.body, b.email+" (member)") {
		t.Fatalf("demote b: %d\n%.800s", p.status, p.body)
	}
	if p := b.get("/dashboard/users"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/login" {
		t.Errorf("demoted admin's session still works: %d", p.status)
	}
	b.mustSignIn()
	if p := b.get("/dashboard/users"); p.status != http.StatusForbidden {
		t.Errorf("demoted admin still opens the users page: %d", p.status)
	}
	if p := b.post("/dashboard/profile/api-key", url.Values{"csrf": {csrfOf(t, b.get("/dashboard/profile"))}}); p.status != http.StatusForbidden {
		t.Errorf("demoted admin still rotates the key: %d", p.status)
	}
	if p := b.get("/dashboard/payments"); p.status != http.StatusOK || strings.Contains(p.body, `href="/dashboard/users"`) {
		t.Errorf("demoted admin's member pages: %d (users link shown: %v)", p.status, strings.Contains(p.body, `href="/dashboard/users"`))
	}

	// Removed: c's live session is signed out on its next request, and c
	// cannot sign in again.
	if p := a.remove(c.email); p.status != http.StatusOK || strings.Contains(p.body, c.email+" (") {
		t.Fatalf("remove c: %d\n%.800s", p.status, p.body)
	}
	if p := c.get("/dashboard/payments"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/login" {
		t.Errorf("removed user's session still works: %d %s", p.status, p.header.Get("Location"))
	}
	if p := c.post("/dashboard/payments/1/redeliver", url.Values{"csrf": {"x"}}); p.status != http.StatusUnauthorized {
		t.Errorf("removed user's POST: %d", p.status)
	}
	if p := c.signIn(password); p.status != http.StatusUnauthorized {
		t.Errorf("removed user signs in: %d", p.status)
	}
	if _, err := testenv.Stack(t).Store.DashboardUser(context.Background(), m.ID, c.email); !isNotFound(err) {
		t.Errorf("removed user still stored: %v", err)
	}

	// The last admin can be neither demoted nor removed, not even by itself.
	if p := a.setRole(a.email, dashboard.RoleMember); p.status != http.StatusBadRequest || !strings.Contains(p.body, "at least one administrator") {
		t.Errorf("demote the last admin: %d", p.status)
	}
	if p := a.remove(a.email); p.status != http.StatusBadRequest {
		t.Errorf("remove the last admin: %d", p.status)
	}
	if roleOf(t, m.ID, a.email) != dashboard.RoleAdmin {
		t.Fatal("the last admin lost the role")
	}

	// Promoted: b gets the admin pages on its next request; then a may step down.
	if p := a.setRole(b.email, dashboard.RoleAdmin); p.status != http.StatusOK {
		t.Fatalf("promote b: %d", p.status)
	}
	if p := b.get("/dashboard/users"); p.status != http.StatusSeeOther {
		t.Errorf("promoted user's old session: %d, want it ended", p.status)
	}
	b.mustSignIn()
	if p := b.get("/dashboard/users"); p.status != http.StatusOK {
		t.Errorf("promoted user: %d", p.status)
	}
	// Stepping down ends a's other sessions; the acting browser gets a new
	// member session.
	if p := a.setRole(a.email, dashboard.RoleMember); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/account" {
		t.Fatalf("a steps down: %d %s", p.status, p.header.Get("Location"))
	}
	if p := a.get("/dashboard/audit"); p.status != http.StatusForbidden {
		t.Errorf("a stepped down but still reads the audit log: %d", p.status)
	}

	// Every change is in the audit log, with who did it.
	audit := b.get("/dashboard/audit").body
	for _, want := range []string{
		"user.role", html(b.email + ": admin → member"), html(b.email + ": member → admin"), html(a.email + ": admin → member"),
		"user.remove", html(c.email + " (member) removed"),
	} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
	if !strings.Contains(audit, html(a.email)) {
		t.Error("audit log does not name the admin who acted")
	}

	// An admin who is not the last may remove itself: signed out at once.
	d := newUser(t, m, dashboard.RoleAdmin)
	d.mustSignIn()
	if p := d.remove(d.email); p.status != http.StatusSeeOther || p.header.Get("Location") != "/dashboard/login" {
		t.Errorf("admin removes itself: %d %s", p.status, p.header.Get("Location"))
	}
	if p := d.get("/dashboard/payments"); p.status != http.StatusSeeOther {
		t.Errorf("self-removed admin still signed in: %d", p.status)
	}

	// A removed address invited again is a new user: the old session stays dead.
	s := testenv.Stack(t)
	old := c.cookie(sessionCookie)
	if _, _, err := dashboard.InviteUser(context.Background(), s.Store, isNotFound, m.ID, c.email, dashboard.RoleAdmin, "payctl", s.Info.APIBase, time.Now()); err != nil {
		t.Fatal(err)
	}
	revived := newBrowser(t, m.ID, c.email)
	base, _ := url.Parse(revived.base)
	revived.client.Jar.SetCookies(base, []*http.Cookie{{Name: sessionCookie, Value: old, Path: "/"}})
	if p := revived.get("/dashboard/users"); p.status != http.StatusSeeOther {
		t.Errorf("a removed user's old session works for the re-invited address: %d", p.status)
	}
}

// Two admins demoting each other at once: the user-change lease serialises
// the last-admin check with the change, so one admin always remains.
func TestTwoAdminsDemotingEachOtherLeaveOneAdmin(t *testing.T) {
	m := testenv.NewMerchant(t)
	a := newUser(t, m, dashboard.RoleAdmin)
	b := newUser(t, m, dashboard.RoleAdmin)
	a.mustSignIn()
	b.mustSignIn()
	fa := url.Values{"csrf": {csrfOf(t, a.get("/dashboard/users"))}, "email": {b.email}, "role": {dashboard.RoleMember}}
	fb := url.Values{"csrf": {csrfOf(t, b.get("/dashboard/users"))}, "email": {a.email}, "role": {dashboard.RoleMember}}
	var wg sync.WaitGroup
	var pa, pb page
	wg.Add(2)
	go func() { defer wg.Done(); pa = a.post("/dashboard/users/role", fa) }()
	go func() { defer wg.Done(); pb = b.post("/dashboard/users/role", fb) }()
	wg.Wait()
	admins := 0
	for _, e := range []string{a.email, b.email} {
		if roleOf(t, m.ID, e) == dashboard.RoleAdmin {
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
