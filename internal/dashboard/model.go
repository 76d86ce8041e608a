package dashboard

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
	// Failures counts consecutive failed sign-ins; LockedUntil is when the
	// next attempt is accepted again (back-off doubles per failure).
	Failures    int
	LockedUntil time.Time
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

// Delivery is one notification attempt as the dashboard shows it.
type Delivery struct {
	EventID    string
	Attempt    int
	At         time.Time
	URL        string
	StatusCode int
	Error      string
	Outcome    string
	NextAt     time.Time
}

// Batch is one uploaded batch file's summary.
type Batch struct {
	File       string
	State      string
	Approved   int
	Declined   int
	Pending    int
	Rejected   int
	Duplicate  int
	Rows       int
	ResultKey  string // result file name in /results; empty until done
	UpdatedAt  time.Time
	ReceivedAt time.Time
	// LinesDone of LinesTotal: the file's progress (LinesTotal is 0 until
	// the file has been read through once, while it is hashed).
	LinesDone, LinesTotal int64
}

// Running reports whether the file is still being processed.
func (b Batch) Running() bool { return b.State != "done" && b.State != "failed" }

// Finish estimates when a running file is done: the lines left at the
// pace so far (from its receipt to its last progress); zero when unknown.
func (b Batch) Finish() time.Time {
	if !b.Running() || b.LinesDone <= 0 || b.LinesTotal <= b.LinesDone || !b.UpdatedAt.After(b.ReceivedAt) {
		return time.Time{}
	}
	spent := b.UpdatedAt.Sub(b.ReceivedAt)
	left := time.Duration(float64(spent) * float64(b.LinesTotal-b.LinesDone) / float64(b.LinesDone))
	return b.UpdatedAt.Add(left).Truncate(time.Second)
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

// PaymentQuery selects a merchant's payment requests, newest first.
type PaymentQuery struct {
	MerchantID string
	Status     int // 0: any
	From, To   time.Time
	Reference  string
	Cursor     string // opaque, from the previous page
	Limit      int
}
