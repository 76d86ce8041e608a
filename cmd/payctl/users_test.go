package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/testenv"
)

// An operator invites a dashboard user; the printed link sets the password
// once, the user signs in, and the audit log names payctl's changes.
func TestMerchantUserAddPrintsAOneTimeSetPasswordLink(t *testing.T) {
	m := testenv.NewMerchant(t)
	email := "ops-invite." + strings.ToLower(m.ID) + "@shop.example"
	out, stderr, code := payctl(t, "merchant", "user", "add", "--id", m.ID, "--email", email)
	if code != 0 {
		t.Fatalf("user add: exit %d: %s", code, stderr)
	}
	link, _ := out["setPasswordUrl"].(string)
	api := testenv.Stack(t).Info.APIBase
	if !strings.HasPrefix(link, api+"/dashboard/set-password?token=") {
		t.Fatalf("link %q", link)
	}
	if _, _, code := payctl(t, "merchant", "update", "--id", m.ID, "--notify-url", "https://shop.example/n"); code != 0 {
		t.Fatal("update failed")
	}
	if _, _, code := payctl(t, "merchant", "user", "add", "--id", "mer_doesnotexist00", "--email", "x@shop.example"); code == 0 {
		t.Error("user add for an unknown merchant succeeded")
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	u, _ := url.Parse(link)
	const pw = "an operator-invited password"
	form := func(path string, v url.Values) string {
		resp, err := c.PostForm(api+path, v)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	get := func(path string) string {
		resp, err := c.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	form("/dashboard/set-password", url.Values{"token": {u.Query().Get("token")}, "password": {pw}, "confirm": {pw}})
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	login := get("/dashboard/login")
	page := form("/dashboard/login", url.Values{"csrf": {csrf.FindStringSubmatch(login)[1]}, "email": {email}, "password": {pw}})
	if !strings.Contains(page, "<h1>Overview</h1>") { // the dashboard's home after sign-in
		t.Fatalf("sign-in with the set password failed:\n%.500s", page)
	}
	audit := get(dashboard.MerchantPath(m.ID, "/audit"))
	for _, want := range []string{"user.invite", "settings.update", "payctl merchant update --notify-url", "user.join"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %q:\n%s", want, audit)
		}
	}
}
