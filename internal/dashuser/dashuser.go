// Package dashuser holds the merchant dashboard's records: the people who
// sign in (identities), their places at merchants (memberships), sessions,
// set-password links and audit entries. They are domain types:
// internal/dynamo stores them and internal/dashboard serves them, and
// neither imports the other for them.
package dashuser

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/mail"
	"strings"
	"time"
)

// Roles of a membership. Admins change settings, keys and members and
// refund; members read and redeliver notifications.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Identity is a person: one per e-mail address, with one password and one
// second factor, whatever the number of merchants they belong to.
type Identity struct {
	Email        string // lower-cased, the key
	PasswordHash string // Argon2id PHC string; empty until a password is set
	SealedTOTP   string // TOTP secret sealed to the identity; empty: TOTP off
	// TOTPStep is the time step of the last code accepted: a code is
	// accepted once (a later sign-in needs a later step).
	TOTPStep uint64
	// CredVersion counts changes of what signs the person in (password,
	// second factor): a session carries the value of its sign-in and ends
	// when it differs. Failed sign-ins are counted apart, per address
	// (internal/lockout).
	CredVersion int64
	// ResetHash is the hash of the one live password link an operator
	// issued (payctl user reset); using it clears it.
	ResetHash string
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// HasSignIn reports whether the person can sign in: a password of their
// own, or memberships carried over from per-merchant users whose passwords
// still await their first proof (see Membership.LegacyHash).
func (id *Identity) HasSignIn(ms []*Membership) bool {
	if id != nil && id.PasswordHash != "" {
		return true
	}
	for _, m := range ms {
		if m.State == StateUnproven {
			return true
		}
	}
	return false
}

// States of a membership.
const (
	// StateActive: the person works in the merchant's dashboard.
	StateActive = "active"
	// StateInvited: an admin invited the address; the person accepts it
	// (signed in, or by setting a first password through the link).
	StateInvited = "invited"
	// StateUnproven: carried over from a per-merchant user whose password
	// differs from the identity's (or none was proven yet): it is linked
	// when the person proves that user's password, or accepts a fresh
	// invitation.
	StateUnproven = "unproven"
)

// Membership is a person's place at one merchant: their role there, and
// whether they have taken it up.
type Membership struct {
	Email      string
	MerchantID string
	// MerchantName is the merchant's name when the membership was written
	// (shown in the picker and the switcher).
	MerchantName string
	Role         string
	State        string
	// InviteHash is the hash of the invitation's one live link (invited);
	// InviteExpires when it and the invitation lapse.
	InviteHash    string
	InviteExpires time.Time
	InvitedBy     string
	// LegacyHash and LegacyTOTP are the password hash and sealed second
	// factor of the per-merchant user this membership was migrated from
	// (unproven only).
	LegacyHash string
	LegacyTOTP string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Version    int64
}

// Usable reports whether the membership opens the merchant's pages.
func (m *Membership) Usable() bool { return m != nil && m.State == StateActive }

// Pending reports whether an invitation awaits the person's answer at now.
func (m *Membership) Pending(now time.Time) bool {
	return m != nil && m.State == StateInvited && now.Before(m.InviteExpires)
}

// Session is a signed-in browser, stored server-side under the hash of its
// id (the cookie value): a read of the table never yields a usable cookie.
// A session belongs to an identity; the merchant is chosen per request (it
// is in the page's address), so two tabs hold two merchants.
type Session struct {
	IDHash string
	Email  string
	// MerchantID is the merchant the person last chose (where /dashboard
	// lands); for a request, the merchant of its address. Role is the
	// person's role there, set per request from the membership.
	MerchantID string
	Role       string
	CSRF       string // the session's secret from which every form's token is derived
	// TOTPPending: the password was right, the second factor is still due;
	// such a session opens no page but the TOTP form.
	TOTPPending bool
	// UserSince is the identity's CreatedAt at sign-in.
	UserSince time.Time
	// CredVersion is the identity's CredVersion at sign-in.
	CredVersion int64
	CreatedAt   time.Time
	// LastSeen is the last request's time, written at most once per
	// touchEvery; a session unused for IdleTimeout ends.
	LastSeen  time.Time
	ExpiresAt time.Time
}

// Link kinds.
const (
	LinkInvite = "invite" // an admin's invitation to a merchant
	LinkReset  = "reset"  // an operator's password link for an identity
)

// Invite is a one-time link, stored under the hash of its token: an
// invitation to a merchant (MerchantID set) or a password reset.
type Invite struct {
	TokenHash  string
	Kind       string
	Email      string
	MerchantID string
	Role       string
	CreatedBy  string
	ExpiresAt  time.Time
}

// AuditEntry records a change to a merchant's settings, keys or members.
type AuditEntry struct {
	MerchantID string
	At         time.Time
	Actor      string // the person's e-mail, or "payctl"
	Action     string // e.g. "settings.update", "apikey.rotate", "user.invite"
	Detail     string // what changed, never a secret
}

// NormalizeEmail lower-cases and checks an address.
func NormalizeEmail(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || len(s) > 254 {
		return "", false
	}
	return s, true
}

// NewToken returns 256 random bits, URL-safe: session ids, invite and CSRF tokens.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is the stored handle of a session id or invite token. A fast hash
// suffices: the tokens are 256-bit random values.
func HashToken(t string) string {
	sum := sha256.Sum256([]byte("payreq/dashboard-token/v1:" + t))
	return hex.EncodeToString(sum[:])
}
