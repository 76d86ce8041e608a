package dashboard_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	bt "github.com/payreq/payreq/internal/browsertest"
	"github.com/payreq/payreq/internal/dashboard"
	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/mail"
	"github.com/payreq/payreq/internal/testenv"
)

// Invitations go by e-mail to the invitee only: what happens when the
// e-mail cannot be sent, and the whole round in Chromium.

// outage is a mailer whose sends fail while down (as SES does when it
// throttles or refuses); it keeps what it could not send, and once up it
// delivers to the stack's mailbox.
type outage struct {
	mu     sync.Mutex
	down   bool
	unsent []mail.Message
	to     mail.Dir
}

func (o *outage) Send(ctx context.Context, m mail.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		o.unsent = append(o.unsent, m)
		return errors.New("ses SendEmail: Throttling: Maximum sending rate exceeded")
	}
	return o.to.Send(ctx, m)
}

// A failure to send the e-mail after the invitation was written is not
// lost: the admin's answer is 503 and says so (no link), the audit log and
// the service's log record it, and the invitation stays, listed with "Send
// again"; sending again e-mails a new link that works, and the unsent one
// never does.
func TestAnInvitationWhoseEmailFailsSaysSoAndSendsAgain(t *testing.T) {
	c := newClock()
	m := testenv.NewMerchant(t)
	mailer := &outage{down: true, to: testenv.Mailbox(t)}
	var logs syncBuffer
	base := clockedDashboardWith(t, c, func(d *dashboard.Deps) {
		d.Mailer = mailer
		d.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	admin := newUser(t, m, dashuser.RoleAdmin)
	admin.base = base
	admin.mustSignIn()
	email := "unsent." + strings.ToLower(m.ID) + "@shop.example"

	p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {email}, "role": {"admin"}})
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "could not be sent") || strings.Contains(p.body, "invite-sent") ||
		strings.Contains(p.body, "set-password") {
		t.Fatalf("invitation whose e-mail failed: %d\n%s", p.status, p.body)
	}
	if len(mailer.unsent) != 1 {
		t.Fatalf("%d sends, want 1", len(mailer.unsent))
	}
	unsent := mailedLinkRE.FindString(mailer.unsent[0].Text)
	if unsent == "" {
		t.Fatalf("the unsent e-mail holds no link:\n%s", mailer.unsent[0].Text)
	}
	if got, err := testenv.Stack(t).Store.Membership(context.Background(), email, m.ID); err != nil || got.State != dashuser.StateInvited {
		t.Fatalf("the invitation is not kept: %+v %v", got, err)
	}
	if !strings.Contains(logs.String(), "invitation e-mail not sent") || strings.Contains(logs.String(), "set-password") {
		t.Errorf("the log does not record the failure, or holds the link:\n%s", logs.String())
	}
	audit := admin.get("/dashboard/audit")
	if !strings.Contains(audit.body, email+" (admin) invited; the e-mail with the link could not be sent") {
		t.Errorf("the audit log does not record the unsent e-mail:\n%s", audit.body)
	}

	// The list offers to send it again; that form sends a new link.
	users := admin.get("/dashboard/users")
	again := regexp.MustCompile(`<input type="hidden" name="email" value="` + regexp.QuoteMeta(email) + `"><input type="hidden" name="role" value="admin"><button type="submit" class="resend"`)
	if !again.MatchString(users.body) {
		t.Fatalf("the users page offers no \"Send again\" for the invitation:\n%s", users.body)
	}
	mailer.mu.Lock()
	mailer.down = false
	mailer.mu.Unlock()
	if p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, users)}, "email": {email}, "role": {"admin"}}); p.status != http.StatusOK ||
		!strings.Contains(p.body, "Invitation sent to") {
		t.Fatalf("send again: %d\n%s", p.status, p.body)
	}
	u, _ := url.Parse(unsent)
	invitee := newBrowser(t, m.ID, email)
	invitee.base = base
	if p := invitee.setPassword(u.Query().Get("token"), password); p.status != http.StatusNotFound {
		t.Errorf("the unsent link works: %d", p.status)
	}
	if p := invitee.setPassword(mailedToken(t, email), password); p.status != http.StatusOK {
		t.Fatalf("the link sent again: %d\n%s", p.status, p.body)
	}
	invitee.mustSignIn()
}

// hanging is a mailer that never answers: it waits for its context.
type hanging struct{}

func (hanging) Send(ctx context.Context, _ mail.Message) error {
	<-ctx.Done()
	return ctx.Err()
}

