package dashboard

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
)

// A merchant's members: removing them and changing their roles. Sessions
// need no separate revocation: every signed-in request reads the person's
// memberships (see signedIn), so a removal or a role change acts on the
// person's next request at that merchant, and only there.

var errLastAdmin = refuse(errkind.Invalid, "A merchant needs at least one administrator: make another member an administrator first.")

// targetMember reads the membership of this merchant a form names; none is
// 404 (only this merchant's memberships are ever read).
func (h *handler) targetMember(r *http.Request, s *dashuser.Session) (*dashuser.Membership, error) {
	email, ok := dashuser.NormalizeEmail(r.PostFormValue("email"))
	if !ok {
		return nil, errNotFound
	}
	m, err := h.Store.Membership(r.Context(), email, s.MerchantID)
	if errkind.Is(err, errkind.NotFound) {
		return nil, errNotFound
	}
	return m, err
}

// withUsersLocked runs change holding the merchant's member-change lease,
// so the last-admin check and the change it allows are not raced by
// another removal or demotion (two admins demoting each other at once).
// Waiting for the lease stops before the request's deadline (less
// answerReserve) or after about 10 s: the answer is then 409, "try again".
func (h *handler) withUsersLocked(r *http.Request, merchantID string, change func() error) error {
	ctx, cancel := countCtx(r.Context())
	defer cancel()
	owner := dashuser.NewToken()
	giveUp := time.Now().Add(10 * time.Second)
	busy := refuse(errkind.Conflict, "Another change to the members is in progress. Try again.")
	for attempt := 0; ; attempt++ {
		now := h.Now()
		err := h.Store.LockUsers(ctx, merchantID, owner, now.Add(usersLease), now)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return busy
		}
		if !errkind.Is(err, errkind.Conflict) {
			return err
		}
		if time.Now().After(giveUp) {
			return busy
		}
		// Short, spread pauses: the holder's work takes tens of milliseconds.
		select {
		case <-ctx.Done():
			return busy
		case <-time.After(time.Duration(20+mrand.IntN(20*min(attempt+1, 10))) * time.Millisecond):
		}
	}
	defer func() {
		// Released even when the request was cancelled: otherwise the lease
		// would block the merchant's member changes until it runs out.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := h.Store.UnlockUsers(ctx, merchantID, owner); err != nil {
			httpapi.Logger(r.Context()).Error("unlock dashboard users", "error", err.Error())
		}
	}()
	return change()
}

// otherAdmins reports whether the merchant has an active administrator
// besides email, from its roster (a consistent query).
func (h *handler) otherAdmins(r *http.Request, merchantID, email string) (bool, error) {
	list, err := h.Store.Members(r.Context(), merchantID)
	if err != nil {
		return false, err
	}
	for _, m := range list {
		if m.Email != email && m.MerchantID == merchantID && m.Role == dashuser.RoleAdmin && m.Usable() {
			return true, nil
		}
	}
	return false, nil
}

// changeRole makes a member an admin or a member; the last admin stays one.
func (h *handler) changeRole(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	role := r.PostFormValue("role")
	if role != dashuser.RoleAdmin && role != dashuser.RoleMember {
		return h.renderUsers(w, r, s, http.StatusBadRequest, map[string]any{"Error": fmt.Sprintf("The role must be %s or %s.", dashuser.RoleAdmin, dashuser.RoleMember)})
	}
	m, err := h.targetMember(r, s)
	if err != nil {
		return err
	}
	var from string
	err = h.withUsersLocked(r, s.MerchantID, func() error {
		for range 3 {
			// Read under the lease: the check below judges the present state.
			if m, err = h.Store.Membership(r.Context(), m.Email, s.MerchantID); err != nil {
				return h.notFoundAs(err)
			}
			from = m.Role
			if from == role {
				return nil
			}
			if from == dashuser.RoleAdmin && m.Usable() {
				ok, err := h.otherAdmins(r, s.MerchantID, m.Email)
				if err != nil {
					return err
				}
				if !ok {
					return errLastAdmin
				}
			}
			m.Role, m.UpdatedAt = role, h.Now()
			// Version-conditional: a concurrent change is not overwritten;
			// read again and retry.
			if err = h.Store.SaveMemberships(r.Context(), nil, m); err == nil || !errkind.Is(err, errkind.Conflict) {
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
		return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"Notice": m.Email + " is already " + role + "."})
	}
	h.auditLog(r.Context(), s, "user.role", fmt.Sprintf("%s: %s → %s", m.Email, from, role))
	if m.Email == s.Email && role != dashuser.RoleAdmin {
		// Demoted oneself: the admin pages are closed from now on.
		http.Redirect(w, r, MerchantPath(s.MerchantID, "/overview"), http.StatusSeeOther)
		return nil
	}
	return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"Notice": m.Email + " is now " + role + ", from their next page on."})
}

// removeUser ends a person's membership of this merchant (their sessions
// lose it on their next request; their other merchants are untouched); the
// last admin stays.
func (h *handler) removeUser(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	m, err := h.targetMember(r, s)
	if err != nil {
		return err
	}
	err = h.withUsersLocked(r, s.MerchantID, func() error {
		for range 3 {
			if m, err = h.Store.Membership(r.Context(), m.Email, s.MerchantID); err != nil {
				return h.notFoundAs(err)
			}
			if m.Role == dashuser.RoleAdmin && m.Usable() {
				ok, err := h.otherAdmins(r, s.MerchantID, m.Email)
				if err != nil {
					return err
				}
				if !ok {
					return errLastAdmin
				}
			}
			if err = h.Store.DeleteMembership(r.Context(), m); err == nil || !errkind.Is(err, errkind.Conflict) {
				return err
			}
		}
		return errors.New("remove member: too many concurrent updates")
	})
	if errors.Is(err, errLastAdmin) {
		return h.renderUsers(w, r, s, http.StatusBadRequest, map[string]any{"Error": err.Error()})
	}
	if err != nil {
		return err
	}
	h.auditLog(r.Context(), s, "user.remove", fmt.Sprintf("%s (%s, %s) removed", m.Email, m.Role, m.State))
	if m.Email == s.Email {
		// Left this merchant: its pages are closed from now on.
		http.Redirect(w, r, pickerPath, http.StatusSeeOther)
		return nil
	}
	return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"Notice": m.Email + " was removed: their access to this merchant has ended."})
}

func (h *handler) notFoundAs(err error) error {
	if errkind.Is(err, errkind.NotFound) {
		return errNotFound
	}
	return err
}
