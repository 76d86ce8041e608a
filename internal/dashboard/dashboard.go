// Package dashboard is the merchant dashboard at /dashboard: server-rendered
// HTML pages for a merchant's users (profile, keys, payments, batches, users,
// audit log). It has no AWS imports: storage and the operations that reach
// other systems (notification queue, refunds, batch results) come in as the
// interfaces below, implemented in internal/dynamo and wired in
// internal/wire/dashboardwire.
//
// Rules the handler keeps:
//   - Every page but sign-in, set-password and assets needs a session. The
//     session id is 256 random bits in a cookie (HttpOnly, SameSite=Strict,
//     Secure with the __Host- prefix; only a local stack on plain http drops
//     Secure and the prefix); the table keeps only its hash, with an expiry.
//   - A new session id is issued at every sign-in and after the second factor;
//     the one the browser had is deleted (no session fixation).
//   - Every POST carries the session's synchronizer CSRF token (the sign-in
//     form a double-submit cookie; set-password is authorised by its
//     one-time link token); a mismatch is 403 and changes nothing.
//   - Every object is read through the session's merchant id: another
//     merchant's payment request, transaction or file is 404, as in the API.
//   - Changes (settings, keys, users, refunds) need the admin role and are
//     written to the merchant's audit log with who and when.
//   - Sign-in attempts (password, TOTP) are counted before the secret is
//     checked; failures lock the user out with a doubling back-off.
//   - A change of password, second factor or role ends the user's sessions.
package dashboard

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// Store is the dashboard's persistence (internal/dynamo.Store).
type Store interface {
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
	UpdateMerchant(ctx context.Context, m *merchant.Merchant) error

	CreateDashboardUser(ctx context.Context, u *User) error
	// DashboardUser reads merchantID's user of an address (users are per
	// merchant: the same address at two merchants is two users).
	DashboardUser(ctx context.Context, merchantID, email string) (*User, error)
	// UpdateDashboardUser writes u if its version is unchanged (else a conflict).
	UpdateDashboardUser(ctx context.Context, u *User) error
	DashboardUsers(ctx context.Context, merchantID string) ([]*User, error)
	// DeleteDashboardUser removes u if its version is unchanged (else a conflict).
	DeleteDashboardUser(ctx context.Context, u *User) error
	// LockUsers takes the merchant's user-change lease (a conflict while
	// another owner holds it); UnlockUsers releases it.
	LockUsers(ctx context.Context, merchantID, owner string, until, now time.Time) error
	UnlockUsers(ctx context.Context, merchantID, owner string) error

	PutSession(ctx context.Context, s *Session) error
	Session(ctx context.Context, idHash string, now time.Time) (*Session, error)
	DeleteSession(ctx context.Context, idHash string) error
	// TouchSession sets a live session's last-seen time (never recreates one).
	TouchSession(ctx context.Context, idHash string, at time.Time) error

	PutInvite(ctx context.Context, inv *Invite) error
	Invite(ctx context.Context, tokenHash string, now time.Time) (*Invite, error)
	TakeInvite(ctx context.Context, tokenHash string, now time.Time) (*Invite, error)

	// The sign-in attempt counters (internal/lockout).
	lockout.Store

	AppendAudit(ctx context.Context, e AuditEntry) error
	AuditEntries(ctx context.Context, merchantID string, limit int32) ([]AuditEntry, error)

	PaymentRequestsOf(ctx context.Context, q PaymentQuery) ([]*payment.Request, string, error)
	PaymentRequest(ctx context.Context, id int64) (*payment.Request, error)
	TransactionsOfRequest(ctx context.Context, requestID int64) ([]*payment.Transaction, error)
}

// Ops are the operations that reach beyond the tables.
type Ops interface {
	// Deliveries lists a payment request's notification attempts.
	Deliveries(ctx context.Context, requestID int64) ([]Delivery, error)
	// Redeliver queues the request's notification again; it returns the event id.
	Redeliver(ctx context.Context, r *payment.Request) (string, error)
	// Refund refunds an approved transaction of m through the payment
	// service (the API's refund path); it returns the refund status.
	Refund(ctx context.Context, m *merchant.Merchant, txID int64) (string, error)
	// Batches lists the merchant's batch files.
	Batches(ctx context.Context, merchantID string) ([]Batch, error)
	// BatchResult opens a batch file's result of the merchant.
	BatchResult(ctx context.Context, merchantID, file string) (io.ReadCloser, error)
	// SFTP reports the merchant's SFTP login: whether a password is set and its keys.
	SFTP(ctx context.Context, merchantID string) (hasPassword bool, keys []string, err error)
	SetSFTPPassword(ctx context.Context, merchantID, password string) error
	AddSFTPKey(ctx context.Context, merchantID, key string) error
	RemoveSFTPKey(ctx context.Context, merchantID, key string) error
}

