package lostanswer

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/mail"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

// TestLostAnswerBatchRow: one line of a batch file uploaded over the local
// SFTP server (the batch function runs on its S3 event, as on AWS).
func TestLostAnswerBatchRow(t *testing.T) {
	sweep(t, path{name: "a batch row (SFTP upload)", setup: func(r *run) {
		r.vars["password"] = "pw-" + r.m.ID
		hash, err := sftpauth.HashPassword(r.vars["password"])
		if err != nil {
			r.t.Fatal(err)
		}
		store := testenv.PatientStore(r.t, r.st)
		if err := store.SetSFTPPassword(context.Background(), r.m.ID, dynamo.SFTPUsername(r.m.ID), hash, time.Now()); err != nil {
			r.t.Fatal(err)
		}
	},
		act: func(r *run) {
			c := sftpClient(r)
			defer c.Close()
			f, err := c.Create("/incoming/pay.csv")
			if err != nil {
				r.t.Fatal(err)
			}
			line := "Ann Lee;4111111111111111;12/30;123;payer@example.com;4155550100;1 Main St;Springfield;IL;62701;US;12.50;EUR;ref-1\n"
			if _, err := f.Write([]byte(line)); err != nil {
				r.t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				r.t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if res, err := c.Open("/results/pay.csv.result.csv"); err == nil {
					b, _ := io.ReadAll(res)
					res.Close()
					if !strings.HasPrefix(string(b), "1;approved;") {
						r.t.Fatalf("result: %s", b)
					}
					return
				}
				if time.Now().After(deadline) {
					r.t.Fatal("no result file")
				}
				time.Sleep(100 * time.Millisecond)
			}
		},
		want: paidOnce})
}

func sftpClient(r *run) *sftp.Client {
	r.t.Helper()
	conn, err := ssh.Dial("tcp", r.st.Info.SFTPAddr, &ssh.ClientConfig{User: dynamo.SFTPUsername(r.m.ID),
		Auth: []ssh.AuthMethod{ssh.Password(r.vars["password"])}, Timeout: 10 * time.Second,
		HostKeyCallback: func(string, net.Addr, ssh.PublicKey) error { return nil }}) // the test's own local server
	if err != nil {
		r.t.Fatal(err)
	}
	c, err := sftp.NewClient(conn)
	if err != nil {
		conn.Close()
		r.t.Fatal(err)
	}
	return c
}

// browser is one person's browser without JavaScript, working in the
// run's merchant.
type browser struct {
	r      *run
	email  string
	client *http.Client
}

const dashPassword = "correct horse battery staple"

