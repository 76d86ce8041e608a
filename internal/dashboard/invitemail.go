package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/mail"
)

// An admin's invitation goes to the invitee only, by e-mail: the admin's
// page says "Invitation sent to <address>, valid until <time>" and never
// shows the link. Whatever a link does differs for a new person (choose a
// password) and one who signs in already (sign in and accept), so an
// inviter holding the link would learn which the address is; with the link
// in the invitee's mailbox only, the admin's answer, its reads and writes
// are the same for any address (TestInvitingAnotherMerchantsAddressRevealsNothing).
// The operator's payctl still prints links: the operator sees every
// identity anyway.

// Mailer delivers one e-mail (mail.Dir on the local stack, Amazon SES on
// AWS: internal/wire/dashboardwire). Send returns once the message is
// accepted for delivery, or an error; it bounds its own wait and never
// logs the message's text, which carries a one-time link.
type Mailer interface {
	Send(ctx context.Context, m mail.Message) error
}

// invitationMessage is the e-mail that carries an invitation's link: the
// merchant, the role, the link and until when it works. It is the same for
// a new person and one who signs in already (nothing about the address is
// read to write it); the link's page tells them apart, for the invitee only.
func invitationMessage(inv *invitation) mail.Message {
	until := inv.Until.UTC().Format("2006-01-02 15:04 UTC")
	return mail.Message{
		To:      inv.Email,
		Subject: "Invitation to " + inv.MerchantName + " on the PayReq dashboard",
		Text: fmt.Sprintf(`You are invited to work for %s in the PayReq merchant dashboard, as %s.

Open this link to accept:

%s

The link works once, until %s (%s); a newer invitation of your address replaces it.
If you already sign in to the dashboard, sign in and accept with the password you have.
Otherwise, choose your password on the link's page.

If you did not expect this invitation, ignore this message: nothing happens unless the link is used.
`, inv.MerchantName, inv.Role, inv.Link, until, lifetime(InviteTTL)),
	}
}

// errNoMailer refuses an invitation on a stack with no sender configured.
var errNoMailer = refuse(errkind.Unavailable, "This service has no invitation e-mail sender configured (its InvitationSender), so invitations cannot be sent from the dashboard. The operator can invite with payctl.")

// invite writes an invitation and e-mails its link to the invitee before
// answering. A send that fails after the invitation was written answers
// 503 saying so, and the audit log records it: the invitation stays, with
// a link nobody holds, and inviting again (the users page's "Send again")
// issues and sends a new one, voiding the unsent link.
func (h *handler) invite(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error {
	if h.Mailer == nil {
		return h.usersRefusing(w, r, s, errNoMailer)
	}
	base := h.PublicBaseURL
	if base == "" {
		base = "https://" + r.Host
	}
	inv, err := inviteUser(r.Context(), h.Store, s.MerchantID, r.PostFormValue("email"), r.PostFormValue("role"), s.Email, base, h.Now())
	if err != nil {
		return h.usersRefusing(w, r, s, err)
	}
	until := inv.Until.UTC().Format("2006-01-02 15:04 MST")
	// The send ends before the request's deadline less answerReserve,
	// whatever the mailer's own bound: a SES that hangs still gets the
	// admin this page's 503, not the function's timeout.
	ctx, cancel := countCtx(r.Context())
	defer cancel()
	if err := h.Mailer.Send(ctx, invitationMessage(inv)); err != nil {
		// The error names no link (the adapters never put the text in one).
		httpapi.Logger(r.Context()).Error("invitation e-mail not sent", "error", err.Error())
		h.auditLog(r.Context(), s, "user.invite", fmt.Sprintf("%s (%s) invited; the e-mail with the link could not be sent", inv.Email, inv.Role))
		return h.usersRefusing(w, r, s, refuse(errkind.Unavailable, fmt.Sprintf(
			"The invitation of %s is saved, but its e-mail could not be sent. Send it again: a new link goes out and the unsent one stops working.", inv.Email)))
	}
	h.auditLog(r.Context(), s, "user.invite", fmt.Sprintf("%s (%s) invited; the link was e-mailed to them and works until %s", inv.Email, inv.Role, until))
	return h.renderUsers(w, r, s, http.StatusOK, map[string]any{"SentTo": inv.Email, "SentUntil": inv.Until})
}

// usersRefusing shows the users page with a refusal (its kind's status);
// any other error is the service's failure.
func (h *handler) usersRefusing(w http.ResponseWriter, r *http.Request, s *dashuser.Session, err error) error {
	var se *pageError
	if !errors.As(err, &se) {
		return err
	}
	return h.renderUsers(w, r, s, se.status(), map[string]any{"Error": se.Error()})
}