// Sealer seals secrets to an owner (internal/seal).
type Sealer interface {
	Seal(secret, owner string) string
	Open(sealed, owner string) (string, error)
}

// Deps are what the dashboard needs.
type Deps struct {
	Store  Store
	Ops    Ops
	Sealer Sealer
	// Overview reads the aggregates of the home page; nil: no overview.
	Overview OverviewSource
	// IsNotFound and IsConflict tell the store's error kinds apart.
	IsNotFound func(error) bool
	IsConflict func(error) bool
	// Files holds the assets (*.css, *.js): web/dashboard.
	Files fs.FS
	Log   *slog.Logger
	// InsecureCookies drops Secure and the __Host- prefix: only for a local
	// stack served over plain http, where a browser would not send them back.
	InsecureCookies bool
	// PublicBaseURL starts set-password links; empty: the request's host.
	PublicBaseURL string
	// SFTPAddress is shown on the profile page (host:port); empty: not configured.
	SFTPAddress string
	// NewWebhookSecret mints a webhook secret (internal/notify).
	NewWebhookSecret func() (string, error)
	// AttemptKeys names the sign-in attempt counters by a keyed hash of
	// (merchant, address): lockout.NewKeyer of the seal key. Required.
	AttemptKeys *lockout.Keyer
	// HashPassword and CheckPassword are Argon2id in PHC form (internal/sftpauth).
	HashPassword  func(string) (string, error)
	CheckPassword func(hash, pw string) bool
	Now           func() time.Time
}

// Timings and limits.
const (
	SessionTTL     = 8 * time.Hour    // absolute limit
	IdleTimeout    = 30 * time.Minute // a session unused this long ends
	touchEvery     = time.Minute      // last-seen is written at most this often
	usersLease     = 15 * time.Second // the user-change lock's lease
	pendingTOTPTTL = 5 * time.Minute
	InviteTTL      = 24 * time.Hour      // a set-password link's lifetime
	enrolTTL       = 15 * time.Minute    // a TOTP enrolment form's lifetime (at most its session's)
	MaxFailures    = lockout.MaxFailures // failures before the first lock (30 s, doubling up to an hour)
	MinPasswordLen = 12
	maxFormBytes   = 64 << 10
)

// LockFor is how long the failures-th consecutive failure locks a user out
// (the schedule SFTP logins share: internal/lockout).
func LockFor(failures int) time.Duration { return lockout.LockFor(failures) }

// Route patterns (template.yaml declares the same; a test ties them).
var routes = []string{
	"GET /dashboard",
	"GET /dashboard/assets/{file}",
	"GET /dashboard/login",
	"POST /dashboard/login",
	"GET /dashboard/totp",
	"POST /dashboard/totp",
	"POST /dashboard/logout",
	"GET /dashboard/set-password",
	"POST /dashboard/set-password",
	"GET /dashboard/overview",
	"GET /dashboard/profile",
	"POST /dashboard/profile",
	"POST /dashboard/profile/api-key",
	"POST /dashboard/profile/webhook-secret",
	"POST /dashboard/profile/sftp",
	"GET /dashboard/account",
	"POST /dashboard/account/totp",
	"GET /dashboard/payments",
	"GET /dashboard/payments/export",
	"GET /dashboard/payments/{id}",
	"POST /dashboard/payments/{id}/redeliver",
	"GET /dashboard/payments/{id}/refund",
	"POST /dashboard/payments/{id}/refund",
	"GET /dashboard/batches",
	"GET /dashboard/batches/result",
	"GET /dashboard/users",
	"POST /dashboard/users",
	"POST /dashboard/users/role",
	"POST /dashboard/users/remove",
	"GET /dashboard/audit",
}

// Routes are the method patterns the handler serves.
func Routes() []string { return append([]string(nil), routes...) }

// homePath is where a signed-in user lands: the overview.
const homePath = "/dashboard/overview"

type handler struct {
	Deps
}

