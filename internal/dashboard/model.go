package dashboard

import (
	"time"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/payment"
)

// The dashboard's records are domain types (package dashuser), so the
// storage that keeps them imports no handler; the names stay here for the
// dashboard's own code.
const (
	RoleAdmin     = dashuser.RoleAdmin
	RoleMember    = dashuser.RoleMember
	StateActive   = dashuser.StateActive
	StateInvited  = dashuser.StateInvited
	StateUnproven = dashuser.StateUnproven
	LinkInvite    = dashuser.LinkInvite
	LinkReset     = dashuser.LinkReset
)

type (
	Identity   = dashuser.Identity
	Membership = dashuser.Membership
	Session    = dashuser.Session
	Invite     = dashuser.Invite
	AuditEntry = dashuser.AuditEntry
	// PaymentQuery selects a merchant's payment requests (payment.Query).
	PaymentQuery = payment.Query
)

// NormalizeEmail lower-cases and checks an address (dashuser.NormalizeEmail).
func NormalizeEmail(s string) (string, bool) { return dashuser.NormalizeEmail(s) }

// NewToken returns 256 random bits, URL-safe (dashuser.NewToken).
func NewToken() string { return dashuser.NewToken() }

// HashToken is the stored handle of a session id or invite token (dashuser.HashToken).
func HashToken(t string) string { return dashuser.HashToken(t) }

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
