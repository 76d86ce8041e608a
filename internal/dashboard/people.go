package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
)

// The person's own pages: their merchants (the picker, with invitations
// to accept and carried-over memberships to link), the switcher, and
// accepting or linking a membership while signed in.

// picker lists the person's merchants: those they work for (each a link to
// its overview, which any tab may open), open invitations, and memberships
// carried over from per-merchant users that await their own password.
func (h *handler) picker(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership) error {
	return h.renderPicker(w, r, s, ms, http.StatusOK, nil)
}

func (h *handler) renderPicker(w http.ResponseWriter, r *http.Request, s *dashuser.Session, ms []*dashuser.Membership, status int, data map[string]any) error {
	if data == nil {
		data = map[string]any{}
	}
	now := h.Now()
	var invited, unproven []*dashuser.Membership
	for _, m := range ms {
		switch {
		case m.Pending(now):
			invited = append(invited, m)
		case m.State == dashuser.StateUnproven:
			unproven = append(unproven, m)
		}
	}
	data["Active"], data["Invited"], data["Unproven"] = usable(ms), invited, unproven
	h.render(w, r, status, "merchants", s, data)
	return nil
}

// switchMerchant is the header's switcher: it opens another merchant of
// the person in this tab and remembers it as the one /dashboard lands on.
// Other tabs keep theirs (the merchant is in each page's address).
func (h *handler) switchMerchant(w http.ResponseWriter, r *http.Request, s *dashuser.Session, _ *dashuser.Identity, ms []*dashuser.Membership) error {
	m := membershipOf(ms, r.PostFormValue("merchant"))
	if m == nil {
		return errNotFound
	}
	if err := h.Store.SetSessionMerchant(r.Context(), s.IDHash, m.MerchantID); err != nil {
		return err
	}
	http.Redirect(w, r, MerchantPath(m.MerchantID, "/overview"), http.StatusSeeOther)
	return nil
}

// acceptInvitation takes up an open invitation of the signed-in person (no
// new password: they proved theirs to sign in). The membership turns
// active at the version read, so an invitation replaced or withdrawn
// meanwhile is not accepted.
func (h *handler) acceptInvitation(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership) error {
	merchantID := r.PostFormValue("merchant")
	var m *dashuser.Membership
	for _, x := range ms {
		if x.MerchantID == merchantID {
			m = x
		}
	}
	if m.Usable() {
		http.Redirect(w, r, MerchantPath(m.MerchantID, "/overview"), http.StatusSeeOther)
		return nil
	}
	if !m.Pending(h.Now()) {
		return refuse(errkind.NotFound, "This invitation was withdrawn, replaced or has expired. Ask the merchant's administrator for a new one.")
	}
	next := *m
	next.State, next.InviteHash, next.InviteExpires, next.UpdatedAt = dashuser.StateActive, "", time.Time{}, h.Now()
	if err := h.Store.SaveMemberships(r.Context(), nil, &next); err != nil {
		if errkind.Is(err, errkind.Conflict) {
			return refuse(errkind.Conflict, "The invitation changed meanwhile. Reload the page.")
		}
		return err
	}
	h.record(r.Context(), next.MerchantID, id.Email, "user.join", fmt.Sprintf("%s accepted the invitation as %s", id.Email, next.Role))
	if err := h.Store.SetSessionMerchant(r.Context(), s.IDHash, next.MerchantID); err != nil {
		return err
	}
	http.Redirect(w, r, MerchantPath(next.MerchantID, "/overview"), http.StatusSeeOther)
	return nil
}

// linkMembership links a membership carried over from a per-merchant user
// whose password differed from the identity's: the person proves that
// user's password, counted like a sign-in (one attempt on the address's
// counter, before the check).
func (h *handler) linkMembership(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership) error {
	merchantID := r.PostFormValue("merchant")
	var m *dashuser.Membership
	for _, x := range ms {
		if x.MerchantID == merchantID && x.State == dashuser.StateUnproven {
			m = x
		}
	}
	if m == nil {
		return errNotFound
	}
	ok, err := h.proveOne(r.Context(), id.Email, m, r.PostFormValue("password"))
	if err != nil {
		st := h.refusal(w, r, err)
		return h.renderPicker(w, r, s, ms, st.status(), map[string]any{"Error": st.e.Detail})
	}
	if !ok {
		return h.renderPicker(w, r, s, ms, http.StatusUnauthorized, map[string]any{"Error": "That is not the password this merchant knew, or the account is locked for a while after repeated failures."})
	}
	h.record(r.Context(), m.MerchantID, id.Email, "user.link", id.Email+" proved the password this merchant knew; the membership is linked to their identity")
	if err := h.Store.SetSessionMerchant(r.Context(), s.IDHash, m.MerchantID); err != nil {
		return err
	}
	http.Redirect(w, r, MerchantPath(m.MerchantID, "/overview"), http.StatusSeeOther)
	return nil
}

// proveOne checks pw against one unproven membership's password, as a
// counted attempt, and activates it on success (at its version).
func (h *handler) proveOne(ctx context.Context, email string, m *dashuser.Membership, pw string) (bool, error) {
	ctx, cancel := countCtx(ctx)
	defer cancel()
	a, err := h.admit(ctx, email)
	if err != nil {
		return false, err
	}
	if !a.Admitted() {
		h.CheckPassword(dummyHash, pw)
		return false, nil
	}
	if !h.CheckPassword(m.LegacyHash, pw) {
		return false, nil
	}
	next := *m
	next.State, next.LegacyHash, next.LegacyTOTP, next.UpdatedAt = dashuser.StateActive, "", "", h.Now()
	if err := h.Store.SaveMemberships(ctx, nil, &next); err != nil {
		if errkind.Is(err, errkind.Conflict) {
			return false, nil // changed meanwhile (removed, invited again): judged on what was read
		}
		return false, countErr(ctx, err)
	}
	return true, h.settle(ctx, a)
}