// New returns the dashboard's handler.
func New(d Deps) (http.Handler, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.AttemptKeys == nil {
		return nil, errors.New("dashboard: AttemptKeys is required")
	}
	h := &handler{Deps: d}
	mux := http.NewServeMux()
	open := map[string]http.HandlerFunc{
		"GET /dashboard/assets/{file}": h.asset,
		"GET /dashboard/login":         h.loginPage,
		"POST /dashboard/login":        h.login,
		"GET /dashboard/set-password":  h.setPasswordPage,
		"POST /dashboard/set-password": h.setPassword,
		"GET /dashboard/totp":          h.totpPage,
		"POST /dashboard/totp":         h.totp,
		"GET /dashboard":               h.home,
		"POST /dashboard/logout":       h.logout,
	}
	for p, f := range open {
		mux.Handle(p, f)
	}
	member := map[string]pageFunc{
		"GET /dashboard/overview":                 h.overview,
		"GET /dashboard/profile":                  h.profile,
		"GET /dashboard/account":                  h.account,
		"POST /dashboard/account/totp":            h.enrollTOTP,
		"GET /dashboard/payments":                 h.payments,
		"GET /dashboard/payments/export":          h.exportPayments,
		"GET /dashboard/payments/{id}":            h.paymentDetail,
		"POST /dashboard/payments/{id}/redeliver": h.redeliver,
		"GET /dashboard/batches":                  h.batches,
		"GET /dashboard/batches/result":           h.batchResult,
	}
	admin := map[string]pageFunc{
		"POST /dashboard/profile":                h.saveProfile,
		"POST /dashboard/profile/api-key":        h.rotateKey,
		"POST /dashboard/profile/webhook-secret": h.webhookSecret,
		"POST /dashboard/profile/sftp":           h.sftp,
		"GET /dashboard/payments/{id}/refund":    h.refundConfirm,
		"POST /dashboard/payments/{id}/refund":   h.refund,
		"GET /dashboard/users":                   h.users,
		"POST /dashboard/users":                  h.invite,
		"POST /dashboard/users/role":             h.changeRole,
		"POST /dashboard/users/remove":           h.removeUser,
		"GET /dashboard/audit":                   h.audit,
	}
	for p, f := range member {
		mux.Handle(p, h.signedIn(false, f))
	}
	for p, f := range admin {
		mux.Handle(p, h.signedIn(true, f))
	}
	return httpapi.Wrap(securityHeaders(mux), d.Log), nil
}

// csp: scripts and styles from the dashboard's own files only, nothing inline,
// no framing, forms post only to the dashboard; the script may fetch only
// the dashboard's own pages (the batch progress refreshes itself).
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer") // set-password links carry their token
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-store")
		// Forms are small; a larger body is refused before it is parsed.
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		next.ServeHTTP(w, r)
	})
}

// ---- sessions ----

func (h *handler) sessionCookie() string {
	if h.InsecureCookies {
		return "payreq_session"
	}
	return "__Host-payreq_session"
}

func (h *handler) loginCookie() string {
	if h.InsecureCookies {
		return "payreq_login"
	}
	return "__Host-payreq_login"
}

func (h *handler) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: !h.InsecureCookies, SameSite: http.SameSiteStrictMode})
}

// session returns the session of r's cookie, or nil.
func (h *handler) session(r *http.Request) (*Session, string) {
	c, err := r.Cookie(h.sessionCookie())
	if err != nil || len(c.Value) != 43 {
		return nil, ""
	}
	now := h.Now()
	s, err := h.Store.Session(r.Context(), HashToken(c.Value), now)
	if err != nil {
		if !h.IsNotFound(err) {
			httpapi.Logger(r.Context()).Error("read session", "error", err.Error())
		}
		return nil, ""
	}
	if now.Sub(s.LastSeen) >= IdleTimeout {
		h.endSession(r, s)
		return nil, ""
	}
	// Writing last-seen once a minute, not per request, keeps a page view
	// at one read; the idle limit is then exact to within a minute.
	if now.Sub(s.LastSeen) >= touchEvery {
		if err := h.Store.TouchSession(r.Context(), s.IDHash, now); err != nil {
			httpapi.Logger(r.Context()).Error("touch session", "error", err.Error())
		}
		s.LastSeen = now
	}
	return s, c.Value
}

// endSession deletes a session that may no longer be used (idle, revoked).
func (h *handler) endSession(r *http.Request, s *Session) {
	if err := h.Store.DeleteSession(r.Context(), s.IDHash); err != nil {
		httpapi.Logger(r.Context()).Error("delete session", "error", err.Error())
	}
}

// current checks a session against its user as stored now, on every
// request: a session ends when its user was removed, is an earlier user of
// the address (removed, invited again), or changed credentials since the
// sign-in (password set or reset, second factor changed, role changed:
// CredVersion), so those changes end every session of the user on its next
// request, not at the session's expiry.
func (h *handler) current(r *http.Request, s *Session) (bool, error) {
	u, err := h.Store.DashboardUser(r.Context(), s.MerchantID, s.Email)
	if err != nil && !h.IsNotFound(err) {
		return false, err
	}
	if err != nil || !sessionOf(s, u) {
		h.endSession(r, s)
		return false, nil
	}
	s.Role = u.Role
	return true, nil
}

// sessionOf reports whether s is a session of u as u stands now.
func sessionOf(s *Session, u *User) bool {
	return u.MerchantID == s.MerchantID && s.UserSince.Equal(u.CreatedAt) && s.CredVersion == u.CredVersion
}

