package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// dashBrowser is a browser of the local stack's dashboard without JavaScript.
type dashBrowser struct {
	t   *testing.T
	api string
	c   *http.Client
}

func newDashBrowser(t *testing.T) *dashBrowser {
	jar, _ := cookiejar.New(nil)
	return &dashBrowser{t: t, api: testenv.Stack(t).Info.APIBase, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *dashBrowser) do(method, path string, form url.Values) (int, string, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.api+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(got)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *dashBrowser) csrf(path string) string {
	b.t.Helper()
	_, _, body := b.do("GET", path, nil)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no form on %s", path)
	}
	return m[1]
}

// signIn posts the sign-in form and returns the status and where it leads.
func (b *dashBrowser) signIn(email, pw string) (int, string) {
	b.t.Helper()
	st, to, _ := b.do("POST", "/dashboard/login", url.Values{"csrf": {b.csrf("/dashboard/login")}, "email": {email}, "password": {pw}})
	return st, to
}

// seedLegacyUser stores a dashboard user as the service stored them before
// identities: per merchant, with its own password.
func seedLegacyUser(t *testing.T, merchantID, email, role, pw string) {
	t.Helper()
	st := testenv.Stack(t)
	cfg, _ := testenv.CountingAWSConfig(t)
	client := dynamodb.NewFromConfig(cfg)
	hash, err := sftpauth.HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(st.Resources.Tables["OperationsTable"]),
		Item: map[string]types.AttributeValue{"pk": s("dashmuser#" + merchantID), "sk": s(email), "email": s(email), "merchantId": s(merchantID),
			"role": s(role), "passwordHash": s(hash), "createdAt": s(at), "updatedAt": s(at), "version": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
}

// The migration on the local stack: users stored per merchant become one
// identity per address. The only user of an address signs in as before.
// An address with two users and two passwords is merged on no trust: the
// first sign-in proves one password (it becomes the person's), that
// merchant opens, the other waits until its own password links it. Two runs
// at once move every user once, and a later run changes nothing.
func TestMerchantUserMigrateTwoPasswordsAndRerun(t *testing.T) {
	m1, m2 := testenv.NewMerchant(t), testenv.NewMerchant(t)
	sfx := strconv.FormatInt(time.Now().UnixNano(), 36)
	single, twice := "single."+sfx+"@shop.example", "twice."+sfx+"@shop.example"
	const pwSingle, pw1, pw2 = "the single user's password", "the password at merchant one", "the password at merchant two"
	seedLegacyUser(t, m1.ID, single, dashuser.RoleAdmin, pwSingle)
	seedLegacyUser(t, m1.ID, twice, dashuser.RoleAdmin, pw1)
	seedLegacyUser(t, m2.ID, twice, dashuser.RoleMember, pw2)

	// Two runs at once (as two operators might, while the service runs).
	var wg sync.WaitGroup
	reports := make([]map[string]any, 2)
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, stderr, code := payctl(t, "merchant", "user", "migrate")
			if code != 0 {
				t.Errorf("migrate: exit %d: %s", code, stderr)
			}
			reports[i] = out
		}()
	}
	wg.Wait()
	sum := func(k string) float64 { return reports[0][k].(float64) + reports[1][k].(float64) }
	if sum("identities") < 1 || sum("unproven") < 2 {
		t.Errorf("two runs at once: %v and %v", reports[0], reports[1])
	}
	st := testenv.Stack(t).Store
	id, ms, err := st.Identity(context.Background(), twice)
	if err != nil || id != nil || len(ms) != 2 {
		t.Fatalf("two passwords: identity %+v, %d memberships (%v)", id, len(ms), err)
	}

	// The only user of its address signs in as before, to its merchant.
	b := newDashBrowser(t)
	if st, to := b.signIn(single, pwSingle); st != http.StatusSeeOther || to != dashboard.MerchantPath(m1.ID, "/overview") {
		t.Errorf("the single user's sign-in: %d %s", st, to)
	}
	// The first sign-in with two passwords proves one: merchant two's.
	p := newDashBrowser(t)
	if st, to := p.signIn(twice, pw2); st != http.StatusSeeOther || to != "/dashboard/merchants" {
		t.Fatalf("first sign-in (merchant two's password): %d %s", st, to)
	}
	if st, _, _ := p.do("GET", dashboard.MerchantPath(m2.ID, "/overview"), nil); st != http.StatusOK {
		t.Errorf("merchant two after its password: %d", st)
	}
	if st, _, _ := p.do("GET", dashboard.MerchantPath(m1.ID, "/overview"), nil); st != http.StatusNotFound {
		t.Errorf("merchant one opened without its own password: %d", st)
	}
	_, _, picker := p.do("GET", "/dashboard/merchants", nil)
	if !strings.Contains(picker, "Memberships to link") || !strings.Contains(picker, m1.ID) {
		t.Errorf("the picker does not offer to link merchant one:\n%.800s", picker)
	}
	// Merchant one's password is no sign-in of the person now.
	if st, _ := newDashBrowser(t).signIn(twice, pw1); st != http.StatusUnauthorized {
		t.Errorf("merchant one's password signs in the identity: %d", st)
	}
	// Linked with its own password (a wrong one first).
	link := func(pw string) (int, string) {
		st, to, _ := p.do("POST", "/dashboard/merchants/link", url.Values{"csrf": {p.csrf("/dashboard/merchants")}, "merchant": {m1.ID}, "password": {pw}})
		return st, to
	}
	if st, _ := link(pw2); st != http.StatusUnauthorized {
		t.Errorf("linking merchant one with the identity's password: %d", st)
	}
	if st, to := link(pw1); st != http.StatusSeeOther || to != dashboard.MerchantPath(m1.ID, "/overview") {
		t.Fatalf("linking merchant one with its password: %d %s", st, to)
	}
	if st, _, _ := p.do("GET", dashboard.MerchantPath(m1.ID, "/users"), nil); st != http.StatusOK {
		t.Errorf("merchant one (admin) after linking: %d", st)
	}
	if id, ms, _ := st.Identity(context.Background(), twice); id == nil || len(ms) != 2 || !ms[0].Usable() || !ms[1].Usable() {
		t.Errorf("after linking: %+v %+v", id, ms)
	}
	// A later run changes nothing.
	again, stderr, code := payctl(t, "merchant", "user", "migrate")
	if code != 0 {
		t.Fatalf("rerun: %d %s", code, stderr)
	}
	for _, k := range []string{"identities", "unproven", "invited", "skipped", "left"} {
		if again[k].(float64) != 0 {
			t.Errorf("rerun: %v", again)
			break
		}
	}
}

