package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/httpapi"
)

// Removing users and changing roles. Sessions need no separate revocation:
// every signed-in request reads its user (see current); a removal deletes
// the user and a role change steps its CredVersion, so every session of the
// user ends on its next request.

var errLastAdmin = errStatus(http.StatusBadRequest, "A merchant needs at least one administrator: make another user an administrator first.")

// targetUser reads the user a form names; another merchant's user, or none,
// is 404 (the same answer, so addresses of other merchants are not revealed).
func (h *handler) targetUser(r *http.Request, s *Session) (*User, error) {
	email, ok := NormalizeEmail(r.PostFormValue("email"))
	if !ok {
		return nil, errNotFound
	}
	u, err := h.Store.DashboardUser(r.Context(), s.MerchantID, email)
	if h.IsNotFound(err) {
		return nil, errNotFound
	}
	return u, err
}

// withUsersLocked runs change holding the merchant's user-change lease, so
// the last-admin check and the change it allows are not raced by another
// removal or demotion (two admins demoting each other at once).
func (h *handler) withUsersLocked(r *http.Request, merchantID string, change func() error) error {
	owner := NewToken()
	for attempt := 0; ; attempt++ {
		now := h.Now()
		err := h.Store.LockUsers(r.Context(), merchantID, owner, now.Add(usersLease), now)
		if err == nil {
			break
		}
		if !h.IsConflict(err) {
			return err
		}
		if attempt == 20 { // about 10 s of waiting, within the lease
			return errStatus(http.StatusConflict, "Another change to the users is in progress. Try again.")
		}
		select {
		case <-r.Context().Done():
			return r.Context().Err()
		case <-time.After(time.Duration(50*(attempt+1)) * time.Millisecond):
		}
	}
	defer func() {
		// Released even when the request was cancelled: otherwise the lease
		// would block the merchant's user changes until it runs out.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := h.Store.UnlockUsers(ctx, merchantID, owner); err != nil {
			httpapi.Logger(r.Context()).Error("unlock dashboard users", "error", err.Error())
		}
	}()
	return change()
}

// otherAdmins reports whether the merchant has an administrator besides
// email, from the users' records (a consistent query of the merchant's).
func (h *handler) otherAdmins(r *http.Request, merchantID, email string) (bool, error) {
	list, err := h.Store.DashboardUsers(r.Context(), merchantID)
	if err != nil {
		return false, err
	}
	for _, u := range list {
		if u.Email != email && u.MerchantID == merchantID && u.Role == RoleAdmin {
			return true, nil
		}
	}
	return false, nil
}

// changeRole makes a user an admin or a member; the last admin stays one.
func (h *handler) changeRole(w http.ResponseWriter, r *http.Request, s *Session) error {
	role := r.PostFormValue("role")
	if role != RoleAdmin && role != RoleMember {
		return h.renderUsers(w, r, s, http.StatusBadRequest, map[string]any{"Error": fmt.Sprintf("The role must be %s or %s.", RoleAdmin, RoleMember)})
	}
	u, err := h.targetUser(r, s)
	if err != nil {
		return err
	}
	var from string
	err = h.withUsersLocked(r, s.MerchantID, func() error {
		for range 3 {
			// Read under the lease: the check below judges the present state.
			if u, err = h.Store.DashboardUser(r.Context(), s.MerchantID, u.Email); err != nil {
				return h.notFoundAs(err)
			}
			if u.MerchantID != s.MerchantID {
				return errNotFound
			}
			from = u.Role
			if from == role {
				return nil
			}
			if from == RoleAdmin {
				ok, err := h.otherAdmins(r, s.MerchantID, u.Email)
				if err != nil {
					return err
				}
				if !ok {
					return errLastAdmin
				}
			}
			u.Role, u.UpdatedAt = role, h.Now()
			u.CredVersion++ // ends the user's sessions
			// Version-conditional: a sign-in counting a failure meanwhile is
			// not overwritten; read again and retry.
			if err = h.Store.UpdateDashboardUser(r.Context(), u); err == nil || !h.IsConflict(err) {
				return err
			}
		}
		return errors.New("change role: too many concurrent updates")
	})
	if errors.Is(err, errLastAdmin) {
		return h.renderUsers(w, r, s, http.StatusBadRequest, map[string]any{"Error": err.Error()})
	}
	if err != nil {
		return err
	}
	if from == role {
		return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"Notice": u.Email + " is already " + role + "."})
	}
	h.auditLog(r.Context(), s, "user.role", fmt.Sprintf("%s: %s → %s", u.Email, from, role))
	if u.Email == s.Email {
		// Changed one's own role: this session ended with the others; the
		// acting browser gets a new one with the new role.
		if s, err = h.startSession(w, r, u, false); err != nil {
			return err
		}
		if role != RoleAdmin {
			http.Redirect(w, r, "/dashboard/account", http.StatusSeeOther)
			return nil
		}
	}
	return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"Notice": u.Email + " is now " + role + ". Their sessions have ended."})
}

// removeUser deletes a user; the last admin stays.
func (h *handler) removeUser(w http.ResponseWriter, r *http.Request, s *Session) error {
	u, err := h.targetUser(r, s)
	if err != nil {
		return err
	}
	err = h.withUsersLocked(r, s.MerchantID, func() error {
		for range 3 {
			if u, err = h.Store.DashboardUser(r.Context(), s.MerchantID, u.Email); err != nil {
				return h.notFoundAs(err)
			}
			if u.MerchantID != s.MerchantID {
				return errNotFound
			}
			if u.Role == RoleAdmin {
				ok, err := h.otherAdmins(r, s.MerchantID, u.Email)
				if err != nil {
					return err
				}
				if !ok {
					return errLastAdmin
				}
			}
			if err = h.Store.DeleteDashboardUser(r.Context(), u); err == nil || !h.IsConflict(err) {
				return err
			}
		}
		return errors.New("remove user: too many concurrent updates")
	})
	if errors.Is(err, errLastAdmin) {
		return h.renderUsers(w, r, s, http.StatusBadRequest, map[string]any{"Error": err.Error()})
	}
	if err != nil {
		return err
	}
	h.auditLog(r.Context(), s, "user.remove", fmt.Sprintf("%s (%s) removed", u.Email, u.Role))
	if u.Email == s.Email {
		// Removed oneself: this session has just ended.
		h.endSession(r, s)
		h.setCookie(w, h.sessionCookie(), "", -1)
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return nil
	}
	return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"Notice": u.Email + " was removed and signed out."})
}

func (h *handler) notFoundAs(err error) error {
	if h.IsNotFound(err) {
		return errNotFound
	}
	return err
}