// startSession issues a new session id, replacing the one r carried.
func (h *handler) startSession(w http.ResponseWriter, r *http.Request, u *User, pendingTOTP bool) (*Session, error) {
	if old, _ := r.Cookie(h.sessionCookie()); old != nil && old.Value != "" {
		if err := h.Store.DeleteSession(r.Context(), HashToken(old.Value)); err != nil {
			return nil, err
		}
	}
	id := NewToken()
	now := h.Now()
	ttl := SessionTTL
	if pendingTOTP {
		ttl = pendingTOTPTTL
	}
	s := &Session{IDHash: HashToken(id), Email: u.Email, MerchantID: u.MerchantID, Role: u.Role, CSRF: NewToken(),
		TOTPPending: pendingTOTP, UserSince: u.CreatedAt, CredVersion: u.CredVersion, CreatedAt: now, LastSeen: now, ExpiresAt: now.Add(ttl)}
	if err := h.Store.PutSession(r.Context(), s); err != nil {
		return nil, err
	}
	h.setCookie(w, h.sessionCookie(), id, int(ttl.Seconds()))
	return s, nil
}

type pageFunc func(w http.ResponseWriter, r *http.Request, s *Session) error

// signedIn admits a full session (the admin role when admin), checks the
// CSRF token of a POST, and renders the handler's error.
func (h *handler) signedIn(admin bool, f pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := h.session(r)
		if s != nil && !s.TOTPPending {
			ok, err := h.current(r, s)
			if err != nil {
				h.fail(w, r, nil, err)
				return
			}
			if !ok {
				s = nil
			}
		}
		if s == nil || s.TOTPPending {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
				return
			}
			h.fail(w, r, nil, errStatus(http.StatusUnauthorized, "Your session has ended. Sign in again."))
			return
		}
		if r.Method == http.MethodPost && !validCSRF(s.CSRF, r.PostFormValue("csrf")) {
			h.fail(w, r, s, errStatus(http.StatusForbidden, "This form has expired or did not come from the dashboard. Reload the page and try again."))
			return
		}
		if admin && s.Role != RoleAdmin {
			h.fail(w, r, s, errStatus(http.StatusForbidden, "Only the merchant's administrators can do this."))
			return
		}
		r = httpapi.AddLogAttrs(r, slog.String("merchant_id", s.MerchantID))
		if err := f(w, r, s); err != nil {
			h.fail(w, r, s, err)
		}
	})
}

func validCSRF(want, got string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// statusError is an error shown to the user with its status.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func errStatus(status int, msg string) error { return &statusError{status, msg} }

var errNotFound = errStatus(http.StatusNotFound, "Not found.")

func (h *handler) fail(w http.ResponseWriter, r *http.Request, s *Session, err error) {
	var se *statusError
	if !errors.As(err, &se) {
		httpapi.Logger(r.Context()).Error("dashboard error", "error", err.Error())
		se = &statusError{http.StatusInternalServerError, "Something went wrong. Try again later."}
	}
	h.render(w, r, se.status, "error", s, map[string]any{"Message": se.msg})
}

// render writes page name with data; s (may be nil) fills the navigation and
// CSRF token.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, s *Session, data map[string]any) {
	v, ok := views[name]
	if !ok {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	if data == nil {
		data = map[string]any{}
	}
	data["Session"] = s
	if s != nil && !s.TOTPPending {
		data["CSRF"] = s.CSRF
		data["Admin"] = s.Role == RoleAdmin
	}
	data["Page"] = name
	data["Locale"] = ViewerLocale(r.Header.Get("Accept-Language"))
	var p pw
	layout(&p, v, data)
	b := &p.b
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Add("Vary", "Accept-Language")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

func (h *handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ext := path.Ext(name)
	if strings.Contains(name, "/") || (ext != ".css" && ext != ".js") {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(h.Files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(ext))
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

func (h *handler) home(w http.ResponseWriter, r *http.Request) {
	if s, _ := h.session(r); s != nil && !s.TOTPPending {
		http.Redirect(w, r, homePath, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

// auditLog records a change. The change is already made when this runs, so
// a failure to record it is logged loudly rather than shown as a failure.
func (h *handler) auditLog(ctx context.Context, s *Session, action, detail string) {
	if err := Record(ctx, h.Store, s.MerchantID, s.Email, action, detail, h.Now()); err != nil {
		httpapi.Logger(ctx).Error("audit log write failed", "action", action, "error", err.Error())
	}
}

// AuditStore is what Record needs.
type AuditStore interface {
	AppendAudit(ctx context.Context, e AuditEntry) error
}

// Record appends an audit entry (payctl uses it too).
func Record(ctx context.Context, st AuditStore, merchantID, actor, action, detail string, now time.Time) error {
	return st.AppendAudit(ctx, AuditEntry{MerchantID: merchantID, At: now.UTC(), Actor: actor, Action: action, Detail: detail})
}
