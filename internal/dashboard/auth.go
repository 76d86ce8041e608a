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

	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/lockout"
)

// Sign-in, the second factor, sign-out, set-password links and TOTP enrolment.

// dummyHash is checked for unknown addresses and locked users: with the
// same reads and writes (see checkPassword), the answer's timing does not
// tell them apart from a wrong password (TestSignInTimeDoesNotTellWhichUsersExist).
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$ZGFzaGJvYXJkLWR1bW15$Qm9ndXNCb2d1c0JvZ3VzQm9ndXNCb2d1c0JvZ3VzMTI"

const signInFailed = "The e-mail address or password is wrong, or the account is locked for a while after repeated failures."

// loginPage is the sign-in form; ?merchant= fills in the merchant id (the
// link set-password pages and invitations give).
func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.renderLogin(w, r, http.StatusOK, merchantParam(r.URL.Query().Get("merchant")), "", "")
}

// merchantParam keeps a merchant id fit to show back, or nothing.
func merchantParam(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 64 {
		return ""
	}
	return s
}

// renderLogin issues the sign-in form with a fresh double-submit token.
func (h *handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, merchantID, email, msg string) {
	tok := NewToken()
	h.setCookie(w, h.loginCookie(), tok, 3600)
	h.render(w, r, status, "login", nil, map[string]any{"LoginToken": tok, "Merchant": merchantID, "Email": email, "Error": msg})
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(h.loginCookie())
	if err != nil || !validCSRF(c.Value, r.PostFormValue("csrf")) {
		h.renderLogin(w, r, http.StatusForbidden, merchantParam(r.PostFormValue("merchant")), "", "The sign-in form expired. Try again.")
		return
	}
	merchantID := merchantParam(r.PostFormValue("merchant"))
	email, _ := NormalizeEmail(r.PostFormValue("email"))
	pw := r.PostFormValue("password")
	u, ok, err := h.checkPassword(r.Context(), merchantID, email, pw)
	if err != nil {
		st := h.refusal(w, r, err)
		h.renderLogin(w, r, st.status, merchantID, email, st.msg)
		return
	}
	if !ok {
		httpapi.Logger(r.Context()).Warn("dashboard sign-in failed")
		h.renderLogin(w, r, http.StatusUnauthorized, merchantID, email, signInFailed)
		return
	}
	if _, err := h.startSession(w, r, u, u.SealedTOTP != ""); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	h.setCookie(w, h.loginCookie(), "", -1)
	if u.SealedTOTP != "" {
		http.Redirect(w, r, "/dashboard/totp", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, homePath, http.StatusSeeOther)
}

// refusal is the answer to an attempt that could not be counted (and so was
// not checked): 429 when other attempts kept winning the race, 503 when the
// store failed; both ask to retry shortly.
func (h *handler) refusal(w http.ResponseWriter, r *http.Request, err error) *statusError {
	w.Header().Set("Retry-After", "1")
	var se *statusError
	if !errors.As(err, &se) {
		httpapi.Logger(r.Context()).Error("count dashboard sign-in attempt", "error", err.Error())
		se = errCountDown.(*statusError)
	}
	return se
}

// checkPassword verifies a sign-in, counting the attempt before the
// password is checked (see admit): ok is false for an unknown address, a
// locked user or a wrong password alike. Every attempt makes the same
// store calls whether or not the user exists — one read of the user, one
// read and (unless locked) one conditional write of the (merchant,
// address) counter — and one Argon2id check (the user's hash, or dummyHash
// for an unknown address, a user without a password or a lock in force).
// An error means the attempt was refused uncounted and unchecked.
func (h *handler) checkPassword(ctx context.Context, merchantID, email, pw string) (*User, bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	u, err := h.Store.DashboardUser(ctx, merchantID, email)
	if h.IsNotFound(err) {
		u, err = nil, nil
	}
	if err != nil {
		return nil, false, countErr(ctx, err)
	}
	a, err := h.admit(ctx, merchantID, email)
	if err != nil {
		return nil, false, err
	}
	if !a.Admitted() || u == nil || u.PasswordHash == "" {
		h.CheckPassword(dummyHash, pw)
		return nil, false, nil
	}
	if !h.CheckPassword(u.PasswordHash, pw) {
		return nil, false, nil
	}
	if err := h.settle(ctx, a); err != nil {
		return nil, false, err
	}
	return u, true, nil
}

func (h *handler) totpPage(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	if s == nil || !s.TOTPPending {
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	h.render(w, r, http.StatusOK, "totp", s, map[string]any{"PendingCSRF": s.CSRF})
}

func (h *handler) totp(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	if s == nil || !s.TOTPPending {
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	if !validCSRF(s.CSRF, r.PostFormValue("csrf")) {
		h.fail(w, r, nil, errStatus(http.StatusForbidden, "The form expired. Sign in again."))
		return
	}
	u, err := h.Store.DashboardUser(r.Context(), s.MerchantID, s.Email)
	if h.IsNotFound(err) || (err == nil && !sessionOf(s, u)) {
		h.endSession(r, s) // removed, or credentials changed, while signing in
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	ok, err := h.checkTOTP(r.Context(), u, r.PostFormValue("code"))
	if err != nil {
		st := h.refusal(w, r, err)
		h.render(w, r, st.status, "totp", s, map[string]any{"PendingCSRF": s.CSRF, "Error": st.msg})
		return
	}
	if !ok {
		h.render(w, r, http.StatusUnauthorized, "totp", s, map[string]any{"PendingCSRF": s.CSRF,
			"Error": "The code is wrong or expired."})
		return
	}
	if _, err := h.startSession(w, r, u, false); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, homePath, http.StatusSeeOther)
}

// checkTOTP verifies a code of u's second factor, counted like a password
// (see admit). A code is accepted once: its step is recorded with the
// success, conditional on the user's version, so of two sign-ins racing
// with one code one wins, and a code whose step is not after the last
// accepted one is refused.
func (h *handler) checkTOTP(ctx context.Context, u *User, code string) (bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	a, err := h.admit(ctx, u.MerchantID, u.Email)
	if err != nil || !a.Admitted() {
		return false, err
	}
	secret, err := h.Sealer.Open(u.SealedTOTP, "totp:"+u.Email)
	if err != nil {
		return false, nil
	}
	step, ok := VerifyTOTP(secret, code, h.Now())
	if !ok || step <= u.TOTPStep {
		return false, nil
	}
	return h.succeed(ctx, u, a, func(f *User) bool {
		if f.SealedTOTP != u.SealedTOTP || step <= f.TOTPStep {
			return false // replaced, or the code was used meanwhile
		}
		f.TOTPStep = step
		return true
	})
}

// succeed records a right secret of the admitted attempt a that changes
// the user (the TOTP step of the code, so that it works once; a new second
// factor): apply makes the change on the fresh user and reports false when
// it no longer holds (the code was used meanwhile): the attempt is then a
// failure, already counted. The user's write is conditional on its version
// (read again after a lost race); then the counter takes back the attempt's
// failures.
func (h *handler) succeed(ctx context.Context, u *User, a lockout.Admission, apply func(*User) bool) (bool, error) {
	for try := 0; ; try++ {
		next := *u
		if !apply(&next) {
			return false, nil
		}
		next.UpdatedAt = h.Now()
		err := h.Store.UpdateDashboardUser(ctx, &next) // guard: version unchanged since u was read
		if err == nil {
			*u = next
			break
		}
		if !h.IsConflict(err) {
			return false, countErr(ctx, err)
		}
		if try == lockout.Tries {
			return false, errCountBusy
		}
		fresh, err := h.Store.DashboardUser(ctx, u.MerchantID, u.Email)
		if h.IsNotFound(err) || (err == nil && !fresh.CreatedAt.Equal(u.CreatedAt)) {
			return false, nil // removed meanwhile
		}
		if err != nil {
			return false, countErr(ctx, err)
		}
		*u = *fresh
	}
	if err := h.settle(ctx, a); err != nil {
		return false, err
	}
	return true, nil
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	s, _ := h.session(r)
	if s != nil {
		if !validCSRF(s.CSRF, r.PostFormValue("csrf")) {
			h.fail(w, r, s, errStatus(http.StatusForbidden, "The form expired. Reload the page and try again."))
			return
		}
		if err := h.Store.DeleteSession(r.Context(), s.IDHash); err != nil {
			h.fail(w, r, s, err)
			return
		}
	}
	h.setCookie(w, h.sessionCookie(), "", -1)
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

// ---- invitations and set-password links ----

// InviteStore is what InviteUser needs (the dashboard's Store and payctl's).
type InviteStore interface {
	CreateDashboardUser(ctx context.Context, u *User) error
	DashboardUser(ctx context.Context, merchantID, email string) (*User, error)
	UpdateDashboardUser(ctx context.Context, u *User) error
	PutInvite(ctx context.Context, inv *Invite) error
	AppendAudit(ctx context.Context, e AuditEntry) error
}

// InviteUser creates the user (when new) and a one-time link to set its
// password, valid until the returned time (InviteTTL); baseURL is the API's
// public base URL. Inviting an existing user of the same merchant issues a
// new link (a password reset by an admin or operator). Only merchantID's
// users are read or written: another merchant's user of the same address
// is a separate identity, which the invitation neither reads nor reveals
// (the same answer, the same reads and writes). A user has one live
// link: the new link's hash is written to the user (conditional on the
// user's version, or on its absence), which voids every earlier link.
func InviteUser(ctx context.Context, st InviteStore, isNotFound func(error) bool, merchantID, email, role, actor, baseURL string, now time.Time) (string, time.Time, error) {
	raw := email
	email, ok := NormalizeEmail(email)
	if !ok {
		email = raw
		return "", time.Time{}, BadInput(fmt.Sprintf("%q is not an e-mail address.", email))
	}
	if role != RoleAdmin && role != RoleMember {
		return "", time.Time{}, BadInput(fmt.Sprintf("The role must be %s or %s.", RoleAdmin, RoleMember))
	}
	tok := NewToken()
	inv := &Invite{TokenHash: HashToken(tok), Email: email, MerchantID: merchantID, CreatedBy: actor, ExpiresAt: now.Add(InviteTTL)}
	// The link is stored first and made live by the user's write: a failure
	// between the two leaves a void link, never a second live one.
	if err := st.PutInvite(ctx, inv); err != nil {
		return "", time.Time{}, err
	}
	var u *User
	for try := 0; ; try++ {
		var err error
		u, err = st.DashboardUser(ctx, merchantID, email)
		switch {
		case err != nil && !isNotFound(err):
			return "", time.Time{}, err
		case err != nil:
			u = &User{Email: email, MerchantID: merchantID, Role: role, InviteHash: inv.TokenHash, CreatedAt: now, UpdatedAt: now}
			err = st.CreateDashboardUser(ctx, u) // guard: no user of the address
		default:
			u.InviteHash, u.UpdatedAt = inv.TokenHash, now
			err = st.UpdateDashboardUser(ctx, u) // guard: version unchanged since read
		}
		if err == nil {
			break
		}
		if try == 3 { // raced by other writes each time (sign-ins, another invite)
			return "", time.Time{}, err
		}
	}
	if err := Record(ctx, st, merchantID, actor, "user.invite", fmt.Sprintf("%s (%s): set-password link issued, valid until %s", email, u.Role,
		inv.ExpiresAt.UTC().Format("2006-01-02 15:04 MST")), now); err != nil {
		return "", time.Time{}, err
	}
	return strings.TrimRight(baseURL, "/") + "/dashboard/set-password?token=" + url.QueryEscape(tok), inv.ExpiresAt, nil
}

// liveInvite reads the link of tok and checks that it is its user's live
// one (not replaced by a newer link, not used): anything else is 404.
func (h *handler) liveInvite(r *http.Request, tok string) (*Invite, error) {
	inv, err := h.Store.Invite(r.Context(), HashToken(tok), h.Now())
	if err != nil {
		return nil, h.inviteErr(err)
	}
	u, err := h.Store.DashboardUser(r.Context(), inv.MerchantID, inv.Email)
	if err != nil {
		return nil, h.inviteErr(err)
	}
	// validCSRF is a constant-time comparison that refuses an empty value.
	if u.MerchantID != inv.MerchantID || !validCSRF(u.InviteHash, inv.TokenHash) {
		return nil, h.inviteErr(errNotFound)
	}
	return inv, nil
}

func (h *handler) setPasswordPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	inv, err := h.liveInvite(r, tok)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	h.render(w, r, http.StatusOK, "setpassword", nil, map[string]any{"Token": tok, "Email": inv.Email, "Min": MinPasswordLen})
}

var errLinkVoid = errStatus(http.StatusNotFound, "This link is invalid, used, replaced by a newer one or expired. Ask an administrator for a new one.")

func (h *handler) inviteErr(err error) error {
	if h.IsNotFound(err) || errors.Is(err, errNotFound) {
		return errLinkVoid
	}
	return err
}

// setPassword is authenticated by the link's token itself, which it uses
// up. The password is written only if the link is still the user's live
// one (version-conditional write of the user), and the write clears the
// live link (voiding every link) and steps CredVersion (ending every
// session of the user).
func (h *handler) setPassword(w http.ResponseWriter, r *http.Request) {
	tok, pw := r.PostFormValue("token"), r.PostFormValue("password")
	inv, err := h.liveInvite(r, tok)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if len([]rune(pw)) < MinPasswordLen || len(pw) > 256 || pw != r.PostFormValue("confirm") {
		h.render(w, r, http.StatusBadRequest, "setpassword", nil, map[string]any{"Token": tok, "Email": inv.Email, "Min": MinPasswordLen,
			"Error": fmt.Sprintf("Choose a password of at least %d characters and type it twice.", MinPasswordLen)})
		return
	}
	if inv, err = h.Store.TakeInvite(r.Context(), HashToken(tok), h.Now()); err != nil {
		h.fail(w, r, nil, h.inviteErr(err))
		return
	}
	hash, err := h.HashPassword(pw)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	for try := 0; ; try++ {
		var u *User
		if u, err = h.Store.DashboardUser(r.Context(), inv.MerchantID, inv.Email); err != nil {
			break
		}
		if u.MerchantID != inv.MerchantID || !validCSRF(u.InviteHash, inv.TokenHash) {
			err = errNotFound // replaced by a newer link meanwhile
			break
		}
		u.PasswordHash, u.InviteHash, u.UpdatedAt = hash, "", h.Now()
		u.CredVersion++
		// guard: version unchanged since read (so the link was still live)
		if err = h.Store.UpdateDashboardUser(r.Context(), u); err == nil || !h.IsConflict(err) || try == 5 {
			break
		}
	}
	if err != nil {
		h.fail(w, r, nil, h.inviteErr(err))
		return
	}
	// A new password takes back the failures and the lock of the old one.
	if err := h.counting().Clear(r.Context(), h.attemptKey(inv.MerchantID, inv.Email)); err != nil {
		h.Log.ErrorContext(r.Context(), "clear sign-in attempts after a new password", "error", err.Error())
	}
	_ = Record(r.Context(), h.Store, inv.MerchantID, inv.Email, "user.set-password", inv.Email+" set a password; all sessions ended", h.Now())
	h.renderLogin(w, r, http.StatusOK, inv.MerchantID, inv.Email, "")
}

// ---- account: TOTP enrolment ----

// The enrolment form carries its new secret sealed to the user and the
// session, with an expiry: a form kept from another session, or older than
// enrolTTL (or its session), does not open.
func (h *handler) enrolOwner(u *User, s *Session) string {
	return "totp-enrol:" + u.Email + ":" + s.IDHash
}

func (h *handler) sealEnrol(u *User, s *Session, secret string) string {
	exp := min(h.Now().Add(enrolTTL).Unix(), s.ExpiresAt.Unix())
	return h.Sealer.Seal(secret+"|"+strconv.FormatInt(exp, 10), h.enrolOwner(u, s))
}

func (h *handler) openEnrol(u *User, s *Session, sealed string) (string, bool) {
	v, err := h.Sealer.Open(sealed, h.enrolOwner(u, s))
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

func (h *handler) account(w http.ResponseWriter, r *http.Request, s *Session) error {
	u, err := h.Store.DashboardUser(r.Context(), s.MerchantID, s.Email)
	if err != nil {
		return err
	}
	return h.renderAccount(w, r, s, u, NewTOTPSecret(), http.StatusOK, "")
}

func (h *handler) renderAccount(w http.ResponseWriter, r *http.Request, s *Session, u *User, secret string, status int, msg string) error {
	h.render(w, r, status, "account", s, map[string]any{"User": u, "TOTPOn": u.SealedTOTP != "", "Secret": secret,
		"Sealed": h.sealEnrol(u, s, secret), "URI": TOTPURI(secret, u.Email), "Message": msg})
	return nil
}

var errEnrolExpired = errStatus(http.StatusBadRequest, "This form has expired (it works for 15 minutes, in the session that opened it). Reload the page for a new key.")

// enrollTOTP turns TOTP on (a code proves the app has the new secret),
// replaces it or turns it off. While TOTP is on, replacing or turning it
// off needs the password and a current code, counted like a sign-in (see
// admit). The change steps CredVersion: every session of the user ends but
// this one, which is issued anew. The code that proves a new secret is
// recorded as used (TOTPStep), so it does not sign in again.
func (h *handler) enrollTOTP(w http.ResponseWriter, r *http.Request, s *Session) error {
	u, err := h.Store.DashboardUser(r.Context(), s.MerchantID, s.Email)
	if err != nil {
		return err
	}
	disable := r.PostFormValue("action") == "disable"
	var secret string
	var newStep uint64
	if !disable {
		var ok bool
		if secret, ok = h.openEnrol(u, s, r.PostFormValue("sealed")); !ok {
			return errEnrolExpired
		}
		if newStep, ok = VerifyTOTP(secret, r.PostFormValue("code"), h.Now()); !ok {
			return h.renderAccount(w, r, s, u, secret, http.StatusBadRequest, "The code is wrong; check the time on your device.")
		}
	}
	before := u.SealedTOTP
	if before == "" && disable {
		return h.renderAccount(w, r, s, u, NewTOTPSecret(), http.StatusOK, "Two-factor sign-in is off.")
	}
	change := func(f *User) bool {
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
		ok, err := h.checkFactor(r.Context(), u, r.PostFormValue("password"), r.PostFormValue("current"), change)
		if secret == "" { // turning off: the page still offers a new key
			secret = NewTOTPSecret()
		}
		if err != nil {
			st := h.refusal(w, r, err)
			return h.renderAccount(w, r, s, u, secret, st.status, st.msg)
		}
		if !ok {
			return h.renderAccount(w, r, s, u, secret, http.StatusBadRequest,
				"The password or the current code is wrong, or the account is locked for a while after repeated failures.")
		}
	} else {
		for try := 0; ; try++ {
			if !change(u) {
				return errStatus(http.StatusConflict, "Two-factor sign-in was changed meanwhile. Reload the page.")
			}
			u.UpdatedAt = h.Now()
			err := h.Store.UpdateDashboardUser(r.Context(), u) // guard: version unchanged since read
			if err == nil {
				break
			}
			if !h.IsConflict(err) || try == 5 {
				return err
			}
			if u, err = h.Store.DashboardUser(r.Context(), s.MerchantID, s.Email); err != nil {
				return err
			}
		}
	}
	ns, err := h.startSession(w, r, u, false)
	if err != nil {
		return err
	}
	on := u.SealedTOTP != ""
	word := map[bool]string{true: "on", false: "off"}[on]
	if before != "" && on {
		word = "replaced"
	}
	h.auditLog(r.Context(), s, "user.totp", fmt.Sprintf("%s: two-factor sign-in %s; other sessions ended", u.Email, word))
	return h.renderAccount(w, r, ns, u, NewTOTPSecret(), http.StatusOK, "Two-factor sign-in is now "+word+".")
}

// checkFactor checks u's password and a current code of its second factor
// as one counted attempt (see admit); change is applied with the success.
func (h *handler) checkFactor(ctx context.Context, u *User, pw, code string, change func(*User) bool) (bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	a, err := h.admit(ctx, u.MerchantID, u.Email)
	if err != nil || !a.Admitted() {
		return false, err
	}
	pwOK := h.CheckPassword(u.PasswordHash, pw)
	secret, err := h.Sealer.Open(u.SealedTOTP, "totp:"+u.Email)
	if err != nil || !pwOK {
		return false, nil
	}
	step, ok := VerifyTOTP(secret, code, h.Now())
	if !ok || step <= u.TOTPStep {
		return false, nil
	}
	return h.succeed(ctx, u, a, func(f *User) bool {
		if step <= f.TOTPStep {
			return false
		}
		f.TOTPStep = step
		return change(f)
	})
}