// A mail service that never answers still gets the admin the 503 page
// before the function's deadline (Lambda's, on the request's context), not
// a timeout with no word of the invitation.
func TestAHangingMailerAnswersBeforeTheDeadline(t *testing.T) {
	const deadline = 5 * time.Second
	c := newClock()
	m := testenv.NewMerchant(t)
	base := clockedDashboardServing(t, c, func(d *dashboard.Deps) { d.Mailer = hanging{} }, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), deadline)
			defer cancel()
			h.ServeHTTP(w, r.WithContext(ctx))
		})
	})
	admin := newUser(t, m, dashuser.RoleAdmin)
	admin.base = base
	admin.mustSignIn()
	form := url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {"hang." + strings.ToLower(m.ID) + "@shop.example"}, "role": {"member"}}
	start := time.Now()
	p := admin.post("/dashboard/users", form)
	if took := time.Since(start); p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "could not be sent") || took >= deadline {
		t.Fatalf("with a mailer that hangs: %d after %v (deadline %v)\n%.600s", p.status, took, deadline, p.body)
	}
}

// With no mailer (a stack without InvitationSender) the dashboard invites
// nobody: 503 saying why, and nothing is written.
func TestNoMailerNoInvitation(t *testing.T) {
	c := newClock()
	m := testenv.NewMerchant(t)
	base := clockedDashboardWith(t, c, func(d *dashboard.Deps) { d.Mailer = nil })
	admin := newUser(t, m, dashuser.RoleAdmin)
	admin.base = base
	admin.mustSignIn()
	email := "nomail." + strings.ToLower(m.ID) + "@shop.example"
	p := admin.post("/dashboard/users", url.Values{"csrf": {csrfOf(t, admin.get("/dashboard/users"))}, "email": {email}, "role": {"member"}})
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "InvitationSender") {
		t.Fatalf("invite without a mailer: %d\n%s", p.status, p.body)
	}
	if _, err := testenv.Stack(t).Store.Membership(context.Background(), email, m.ID); !isNotFound(err) {
		t.Errorf("an invitation was written without a mailer: %v", err)
	}
}

// In Chromium: the admin invites; the page says "Invitation sent to
// <address>, valid until <time>" and holds no link anywhere in its DOM;
// the invitee opens the link from their mailbox, chooses a password and
// signs in.
func TestBrowserInvitationGoesToTheMailboxOnly(t *testing.T) {
	base := testenv.Stack(t).Info.APIBase
	m := testenv.NewMerchant(t)
	admin := newUser(t, m, dashuser.RoleAdmin)
	email := "mailed." + strings.ToLower(m.ID) + "@shop.example"

	tab := bt.New(t)
	signInTab(t, tab, admin)
	bt.Navigate(t, tab, base+admin.at("/dashboard/users"))
	navigateBy(t, tab, `document.querySelector("#email").value = `+bt.JS(email)+`; document.querySelector("#invite").click()`)
	sent := bt.Eval[string](t, tab, text("#invite-sent"))
	if !strings.HasPrefix(sent, "Invitation sent to "+email+", valid until ") || !strings.HasSuffix(sent, "(24 hours).") {
		t.Fatalf("the admin's page says %q", sent)
	}
	if src := bt.Eval[string](t, tab, `document.documentElement.outerHTML`); strings.Contains(src, "set-password") || strings.Contains(src, "token=") {
		t.Fatalf("the admin's page holds the link:\n%s", src)
	}
	msg, ok, err := testenv.Mailbox(t).Latest(email)
	if err != nil || !ok {
		t.Fatalf("no e-mail to %s (%v)", email, err)
	}
	if msg.Subject != "Invitation to "+m.Name+" on the PayReq dashboard" || !strings.Contains(msg.Text, "as member") {
		t.Errorf("the e-mail: %q\n%s", msg.Subject, msg.Text)
	}

	invitee := bt.New(t)
	bt.Navigate(t, invitee, mailedLinkRE.FindString(msg.Text))
	bt.Do(t, invitee, chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("confirm"), password))
	navigateBy(t, invitee, `document.querySelector("main form").submit()`)
	if got := bt.Eval[string](t, invitee, `document.body.innerText`); !strings.Contains(got, "sign in") && !strings.Contains(got, "Sign in") {
		t.Fatalf("after choosing a password: %q", got)
	}
	signInTab(t, invitee, newBrowser(t, m.ID, email))
	if p := bt.Eval[string](t, invitee, `location.pathname`); p != dashboard.MerchantPath(m.ID, "/overview") {
		t.Errorf("the invitee signed in at %s", p)
	}
}