// An operator's password link (user reset) sets a new password of an
// existing person; an unknown address gets none.
func TestMerchantUserResetPrintsAPasswordLink(t *testing.T) {
	m := testenv.NewMerchant(t)
	email := "reset." + strings.ToLower(m.ID) + "@shop.example"
	if _, stderr, code := payctl(t, "merchant", "user", "add", "--id", m.ID, "--email", email); code != 0 {
		t.Fatal(stderr)
	}
	if _, _, code := payctl(t, "merchant", "user", "reset", "--email", email); code == 0 {
		t.Error("a reset link for an address that never set a password")
	}
	hash, _ := sftpauth.HashPassword("the first password of all")
	now := time.Now()
	if err := testenv.Stack(t).Store.CreateIdentity(context.Background(), &dashuser.Identity{Email: email, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := payctl(t, "merchant", "user", "reset", "--email", email)
	if code != 0 {
		t.Fatalf("reset: %d %s", code, stderr)
	}
	u, _ := url.Parse(out["setPasswordUrl"].(string))
	b := newDashBrowser(t)
	const pw = "a new password from the operator"
	if st, _, body := b.do("POST", "/dashboard/set-password", url.Values{"token": {u.Query().Get("token")}, "password": {pw}, "confirm": {pw}}); st != http.StatusOK {
		t.Fatalf("set password: %d\n%.500s", st, body)
	}
	if st, to := b.signIn(email, pw); st != http.StatusSeeOther || to != "/dashboard/merchants" {
		t.Errorf("sign-in with the new password: %d %s (the invitation waits on the list)", st, to)
	}
}

// rotate-key --overlap keeps the old key working until the overlap's end,
// which show prints; end-previous-key ends it now.
func TestRotateKeyWithOverlap(t *testing.T) {
	api := testenv.Stack(t).Info.APIBase
	created, _, _ := payctl(t, "merchant", "create", "--name", "Overlapping")
	id, old := created["id"].(string), created["apiKey"].(string)
	if _, _, code := payctl(t, "merchant", "rotate-key", "--id", id, "--overlap", "2h"); code != 2 {
		t.Errorf("an overlap that is not offered: exit %d, want 2", code)
	}
	rotated, stderr, code := payctl(t, "merchant", "rotate-key", "--id", id, "--overlap", "24h")
	if code != 0 {
		t.Fatalf("rotate: %d %s", code, stderr)
	}
	fresh := rotated["apiKey"].(string)
	until, err := time.Parse(time.RFC3339, rotated["previousApiKeyUntil"].(string))
	if err != nil || until.Sub(time.Now()) > 24*time.Hour || until.Sub(time.Now()) < 24*time.Hour-time.Minute {
		t.Fatalf("previousApiKeyUntil %v (%v)", rotated["previousApiKeyUntil"], err)
	}
	for name, key := range map[string]string{"old": old, "new": fresh} {
		if r := testenv.Do(t, "POST", api+"/payment-requests", key, `{"amount":1,"unit":"EUR"}`); r.Status != 201 {
			t.Errorf("%s key during the overlap: %d %s", name, r.Status, r.Body)
		}
	}
	shown, _, _ := payctl(t, "merchant", "show", "--id", id)
	if shown["previousApiKeyPrefix"] != old[:13] {
		t.Errorf("show: %v", shown)
	}
	if _, stderr, code := payctl(t, "merchant", "end-previous-key", "--id", id); code != 0 {
		t.Fatal(stderr)
	}
	// An instance that looks the old key up now refuses it (the stack's own
	// instance may have it cached for apikey.DefaultTTL).
	auth := apikey.New(testenv.Stack(t).Store)
	if _, err := auth.Authenticate(context.Background(), old); !errors.Is(err, apikey.ErrInvalidKey) {
		t.Errorf("the old key after end-previous-key: %v", err)
	}
	if _, err := auth.Authenticate(context.Background(), fresh); err != nil {
		t.Errorf("the new key: %v", err)
	}
}