func newBrowser(r *run, email string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{r: r, email: email, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// person creates an identity with dashPassword and an active membership of
// each merchant with role.
func person(r *run, email, role string, merchantIDs ...string) {
	r.t.Helper()
	hash, err := sftpauth.HashPassword(dashPassword)
	if err != nil {
		r.t.Fatal(err)
	}
	now := time.Now()
	st := testenv.PatientStore(r.t, r.st)
	testenv.Seeded(r.t, "dashboard identity", st.CreateIdentity(context.Background(),
		&dashuser.Identity{Email: email, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}))
	for _, m := range merchantIDs {
		testenv.Seeded(r.t, "dashboard membership", st.SaveMemberships(context.Background(), nil, &dashuser.Membership{Email: email,
			MerchantID: m, Role: role, State: dashuser.StateActive, CreatedAt: now, UpdatedAt: now}))
	}
}

// withAdmin creates an admin of the run's merchant.
func withAdmin(r *run) *browser {
	r.t.Helper()
	email := "admin." + strings.ToLower(r.m.ID) + "@shop.example"
	person(r, email, dashuser.RoleAdmin, r.m.ID)
	return newBrowser(r, email)
}

// at is the address of the run's merchant's page rest ("/profile").
func at(r *run, rest string) string { return dashboard.MerchantPath(r.m.ID, rest) }

type page struct {
	status   int
	location string
	body     string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.r.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.r.api+path, body)
	if err != nil {
		b.r.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.r.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header.Get("Location"), string(got)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) csrf(path string) string {
	b.r.t.Helper()
	p := b.do("GET", path, nil)
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		b.r.t.Fatalf("no CSRF field on %s (%d)", path, p.status)
	}
	return m[1]
}

// signIn signs in with the address and password alone; a person of one
// merchant lands on its overview, of several on their merchants (landing).
func (b *browser) signIn(landing string) {
	b.r.t.Helper()
	p := b.do("POST", "/dashboard/login", url.Values{"csrf": {b.csrf("/dashboard/login")}, "email": {b.email}, "password": {dashPassword}})
	if p.status != http.StatusSeeOther || p.location != landing {
		b.r.t.Fatalf("sign-in: %d %s, want %s (a lost answer must not cost a sign-in)", p.status, p.location, landing)
	}
	if p := b.do("GET", landing, nil); p.status != http.StatusOK {
		b.r.t.Fatalf("%s after sign-in: %d", landing, p.status)
	}
}

var none = want{}

func TestLostAnswerDashboardSignIn(t *testing.T) {
	sweep(t, path{name: "dashboard sign-in (no merchant id)",
		setup: func(r *run) { r.vars["email"] = withAdmin(r).email },
		act:   func(r *run) { newBrowser(r, r.vars["email"]).signIn(at(r, "/overview")) },
		want:  none})
}

// A person of two merchants signs in to their list, then opens one (the
// picker's link) and switches to the other in the header.
func TestLostAnswerDashboardPickerAndSwitch(t *testing.T) {
	var b *browser
	sweep(t, path{name: "dashboard picker and switch merchant",
		setup: func(r *run) {
			other := testenv.NewMerchant(r.t)
			r.vars["other"] = other.ID
			email := "two." + strings.ToLower(r.m.ID) + "@shop.example"
			person(r, email, dashuser.RoleAdmin, r.m.ID, other.ID)
			b = newBrowser(r, email)
		},
		act: func(r *run) {
			b.signIn("/dashboard/merchants")
			if p := b.do("GET", at(r, "/overview"), nil); p.status != http.StatusOK {
				r.t.Fatalf("the picked merchant: %d", p.status)
			}
			p := b.do("POST", "/dashboard/merchants/switch", url.Values{"csrf": {b.csrf(at(r, "/overview"))}, "merchant": {r.vars["other"]}})
			to := dashboard.MerchantPath(r.vars["other"], "/overview")
			if p.status != http.StatusSeeOther || p.location != to {
				r.t.Fatalf("switch: %d %s (a lost answer must not fail a switch that applied)", p.status, p.location)
			}
			if p := b.do("GET", "/dashboard", nil); p.location != to {
				r.t.Fatalf("/dashboard after the switch lands on %q, want %q", p.location, to)
			}
		},
		want: none})
}

var linkRE = regexp.MustCompile(`/dashboard/set-password\?token=([^"<&\s]+)`)

func TestLostAnswerDashboardInvitation(t *testing.T) {
	var admin *browser
	sweep(t, path{name: "dashboard invitation",
		setup: func(r *run) { admin = withAdmin(r); admin.signIn(at(r, "/overview")) },
		act: func(r *run) {
			email := "new." + strings.ToLower(r.m.ID) + "@shop.example"
			p := admin.do("POST", at(r, "/users"), url.Values{"csrf": {admin.csrf(at(r, "/users"))},
				"email": {email}, "role": {dashuser.RoleMember}})
			if p.status != http.StatusOK || strings.Contains(p.body, "set-password") {
				r.t.Fatalf("invite: %d (the link goes to the invitee's mailbox only)\n%.400s", p.status, p.body)
			}
			// The link is in the e-mail to the invitee (the stack's mailbox).
			sent, ok, err := mail.Dir(r.st.Info.Mail).Latest(email)
			m := linkRE.FindStringSubmatch(sent.Text)
			if err != nil || !ok || m == nil {
				r.t.Fatalf("no e-mailed link to %s (%v)", email, err)
			}
			if page := newBrowser(r, "").do("GET", "/dashboard/set-password?token="+m[1], nil); page.status != http.StatusOK {
				r.t.Fatalf("the invitation's link: %d", page.status)
			}
		},
		want: none})
}

// A new person sets their first password through an invitation's link.
func TestLostAnswerDashboardSetPassword(t *testing.T) {
	sweep(t, path{name: "dashboard invitation link: a new person sets a password",
		setup: func(r *run) {
			email := "invited." + strings.ToLower(r.m.ID) + "@shop.example"
			link, _, err := dashboard.InviteUser(context.Background(), testenv.PatientStore(r.t, r.st), r.m.ID, email,
				dashuser.RoleAdmin, "payctl", r.api, time.Now())
			if err != nil {
				r.t.Fatal(err)
			}
			tok, _ := url.QueryUnescape(linkRE.FindStringSubmatch(link)[1])
			r.vars["token"], r.vars["email"] = tok, email
		},
		act: func(r *run) {
			b := newBrowser(r, r.vars["email"])
			form := url.Values{"token": {r.vars["token"]}, "password": {dashPassword}, "confirm": {dashPassword}}
			if p := b.do("POST", "/dashboard/set-password", form); p.status != http.StatusOK {
				r.t.Fatalf("set password: %d (a lost answer must not report a failure for a write that applied)\n%s", p.status, p.body)
			}
			if p := b.do("POST", "/dashboard/set-password", form); p.status != http.StatusNotFound {
				r.t.Fatalf("the link worked twice: %d", p.status)
			}
			b.signIn(at(r, "/overview"))
		},
		want: none})
}

// A person who already signs in (at another merchant) accepts an
// invitation to the run's merchant, signed in: no new password.
func TestLostAnswerDashboardAcceptAsExistingPerson(t *testing.T) {
	var b *browser
	sweep(t, path{name: "dashboard invitation accepted by an existing person",
		setup: func(r *run) {
			other := testenv.NewMerchant(r.t)
			email := "known." + strings.ToLower(r.m.ID) + "@shop.example"
			person(r, email, dashuser.RoleMember, other.ID)
			if _, _, err := dashboard.InviteUser(context.Background(), testenv.PatientStore(r.t, r.st), r.m.ID, email,
				dashuser.RoleAdmin, "payctl", r.api, time.Now()); err != nil {
				r.t.Fatal(err)
			}
			b = newBrowser(r, email)
			b.signIn("/dashboard/merchants") // an invitation waits: the list
		},
		act: func(r *run) {
			p := b.do("POST", "/dashboard/merchants/accept", url.Values{"csrf": {b.csrf("/dashboard/merchants")}, "merchant": {r.m.ID}})
			if p.status != http.StatusSeeOther || p.location != at(r, "/overview") {
				r.t.Fatalf("accept: %d %s (a lost answer must not fail an acceptance that applied)\n%.400s", p.status, p.location, p.body)
			}
			if p := b.do("GET", at(r, "/users"), nil); p.status != http.StatusOK {
				r.t.Fatalf("the accepted merchant's admin page: %d", p.status)
			}
		},
		want: none})
}

var newKeyRE = regexp.MustCompile(`<code id="new-api-key">([^<]+)</code>`)

// A key rotated with a 1-hour overlap: the new key and the old one work.
func TestLostAnswerDashboardKeyRotation(t *testing.T) {
	var admin *browser
	sweep(t, path{name: "API key rotation with an overlap",
		setup: func(r *run) { admin = withAdmin(r); admin.signIn(at(r, "/overview")) },
		act: func(r *run) {
			p := admin.do("POST", at(r, "/profile/api-key"), url.Values{"csrf": {admin.csrf(at(r, "/profile"))}, "overlap": {"1h"}})
			m := newKeyRE.FindStringSubmatch(p.body)
			if p.status != http.StatusOK || m == nil {
				r.t.Fatalf("rotate: %d", p.status)
			}
			if resp := testenv.Do(r.t, "POST", r.api+"/payment-requests", m[1], `{"amount":1,"unit":"EUR"}`); resp.Status != 201 {
				r.t.Fatalf("the new key: %d %s", resp.Status, resp.Body)
			}
			if resp := testenv.Do(r.t, "GET", r.api+"/payment-requests/status/1", r.m.APIKey, nil); resp.Status == http.StatusUnauthorized {
				r.t.Fatalf("the old key during its overlap: %d", resp.Status)
			}
		},
		want: want{requests: 1}})
}

// secretRE is the new secret as the page shows it: whsec_ and standard
// base64 (webhook.NewWebhookSecret), whose first character may be + or /.
var secretRE = regexp.MustCompile(`<code id="webhook-secret">whsec_[A-Za-z0-9+/]+=*</code>`)

func TestLostAnswerDashboardSecretRotation(t *testing.T) {
	var admin *browser
	sweep(t, path{name: "webhook secret rotation with an overlap",
		setup: func(r *run) { admin = withAdmin(r); admin.signIn(at(r, "/overview")) },
		act: func(r *run) {
			p := admin.do("POST", at(r, "/profile/webhook-secret"), url.Values{"csrf": {admin.csrf(at(r, "/profile"))}, "action": {"rotate"},
				"overlap": {"24h"}})
			if p.status != http.StatusOK || !secretRE.MatchString(p.body) || !strings.Contains(p.body, `id="previous-secret"`) {
				r.t.Fatalf("rotate the webhook secret: %d (new secret shown: %v)", p.status, secretRE.MatchString(p.body))
			}
		},
		want: none})
}
