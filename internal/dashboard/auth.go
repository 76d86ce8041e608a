package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/merchant"
)

// Sign-in, the second factor, sign-out, set-password links and TOTP enrolment.

// dummyHash is checked for unknown addresses and locked ones: with the
// same reads and writes (see checkPassword), the answer's timing does not
// tell them apart from a wrong password (TestSignInTimeDoesNotTellWhichUsersExist).
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$ZGFzaGJvYXJkLWR1bW15$Qm9ndXNCb2d1c0JvZ3VzQm9ndXNCb2d1c0JvZ3VzMTI"

const signInFailed = "The e-mail address or password is wrong, or the account is locked for a while after repeated failures."

// loginPage is the sign-in form; ?email= fills in the address.
func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	email, _ := dashuser.NormalizeEmail(r.URL.Query().Get("email"))
	h.renderLogin(w, r, http.StatusOK, email, "", "")
}

// renderLogin issues the sign-in form with a fresh double-submit token.
func (h *handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, email, msg, notice string) {
	tok := dashuser.NewToken()
	h.setCookie(w, h.loginCookie(), tok, 3600)
	h.render(w, r, status, "login", nil, map[string]any{"LoginToken": tok, "Email": email, "Error": msg, "Notice": notice})
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(h.loginCookie())
	if err != nil || !validCSRF(c.Value, r.PostFormValue("csrf")) {
		h.renderLogin(w, r, http.StatusForbidden, "", "The sign-in form expired. Try again.", "")
		return
	}
	email, _ := dashuser.NormalizeEmail(r.PostFormValue("email"))
	pw := r.PostFormValue("password")
	id, ms, ok, err := h.checkPassword(r.Context(), email, pw)
	if err != nil {
		st := h.refusal(w, r, err)
		h.renderLogin(w, r, st.status(), email, st.e.Detail, "")
		return
	}
	if !ok {
		httpapi.Logger(r.Context()).Warn("dashboard sign-in failed")
		h.renderLogin(w, r, http.StatusUnauthorized, email, signInFailed, "")
		return
	}
	s, err := h.startSession(w, r, id, ms, id.SealedTOTP != "")
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	h.setCookie(w, h.loginCookie(), "", -1)
	if id.SealedTOTP != "" {
		http.Redirect(w, r, "/dashboard/totp", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, h.landing(s, ms), http.StatusSeeOther)
}

// refusal is the answer to an attempt that could not be counted (and so was
// not checked): 429 when other attempts kept winning the race, 503 when the
// store failed; both ask to retry shortly.
func (h *handler) refusal(w http.ResponseWriter, r *http.Request, err error) *pageError {
	w.Header().Set("Retry-After", "1")
	var se *pageError
	if !errors.As(err, &se) {
		httpapi.Logger(r.Context()).Error("count dashboard sign-in attempt", "error", err.Error())
		se = errCountDown.(*pageError)
	}
	return se
}

// checkPassword verifies a sign-in, counting the attempt before the
// password is checked (see admit): ok is false for an unknown address, a
// locked one or a wrong password alike. Every attempt makes the same
// store calls whether or not the person exists — one read of the person
// (a Query of their items, empty for nobody's address), one read and
// (unless locked) one conditional write of the address's counter — and one
// Argon2id check (the identity's hash, or dummyHash for an unknown address,
// one without a sign-in or a lock in force). The one exception is a person
// carried over from several per-merchant users who has not signed in since:
// their first password is checked against each of those users' hashes
// (see proveLegacy). An error means the attempt was refused uncounted and
// unchecked.
func (h *handler) checkPassword(ctx context.Context, email, pw string) (*dashuser.Identity, []*dashuser.Membership, bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	id, ms, err := h.Store.Identity(ctx, email)
	if err != nil {
		return nil, nil, false, countErr(ctx, err)
	}
	a, err := h.admit(ctx, email)
	if err != nil {
		return nil, nil, false, err
	}
	if !a.Admitted() || !id.HasSignIn(ms) {
		h.CheckPassword(dummyHash, pw)
		return nil, nil, false, nil
	}
	for try := 0; ; try++ {
		if id != nil && id.PasswordHash != "" {
			if !h.CheckPassword(id.PasswordHash, pw) {
				return nil, nil, false, nil
			}
			break
		}
		proven := h.proveLegacy(ms, pw)
		if len(proven) == 0 {
			return nil, nil, false, nil
		}
		err := h.adoptLegacy(ctx, email, id, proven)
		if err == nil {
			if id, ms, err = h.Store.Identity(ctx, email); err != nil || id == nil {
				return nil, nil, false, countErr(ctx, cmpErr(err, errCountBusy))
			}
			break
		}
		if !errkind.Is(err, errkind.Conflict) {
			return nil, nil, false, countErr(ctx, err)
		}
		if try == 3 {
			return nil, nil, false, errCountBusy
		}
		// Another first sign-in (another tab) won: judge on what it wrote.
		if id, ms, err = h.Store.Identity(ctx, email); err != nil {
			return nil, nil, false, countErr(ctx, err)
		}
	}
	if err := h.settle(ctx, a); err != nil {
		return nil, nil, false, err
	}
	return id, ms, true, nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// proveLegacy checks pw against the password hash of each unproven
// membership (a per-merchant user before identities) and returns those it
// matches: each is proven by its own password, nothing on trust.
func (h *handler) proveLegacy(ms []*dashuser.Membership, pw string) []*dashuser.Membership {
	var proven []*dashuser.Membership
	checked := map[string]bool{}
	for _, m := range ms {
		if m.State != dashuser.StateUnproven || m.LegacyHash == "" {
			continue
		}
		ok, seen := checked[m.LegacyHash]
		if !seen {
			ok = h.CheckPassword(m.LegacyHash, pw)
			checked[m.LegacyHash] = ok
		}
		if ok {
			proven = append(proven, m)
		}
	}
	return proven
}

// maxAdopt bounds the memberships one first sign-in links (a transaction
// holds at most 100 items); the rest stay linkable from the picker.
const maxAdopt = 40

// adoptLegacy makes the first proven password the identity's (with that
// user's second factor, if it had one) and activates every membership it
// proved, in one write guarded by the versions read.
func (h *handler) adoptLegacy(ctx context.Context, email string, id *dashuser.Identity, proven []*dashuser.Membership) error {
	now := h.Now()
	next := &dashuser.Identity{Email: email, CreatedAt: now}
	if id != nil {
		c := *id
		next = &c
	}
	next.PasswordHash, next.UpdatedAt = proven[0].LegacyHash, now
	for _, m := range proven {
		if m.LegacyTOTP != "" {
			next.SealedTOTP, next.TOTPStep = m.LegacyTOTP, 0
			break
		}
	}
	var ms []*dashuser.Membership
	for _, m := range proven[:min(len(proven), maxAdopt)] {
		c := *m
		c.State, c.LegacyHash, c.LegacyTOTP, c.UpdatedAt = dashuser.StateActive, "", "", now
		ms = append(ms, &c)
	}
	if err := h.Store.SaveMemberships(ctx, next, ms...); err != nil {
		return err
	}
	for _, m := range ms {
		h.record(ctx, m.MerchantID, email, "user.link", email+" signed in with the password this merchant knew; the membership is linked to their identity")
	}
	return nil
}

func (h *handler) totpPage(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	if s == nil || !s.TOTPPending {
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "totp", s, map[string]any{"PendingCSRF": csrfFor(s.CSRF, "")})
}

func (h *handler) totp(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	if s == nil || !s.TOTPPending {
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	if !validCSRF(csrfFor(s.CSRF, ""), r.PostFormValue("csrf")) {
		h.fail(w, r, nil, refuse(errkind.Forbidden, "The form expired. Sign in again."))
		return
	}
	id, ms, err := h.Store.Identity(r.Context(), s.Email)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if id == nil || !sessionOf(s, id) {
		h.endSession(r, s) // credentials changed while signing in
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	ok, err := h.checkTOTP(r.Context(), id, r.PostFormValue("code"))
	if err != nil {
		st := h.refusal(w, r, err)
		h.render(w, r, st.status(), "totp", s, map[string]any{"PendingCSRF": csrfFor(s.CSRF, ""), "Error": st.e.Detail})
		return
	}
	if !ok {
		h.render(w, r, http.StatusUnauthorized, "totp", s, map[string]any{"PendingCSRF": csrfFor(s.CSRF, ""),
			"Error": "The code is wrong or expired."})
		return
	}
	ns, err := h.startSession(w, r, id, ms, false)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, h.landing(ns, ms), http.StatusSeeOther)
}

// checkTOTP verifies a code of the person's second factor, counted like a
// password (see admit). A code is accepted once: its step is recorded with
// the success, conditional on the identity's version, so of two sign-ins
// racing with one code one wins, and a code whose step is not after the
// last accepted one is refused.
func (h *handler) checkTOTP(ctx context.Context, id *dashuser.Identity, code string) (bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	a, err := h.admit(ctx, id.Email)
	if err != nil || !a.Admitted() {
		return false, err
	}
	secret, err := h.Sealer.Open(id.SealedTOTP, "totp:"+id.Email)
	if err != nil {
		return false, nil
	}
	step, ok := VerifyTOTP(secret, code, h.Now())
	if !ok || step <= id.TOTPStep {
		return false, nil
	}
	return h.succeed(ctx, id, a, func(f *dashuser.Identity) bool {
		if f.SealedTOTP != id.SealedTOTP || step <= f.TOTPStep {
			return false // replaced, or the code was used meanwhile
		}
		f.TOTPStep = step
		return true
	})
}

// succeed records a right secret of the admitted attempt a that changes
// the identity (the TOTP step of the code, so that it works once; a new
// second factor): apply makes the change on the fresh identity and reports
// false when it no longer holds (the code was used meanwhile): the attempt
// is then a failure, already counted. The write is conditional on the
// identity's version (read again after a lost race); then the counter takes
// back the attempt's failures.
func (h *handler) succeed(ctx context.Context, id *dashuser.Identity, a lockout.Admission, apply func(*dashuser.Identity) bool) (bool, error) {
	for try := 0; ; try++ {
		next := *id
		if !apply(&next) {
			return false, nil
		}
		next.UpdatedAt = h.Now()
		err := h.Store.UpdateIdentity(ctx, &next) // guard: version unchanged since id was read
		if err == nil {
			*id = next
			break
		}
		if !errkind.Is(err, errkind.Conflict) {
			return false, countErr(ctx, err)
		}
		if try == lockout.Tries {
			return false, errCountBusy
		}
		fresh, _, err := h.Store.Identity(ctx, id.Email)
		if err != nil {
			return false, countErr(ctx, err)
		}
		if fresh == nil || !fresh.CreatedAt.Equal(id.CreatedAt) {
			return false, nil
		}
		*id = *fresh
	}
	if err := h.settle(ctx, a); err != nil {
		return false, err
	}
	return true, nil
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request, s *dashuser.Session, _ *dashuser.Identity, _ []*dashuser.Membership) error {
	if err := h.Store.DeleteSession(r.Context(), s.IDHash); err != nil {
		return err
	}
	h.setCookie(w, h.sessionCookie(), "", -1)
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
	return nil
}

// ---- invitations and set-password links ----

// InviteStore is what InviteUser and ResetPassword need (the dashboard's
// Store and payctl's).
type InviteStore interface {
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
	Identity(ctx context.Context, email string) (*dashuser.Identity, []*dashuser.Membership, error)
	UpdateIdentity(ctx context.Context, id *dashuser.Identity) error
	Membership(ctx context.Context, email, merchantID string) (*dashuser.Membership, error)
	SaveMemberships(ctx context.Context, id *dashuser.Identity, ms ...*dashuser.Membership) error
	PutInvite(ctx context.Context, inv *dashuser.Invite) error
	AppendAudit(ctx context.Context, e dashuser.AuditEntry) error
}

// ErrAlreadyMember refuses an invitation of a person who is a member of
// the merchant already.
var ErrAlreadyMember = refuse(errkind.Conflict, "This address is a member of the merchant already. A person who lost their password asks the operator for a new one.")

// InviteUser invites an address to merchantID with role and returns a
// one-time link, valid until the returned time (InviteTTL); baseURL is the
// API's public base URL. It is the operator's (payctl prints the link);
// the dashboard e-mails the link to the invitee instead (see invite).
// Only the membership of this merchant is read and written (one read, one
// write): whether the address is a person already, or belongs to other
// merchants, is neither read nor told — the answer, its reads and writes
// are the same. A person who has a sign-in accepts while signed in (the
// link's page, or their list of merchants, says so); a new person sets a
// first password through the link. Inviting again while the invitation is
// open issues a new link and voids the earlier one (the membership keeps
// one live link's hash, written at its version); a membership carried over
// from a per-merchant user awaiting its password becomes an invitation. An
// admin cannot reset a member's password: that password may open other
// merchants too (payctl user reset does).
func InviteUser(ctx context.Context, st InviteStore, merchantID, email, role, actor, baseURL string, now time.Time) (string, time.Time, error) {
	inv, err := inviteUser(ctx, st, merchantID, email, role, actor, baseURL, now)
	if err != nil {
		return "", time.Time{}, err
	}
	if err := Record(ctx, st, merchantID, actor, "user.invite", fmt.Sprintf("%s (%s) invited; the link works until %s", inv.Email, role,
		inv.Until.UTC().Format("2006-01-02 15:04 MST")), now); err != nil {
		return "", time.Time{}, err
	}
	return inv.Link, inv.Until, nil
}

// invitation is a written invitation: its live link and what its e-mail tells.
type invitation struct {
	Email, Role, MerchantName string
	Link                      string // the one-time link (a secret: never logged nor shown to the inviter)
	Until                     time.Time
}

// inviteUser writes an invitation (InviteUser's rules) and returns it,
// with no audit entry: the caller records how the link went out.
func inviteUser(ctx context.Context, st InviteStore, merchantID, email, role, actor, baseURL string, now time.Time) (*invitation, error) {
	raw := email
	email, ok := dashuser.NormalizeEmail(email)
	if !ok {
		return nil, BadInput(fmt.Sprintf("%q is not an e-mail address.", raw))
	}
	if role != dashuser.RoleAdmin && role != dashuser.RoleMember {
		return nil, BadInput(fmt.Sprintf("The role must be %s or %s.", dashuser.RoleAdmin, dashuser.RoleMember))
	}
	mer, err := st.Merchant(ctx, merchantID)
	if err != nil {
		return nil, err
	}
	tok := dashuser.NewToken()
	inv := &dashuser.Invite{TokenHash: dashuser.HashToken(tok), Kind: dashuser.LinkInvite, Email: email, MerchantID: merchantID, Role: role, CreatedBy: actor,
		ExpiresAt: now.Add(InviteTTL)}
	// The link is stored first and made live by the membership's write: a
	// failure between the two leaves a void link, never a second live one.
	if err := st.PutInvite(ctx, inv); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		m, err := st.Membership(ctx, email, merchantID)
		switch {
		case err != nil && !errkind.Is(err, errkind.NotFound):
			return nil, err
		case err != nil:
			m = &dashuser.Membership{Email: email, MerchantID: merchantID, CreatedAt: now}
		case m.State == dashuser.StateActive:
			return nil, ErrAlreadyMember
		}
		m.MerchantName, m.Role, m.State, m.InvitedBy = mer.Name, role, dashuser.StateInvited, actor
		m.InviteHash, m.InviteExpires, m.LegacyHash, m.LegacyTOTP, m.UpdatedAt = inv.TokenHash, inv.ExpiresAt, "", "", now
		err = st.SaveMemberships(ctx, nil, m) // guard: absent, or the version read
		if err == nil {
			break
		}
		if !errkind.Is(err, errkind.Conflict) || try == 3 { // raced by another invitation or a removal each time
			return nil, err
		}
	}
	return &invitation{Email: email, Role: role, MerchantName: mer.Name, Link: linkURL(baseURL, tok), Until: inv.ExpiresAt}, nil
}

func linkURL(baseURL, tok string) string {
	return strings.TrimRight(baseURL, "/") + "/dashboard/set-password?token=" + url.QueryEscape(tok)
}

// ResetPassword issues an operator's one-time link that sets a new
// password of an existing person (payctl user reset): the identity keeps
// one live link's hash, written at its version, so a newer link voids the
// older. Setting the password ends every session of the person.
func ResetPassword(ctx context.Context, st InviteStore, email, actor, baseURL string, now time.Time) (string, time.Time, error) {
	raw := email
	email, ok := dashuser.NormalizeEmail(email)
	if !ok {
		return "", time.Time{}, BadInput(fmt.Sprintf("%q is not an e-mail address.", raw))
	}
	tok := dashuser.NewToken()
	inv := &dashuser.Invite{TokenHash: dashuser.HashToken(tok), Kind: dashuser.LinkReset, Email: email, CreatedBy: actor, ExpiresAt: now.Add(InviteTTL)}
	if err := st.PutInvite(ctx, inv); err != nil {
		return "", time.Time{}, err
	}
	for try := 0; ; try++ {
		id, _, err := st.Identity(ctx, email)
		if err != nil {
			return "", time.Time{}, err
		}
		if id == nil {
			return "", time.Time{}, refuse(errkind.NotFound, email+" has no dashboard identity: invite the address to a merchant instead.")
		}
		id.ResetHash, id.UpdatedAt = inv.TokenHash, now
		if err = st.UpdateIdentity(ctx, id); err == nil {
			break
		}
		if !errkind.Is(err, errkind.Conflict) || try == 3 {
			return "", time.Time{}, err
		}
	}
	return linkURL(baseURL, tok), inv.ExpiresAt, nil
}

// link is a live one-time link with what it acts on.
type link struct {
	inv *dashuser.Invite
	id  *dashuser.Identity     // the person (nil: none yet)
	ms  []*dashuser.Membership // their memberships
	m   *dashuser.Membership   // the invitation's membership (invitations only)
}

// liveLink reads the link of tok and checks that it is live: an
// invitation its membership still holds (not replaced by a newer one, not
// used, not lapsed), or the reset link its identity still holds. Anything
// else is 404.
func (h *handler) liveLink(r *http.Request, tok string) (*link, error) {
	inv, err := h.Store.Invite(r.Context(), dashuser.HashToken(tok), h.Now())
	if err != nil {
		return nil, h.inviteErr(err)
	}
	return h.linkOf(r, inv)
}

// linkOf reads what inv acts on and checks that inv is still its live link.
func (h *handler) linkOf(r *http.Request, inv *dashuser.Invite) (*link, error) {
	id, ms, err := h.Store.Identity(r.Context(), inv.Email)
	if err != nil {
		return nil, err
	}
	l := &link{inv: inv, id: id, ms: ms}
	switch inv.Kind {
	case dashuser.LinkReset:
		// validCSRF is a constant-time comparison that refuses an empty value.
		if id == nil || !validCSRF(id.ResetHash, inv.TokenHash) {
			return nil, errLinkVoid
		}
	default:
		for _, m := range ms {
			if m.MerchantID == inv.MerchantID {
				l.m = m
			}
		}
		if !l.m.Pending(h.Now()) || !validCSRF(l.m.InviteHash, inv.TokenHash) {
			return nil, errLinkVoid
		}
	}
	return l, nil
}

// signInFirst is an invitation for a person who has a sign-in: they accept
// it signed in, never by choosing a password through the link.
func (l *link) signInFirst() bool { return l.inv.Kind == dashuser.LinkInvite && l.id.HasSignIn(l.ms) }

func (h *handler) setPasswordPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	l, err := h.liveLink(r, tok)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	h.renderSetPassword(w, r, http.StatusOK, tok, l, "")
}

func (h *handler) renderSetPassword(w http.ResponseWriter, r *http.Request, status int, tok string, l *link, msg string) {
	d := map[string]any{"Token": tok, "Email": l.inv.Email, "Min": MinPasswordLen, "Error": msg}
	if l.m != nil {
		d["Merchant"], d["Role"] = l.m.MerchantName, l.m.Role
	}
	if l.signInFirst() {
		d["SignIn"] = "/dashboard/login?email=" + url.QueryEscape(l.inv.Email)
		if s, _ := h.session(r); s != nil && !s.TOTPPending && s.Email == l.inv.Email {
			d["AcceptCSRF"], d["MerchantID"] = csrfFor(s.CSRF, ""), l.m.MerchantID
		}
	}
	h.render(w, r, status, "setpassword", nil, d)
}

var errLinkVoid = refuse(errkind.NotFound, "This link is invalid, used, replaced by a newer one or expired. Ask an administrator for a new one.")

func (h *handler) inviteErr(err error) error {
	if errkind.Is(err, errkind.NotFound) || errors.Is(err, errNotFound) {
		return errLinkVoid
	}
	return err
}

// setPassword is authenticated by the link's token itself, which it uses
// up. An invitation sets the first password of a new person and makes the
// membership active, in one write guarded by the versions read (so the
// invitation was still the live one, and no sign-in appeared meanwhile);
// a person who has a sign-in is sent to sign in instead. A reset link sets
// the identity's new password and steps CredVersion (ending every session
// of the person), conditional on the identity's version.
func (h *handler) setPassword(w http.ResponseWriter, r *http.Request) {
	tok, pw := r.PostFormValue("token"), r.PostFormValue("password")
	l, err := h.liveLink(r, tok)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if l.signInFirst() {
		h.renderSetPassword(w, r, http.StatusConflict, tok, l,
			"This address already signs in to the dashboard: sign in with your password to accept the invitation.")
		return
	}
	if len([]rune(pw)) < MinPasswordLen || len(pw) > 256 || pw != r.PostFormValue("confirm") {
		h.renderSetPassword(w, r, http.StatusBadRequest, tok, l, fmt.Sprintf("Choose a password of at least %d characters and type it twice.", MinPasswordLen))
		return
	}
	inv, err := h.Store.TakeInvite(r.Context(), dashuser.HashToken(tok), h.Now())
	if err != nil {
		h.fail(w, r, nil, h.inviteErr(err))
		return
	}
	hash, err := h.HashPassword(pw)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	for try := 0; ; try++ {
		if try > 0 {
			// The link is used now (TakeInvite): judge it by what it acts on.
			if l, err = h.linkOf(r, inv); err != nil {
				break // replaced by a newer link, or a sign-in appeared, meanwhile
			}
			if l.signInFirst() {
				err = errLinkVoid
				break
			}
		}
		now := h.Now()
		if l.inv.Kind == dashuser.LinkReset {
			id := *l.id
			id.PasswordHash, id.ResetHash, id.UpdatedAt = hash, "", now
			id.CredVersion++
			err = h.Store.UpdateIdentity(r.Context(), &id) // guard: version unchanged since read (the link was live)
		} else {
			id := &dashuser.Identity{Email: inv.Email, CreatedAt: now}
			if l.id != nil {
				c := *l.id
				id = &c
				id.CredVersion++
			}
			id.PasswordHash, id.UpdatedAt = hash, now
			m := *l.m
			m.State, m.InviteHash, m.InviteExpires, m.UpdatedAt = dashuser.StateActive, "", time.Time{}, now
			err = h.Store.SaveMemberships(r.Context(), id, &m) // guards: the versions read
		}
		if err == nil || !errkind.Is(err, errkind.Conflict) || try == 5 {
			break
		}
	}
	if err != nil {
		h.fail(w, r, nil, h.inviteErr(err))
		return
	}
	// A new password takes back the failures and the lock of the old one.
	if err := h.counting().Clear(r.Context(), h.attemptKey(inv.Email)); err != nil {
		h.Log.ErrorContext(r.Context(), "clear sign-in attempts after a new password", "error", err.Error())
	}
	if inv.Kind == dashuser.LinkReset {
		for _, m := range usable(l.ms) {
			h.record(r.Context(), m.MerchantID, "payctl", "user.set-password", inv.Email+" set a new password (operator's link); all their sessions ended")
		}
	} else {
		h.record(r.Context(), inv.MerchantID, inv.Email, "user.join", fmt.Sprintf("%s set a password and joined as %s", inv.Email, l.m.Role))
	}
	h.renderLogin(w, r, http.StatusOK, inv.Email, "", "Your password is set. Sign in.")
}

// record appends an audit entry of a change already made: a failure is
// logged loudly, not shown.
func (h *handler) record(ctx context.Context, merchantID, actor, action, detail string) {
	if err := Record(ctx, h.Store, merchantID, actor, action, detail, h.Now()); err != nil {
		httpapi.Logger(ctx).Error("audit log write failed", "action", action, "error", err.Error())
	}
}

// ---- account: TOTP enrolment ----

// The enrolment form carries its new secret sealed to the person and the
// session, with an expiry: a form kept from another session, or older than
// enrolTTL (or its session), does not open.
func (h *handler) enrolOwner(id *dashuser.Identity, s *dashuser.Session) string {
	return "totp-enrol:" + id.Email + ":" + s.IDHash
}

func (h *handler) sealEnrol(id *dashuser.Identity, s *dashuser.Session, secret string) string {
	exp := min(h.Now().Add(enrolTTL).Unix(), s.ExpiresAt.Unix())
	return h.Sealer.Seal(secret+"|"+strconv.FormatInt(exp, 10), h.enrolOwner(id, s))
}

func (h *handler) openEnrol(id *dashuser.Identity, s *dashuser.Session, sealed string) (string, bool) {
	v, err := h.Sealer.Open(sealed, h.enrolOwner(id, s))
	if err != nil {
		return "", false
	}
	secret, exp, ok := strings.Cut(v, "|")
	n, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || h.Now().Unix() >= n {
		return "", false
	}
	return secret, true
}

func (h *handler) account(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership) error {
	return h.renderAccount(w, r, s, id, ms, NewTOTPSecret(), http.StatusOK, "")
}

// service names this dashboard in authenticator apps: its public host,
// without a port (Key Uri Format: no colon in the issuer).
func (h *handler) service(r *http.Request) string {
	host := r.Host
	if u, err := url.Parse(h.PublicBaseURL); err == nil && u.Host != "" {
		host = u.Host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

func (h *handler) renderAccount(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership, secret string, status int, msg string) error {
	h.render(w, r, status, "account", s, map[string]any{"Identity": id, "Memberships": usable(ms), "TOTPOn": id.SealedTOTP != "",
		"Secret": secret, "Sealed": h.sealEnrol(id, s, secret), "URI": TOTPURI(secret, id.Email, h.service(r)), "Message": msg})
	return nil
}

var errEnrolExpired = refuse(errkind.Invalid, "This form has expired (it works for 15 minutes, in the session that opened it). Reload the page for a new key.")

// enrollTOTP turns the person's TOTP on (a code proves the app has the new
// secret), replaces it or turns it off. While TOTP is on, replacing or
// turning it off needs the password and a current code, counted like a
// sign-in (see admit). The change steps CredVersion: every session of the
// person ends but this one, which is issued anew. The code that proves a
// new secret is recorded as used (TOTPStep), so it does not sign in again.
// Each merchant the person works for records it in its audit log.
func (h *handler) enrollTOTP(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership) error {
	disable := r.PostFormValue("action") == "disable"
	var secret string
	var newStep uint64
	if !disable {
		var ok bool
		if secret, ok = h.openEnrol(id, s, r.PostFormValue("sealed")); !ok {
			return errEnrolExpired
		}
		if newStep, ok = VerifyTOTP(secret, r.PostFormValue("code"), h.Now()); !ok {
			return h.renderAccount(w, r, s, id, ms, secret, http.StatusBadRequest, "The code is wrong; check the time on your device.")
		}
	}
	before := id.SealedTOTP
	if before == "" && disable {
		return h.renderAccount(w, r, s, id, ms, NewTOTPSecret(), http.StatusOK, "Two-factor sign-in is off.")
	}
	change := func(f *dashuser.Identity) bool {
		if f.SealedTOTP != before {
			return false // changed meanwhile: judged on the old state
		}
		if disable {
			f.SealedTOTP, f.TOTPStep = "", 0
		} else {
			f.SealedTOTP, f.TOTPStep = h.Sealer.Seal(secret, "totp:"+f.Email), newStep
		}
		f.CredVersion++
		return true
	}
	if before != "" {
		ok, err := h.checkFactor(r.Context(), id, r.PostFormValue("password"), r.PostFormValue("current"), change)
		if secret == "" { // turning off: the page still offers a new key
			secret = NewTOTPSecret()
		}
		if err != nil {
			st := h.refusal(w, r, err)
			return h.renderAccount(w, r, s, id, ms, secret, st.status(), st.e.Detail)
		}
		if !ok {
			return h.renderAccount(w, r, s, id, ms, secret, http.StatusBadRequest,
				"The password or the current code is wrong, or the account is locked for a while after repeated failures.")
		}
	} else {
		for try := 0; ; try++ {
			if !change(id) {
				return refuse(errkind.Conflict, "Two-factor sign-in was changed meanwhile. Reload the page.")
			}
			id.UpdatedAt = h.Now()
			err := h.Store.UpdateIdentity(r.Context(), id) // guard: version unchanged since read
			if err == nil {
				break
			}
			if !errkind.Is(err, errkind.Conflict) || try == 5 {
				return err
			}
			fresh, _, err := h.Store.Identity(r.Context(), s.Email)
			if err != nil {
				return err
			}
			if fresh == nil {
				return errNotFound
			}
			id = fresh
		}
	}
	ns, err := h.startSession(w, r, id, ms, false)
	if err != nil {
		return err
	}
	on := id.SealedTOTP != ""
	word := map[bool]string{true: "on", false: "off"}[on]
	if before != "" && on {
		word = "replaced"
	}
	for _, m := range usable(ms) {
		h.record(r.Context(), m.MerchantID, id.Email, "user.totp", fmt.Sprintf("%s: two-factor sign-in %s; other sessions ended", id.Email, word))
	}
	return h.renderAccount(w, r, personal(ns), id, ms, NewTOTPSecret(), http.StatusOK, "Two-factor sign-in is now "+word+".")
}

// checkFactor checks the person's password and a current code of their
// second factor as one counted attempt (see admit); change is applied with
// the success.
func (h *handler) checkFactor(ctx context.Context, id *dashuser.Identity, pw, code string, change func(*dashuser.Identity) bool) (bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	a, err := h.admit(ctx, id.Email)
	if err != nil || !a.Admitted() {
		return false, err
	}
	pwOK := h.CheckPassword(id.PasswordHash, pw)
	secret, err := h.Sealer.Open(id.SealedTOTP, "totp:"+id.Email)
	if err != nil || !pwOK {
		return false, nil
	}
	step, ok := VerifyTOTP(secret, code, h.Now())
	if !ok || step <= id.TOTPStep {
		return false, nil
	}
	return h.succeed(ctx, id, a, func(f *dashuser.Identity) bool {
		if step <= f.TOTPStep {
			return false
		}
		f.TOTPStep = step
		return change(f)
	})
}
