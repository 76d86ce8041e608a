package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/httpapi"
)

// Sign-in, the second factor, sign-out, set-password links and TOTP enrolment.

// dummyHash is checked for unknown addresses and locked users, so the
// answer's timing does not tell them apart from a wrong password.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$ZGFzaGJvYXJkLWR1bW15$Qm9ndXNCb2d1c0JvZ3VzQm9ndXNCb2d1c0JvZ3VzMTI"

const signInFailed = "The e-mail address or password is wrong, or the account is locked for a while after repeated failures."

func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.renderLogin(w, r, http.StatusOK, "", "")
}

// renderLogin issues the sign-in form with a fresh double-submit token.
func (h *handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, email, msg string) {
	tok := NewToken()
	h.setCookie(w, h.loginCookie(), tok, 3600)
	h.render(w, r, status, "login", nil, map[string]any{"LoginToken": tok, "Email": email, "Error": msg})
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(h.loginCookie())
	if err != nil || !validCSRF(c.Value, r.PostFormValue("csrf")) {
		h.renderLogin(w, r, http.StatusForbidden, "", "The sign-in form expired. Try again.")
		return
	}
	email, _ := NormalizeEmail(r.PostFormValue("email"))
	pw := r.PostFormValue("password")
	u, ok, err := h.checkPassword(r.Context(), email, pw)
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if !ok {
		httpapi.Logger(r.Context()).Warn("dashboard sign-in failed")
		h.renderLogin(w, r, http.StatusUnauthorized, email, signInFailed)
		return
	}
	if err := h.startSession(w, r, u, u.SealedTOTP != ""); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	h.setCookie(w, h.loginCookie(), "", -1)
	if u.SealedTOTP != "" {
		http.Redirect(w, r, "/dashboard/totp", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/dashboard/payments", http.StatusSeeOther)
}

// checkPassword verifies a sign-in and keeps the failure counter: ok is
// false for an unknown address, a locked user or a wrong password alike.
func (h *handler) checkPassword(ctx context.Context, email, pw string) (*User, bool, error) {
	var u *User
	if email != "" {
		var err error
		if u, err = h.Store.DashboardUser(ctx, email); err != nil && !h.IsNotFound(err) {
			return nil, false, err
		}
	}
	now := h.Now()
	if u == nil || u.PasswordHash == "" || now.Before(u.LockedUntil) {
		h.CheckPassword(dummyHash, pw)
		return nil, false, nil
	}
	ok := h.CheckPassword(u.PasswordHash, pw)
	return u, ok, h.countAttempt(ctx, u, ok)
}

// countAttempt resets the failure counter on success and locks the user
// out after MaxFailures consecutive failures, for LockFor(failures).
func (h *handler) countAttempt(ctx context.Context, u *User, ok bool) error {
	for range 3 {
		now := h.Now()
		if ok && u.Failures == 0 {
			return nil
		}
		if ok {
			u.Failures, u.LockedUntil = 0, time.Time{}
		} else {
			u.Failures++
			if d := LockFor(u.Failures); d > 0 {
				u.LockedUntil = now.Add(d)
			}
		}
		u.UpdatedAt = now
		err := h.Store.UpdateDashboardUser(ctx, u)
		if err == nil || !h.IsConflict(err) {
			return err
		}
		// Another attempt counted at the same time: count on its result.
		fresh, err := h.Store.DashboardUser(ctx, u.Email)
		if err != nil {
			return err
		}
		*u = *fresh
	}
	return errors.New("sign-in counter: too many concurrent updates")
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
	u, err := h.Store.DashboardUser(r.Context(), s.Email)
	if h.IsNotFound(err) || (err == nil && (u.MerchantID != s.MerchantID || !s.UserSince.Equal(u.CreatedAt))) {
		h.endSession(r, s) // removed while signing in
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	ok := false
	var step uint64
	if secret, err := h.Sealer.Open(u.SealedTOTP, "totp:"+u.Email); err == nil && !h.Now().Before(u.LockedUntil) {
		step, ok = VerifyTOTP(secret, r.PostFormValue("code"), h.Now())
		ok = ok && step > u.TOTPStep // each code once
	}
	if ok {
		// Recording the step is conditional on the user's version: of two
		// sign-ins racing with one code, one wins.
		u.TOTPStep, u.Failures, u.LockedUntil, u.UpdatedAt = step, 0, time.Time{}, h.Now()
		if err := h.Store.UpdateDashboardUser(r.Context(), u); err != nil {
			if !h.IsConflict(err) {
				h.fail(w, r, nil, err)
				return
			}
			ok = false
		}
	} else if err := h.countAttempt(r.Context(), u, false); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if !ok {
		h.render(w, r, http.StatusUnauthorized, "totp", s, map[string]any{"PendingCSRF": s.CSRF,
			"Error": "The code is wrong or expired."})
		return
	}
	if err := h.startSession(w, r, u, false); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, "/dashboard/payments", http.StatusSeeOther)
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
	DashboardUser(ctx context.Context, email string) (*User, error)
	PutInvite(ctx context.Context, inv *Invite) error
	AppendAudit(ctx context.Context, e AuditEntry) error
}

// ErrOtherMerchant: the address already belongs to another merchant's user.
var ErrOtherMerchant = errors.New("this e-mail address is used by another merchant's dashboard")

// InviteUser creates the user (when new) and a one-time link, valid for
// InviteTTL, to set its password; baseURL is the API's public base URL.
// Inviting an existing user of the same merchant issues a new link (a
// password reset by an admin or operator).
func InviteUser(ctx context.Context, st InviteStore, isNotFound func(error) bool, merchantID, email, role, actor, baseURL string, now time.Time) (string, error) {
	raw := email
	email, ok := NormalizeEmail(email)
	if !ok {
		email = raw
		return "", BadInput(fmt.Sprintf("%q is not an e-mail address.", email))
	}
	if role != RoleAdmin && role != RoleMember {
		return "", BadInput(fmt.Sprintf("The role must be %s or %s.", RoleAdmin, RoleMember))
	}
	u, err := st.DashboardUser(ctx, email)
	switch {
	case err != nil && !isNotFound(err):
		return "", err
	case err == nil && u.MerchantID != merchantID:
		return "", ErrOtherMerchant
	case err != nil:
		u = &User{Email: email, MerchantID: merchantID, Role: role, CreatedAt: now, UpdatedAt: now}
		if err := st.CreateDashboardUser(ctx, u); err != nil {
			return "", err
		}
	}
	tok := NewToken()
	if err := st.PutInvite(ctx, &Invite{TokenHash: HashToken(tok), Email: email, MerchantID: merchantID, CreatedBy: actor,
		ExpiresAt: now.Add(InviteTTL)}); err != nil {
		return "", err
	}
	if err := Record(ctx, st, merchantID, actor, "user.invite", fmt.Sprintf("%s (%s): set-password link issued", email, u.Role), now); err != nil {
		return "", err
	}
	return strings.TrimRight(baseURL, "/") + "/dashboard/set-password?token=" + url.QueryEscape(tok), nil
}

func (h *handler) setPasswordPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	inv, err := h.Store.Invite(r.Context(), HashToken(tok), h.Now())
	if err != nil {
		h.fail(w, r, nil, h.inviteErr(err))
		return
	}
	h.render(w, r, http.StatusOK, "setpassword", nil, map[string]any{"Token": tok, "Email": inv.Email, "Min": MinPasswordLen})
}

func (h *handler) inviteErr(err error) error {
	if h.IsNotFound(err) {
		return errStatus(http.StatusNotFound, "This link is invalid, used or expired. Ask an administrator for a new one.")
	}
	return err
}

// setPassword is authenticated by the link's token itself, which it uses up.
func (h *handler) setPassword(w http.ResponseWriter, r *http.Request) {
	tok, pw := r.PostFormValue("token"), r.PostFormValue("password")
	inv, err := h.Store.Invite(r.Context(), HashToken(tok), h.Now())
	if err != nil {
		h.fail(w, r, nil, h.inviteErr(err))
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
	for range 3 {
		var u *User
		if u, err = h.Store.DashboardUser(r.Context(), inv.Email); err != nil {
			break
		}
		if u.MerchantID != inv.MerchantID {
			err = errNotFound
			break
		}
		u.PasswordHash, u.Failures, u.LockedUntil, u.UpdatedAt = hash, 0, time.Time{}, h.Now()
		if err = h.Store.UpdateDashboardUser(r.Context(), u); err == nil || !h.IsConflict(err) {
			break
		}
	}
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	_ = Record(r.Context(), h.Store, inv.MerchantID, inv.Email, "user.set-password", inv.Email+" set a password", h.Now())
	h.renderLogin(w, r, http.StatusOK, inv.Email, "")
}

// ---- account: TOTP enrolment ----

func (h *handler) account(w http.ResponseWriter, r *http.Request, s *Session) error {
	u, err := h.Store.DashboardUser(r.Context(), s.Email)
	if err != nil {
		return err
	}
	secret := NewTOTPSecret()
	return h.renderAccount(w, r, s, u, secret, http.StatusOK, "")
}

func (h *handler) renderAccount(w http.ResponseWriter, r *http.Request, s *Session, u *User, secret string, status int, msg string) error {
	h.render(w, r, status, "account", s, map[string]any{"User": u, "TOTPOn": u.SealedTOTP != "", "Secret": secret,
		"Sealed": h.Sealer.Seal(secret, "totp-enrol:"+u.Email), "URI": TOTPURI(secret, u.Email), "Message": msg})
	return nil
}

// enrollTOTP turns TOTP on (after a code proves the app has the secret) or off.
func (h *handler) enrollTOTP(w http.ResponseWriter, r *http.Request, s *Session) error {
	u, err := h.Store.DashboardUser(r.Context(), s.Email)
	if err != nil {
		return err
	}
	if r.PostFormValue("action") == "disable" {
		if !h.CheckPassword(u.PasswordHash, r.PostFormValue("password")) {
			return h.renderAccount(w, r, s, u, NewTOTPSecret(), http.StatusBadRequest, "The password is wrong.")
		}
		u.SealedTOTP = ""
	} else {
		secret, err := h.Sealer.Open(r.PostFormValue("sealed"), "totp-enrol:"+u.Email)
		if err != nil {
			return errStatus(http.StatusBadRequest, "The form is invalid. Reload the page.")
		}
		if _, ok := VerifyTOTP(secret, r.PostFormValue("code"), h.Now()); !ok {
			return h.renderAccount(w, r, s, u, secret, http.StatusBadRequest, "The code is wrong; check the time on your device.")
		}
		u.SealedTOTP = h.Sealer.Seal(secret, "totp:"+u.Email)
	}
	u.UpdatedAt = h.Now()
	if err := h.Store.UpdateDashboardUser(r.Context(), u); err != nil {
		return err
	}
	on := u.SealedTOTP != ""
	h.auditLog(r.Context(), s, "user.totp", fmt.Sprintf("%s turned two-factor sign-in %s", u.Email, map[bool]string{true: "on", false: "off"}[on]))
	return h.renderAccount(w, r, s, u, NewTOTPSecret(), http.StatusOK, "Two-factor sign-in is now "+map[bool]string{true: "on", false: "off"}[on]+".")
}
