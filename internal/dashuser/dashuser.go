// Package dashuser holds the merchant dashboard's records: its users,
// sessions, set-password invites and audit entries. They are domain types:
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

// Roles of a dashboard user. Admins change settings, keys and users and
// refund; members read and redeliver notifications.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// User is a person's identity at one merchant's dashboard: the key is
// (MerchantID, Email), so the same address at two merchants is two users
// with separate passwords, factors and sessions, and sign-in names the
// merchant.
type User struct {
	Email        string // lower-cased, the key
	MerchantID   string
	Role         string
	PasswordHash string // Argon2id PHC string; empty until the invite is used
	SealedTOTP   string // TOTP secret sealed to the user; empty: TOTP off
	// TOTPStep is the time step of the last code accepted: a code is
	// accepted once (a later sign-in needs a later step).
	TOTPStep uint64
	// Failed sign-ins and the lock are counted apart from the user, per
	// (merchant, address), whether or not the user exists (internal/lockout).
	// CredVersion counts changes of what signs the user in and what it may
	// do (password, second factor, role): a session carries the value of its
	// sign-in and ends when it differs.
	CredVersion int64
	// InviteHash is the hash of the one live set-password link; a link whose
	// hash is not this one is void (issuing a link replaces it, using one
	// clears it).
	InviteHash string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Version    int64
}

// Session is a signed-in browser, stored server-side under the hash of its
// id (the cookie value): a read of the table never yields a usable cookie.
type Session struct {
	IDHash     string
	Email      string
	MerchantID string
	Role       string
	CSRF       string // synchronizer token of every form of this session
	// TOTPPending: the password was right, the second factor is still due;
	// such a session opens no page but the TOTP form.
	TOTPPending bool
	// UserSince is the user's CreatedAt at sign-in: a user removed and
	// invited again is a new user, whom the old sessions do not sign in.
	UserSince time.Time
	// CredVersion is the user's CredVersion at sign-in.
	CredVersion int64
	CreatedAt   time.Time
	// LastSeen is the last request's time, written at most once per
	// touchEvery; a session unused for IdleTimeout ends.
	LastSeen  time.Time
	ExpiresAt time.Time
}

// Invite is a one-time link to set a user's password, stored under the hash
// of its token.
type Invite struct {
	TokenHash  string
	Email      string
	MerchantID string
	CreatedBy  string
	ExpiresAt  time.Time
}

// AuditEntry records a change to a merchant's settings, keys or users.
type AuditEntry struct {
	MerchantID string
	At         time.Time
	Actor      string // dashboard user e-mail, or "payctl"
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
