// Package dashboard is the merchant dashboard at /dashboard: server-rendered
// HTML pages for the people who work for merchants (profile, keys,
// payments, batches, members, audit log, own acquirer accounts). It has no
// AWS imports: storage and the operations that reach other systems
// (notification queue, refunds, batch results, acquirer checks) come in as
// the interfaces below, implemented in internal/dynamo and
// internal/acquireraccount and wired in internal/wire/dashboardwire.
//
// Rules the handler keeps:
//   - A person is one identity per e-mail address (one password, one second
//     factor) with a membership, and a role, at each merchant they work for.
//     Sign-in asks for the address and password only; the merchant is
//     chosen afterwards (a picker, skipped when there is one) and changed
//     with the header's switcher, without signing in again.
//   - The session belongs to the identity; the merchant of a page is in its
//     address (/dashboard/m/{merchant}/...), so two tabs hold two merchants.
//     Every such request checks the person's membership of that merchant
//     and its role, read with the identity on every request: a removed
//     membership or a changed role acts on the next request. Another
//     merchant's pages, or a merchant the person does not belong to, are 404.
//   - Every page but sign-in, set-password and assets needs a session. The
//     session id is 256 random bits in a cookie (HttpOnly, SameSite=Strict,
//     Secure with the __Host- prefix; only a local stack on plain http drops
//     Secure and the prefix); the table keeps only its hash, with an expiry.
//   - A new session id is issued at every sign-in and after the second factor;
//     the one the browser had is deleted (no session fixation).
//   - Every POST carries a CSRF token derived from the session's secret and
//     bound to the merchant of the page (the sign-in form a double-submit
//     cookie; set-password is authorised by its one-time link token); a
//     mismatch is 403 and changes nothing.
//   - Every object is read through the merchant of the address, after the
//     membership check: another merchant's payment request, transaction or
//     file is 404, as in the API.
//   - Changes (settings, keys, members, refunds, acquirer accounts) need the
//     admin role at that merchant and are written to its audit log with who
//     and when (an acquirer account's change in the same transaction as the
//     change itself, by acquireraccount.Service).
//   - Sign-in attempts (password, TOTP) are counted per address before the
//     secret is checked; failures lock the address out with a doubling
//     back-off.
//   - A change of password or second factor ends the person's sessions.
package dashboard

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/dashuser"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/lockout"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// Store is the dashboard's persistence (internal/dynamo.Store).
type Store interface {
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
	UpdateMerchant(ctx context.Context, m *merchant.Merchant) error
	// PutPreviousAPIKey makes a rotated-out key findable by its hash for
	// its overlap (the merchant record decides whether it still works).
	PutPreviousAPIKey(ctx context.Context, merchantID, hash string, until time.Time) error

	// Identity reads a person whole: the identity (nil: none yet) and every
	// membership, with one consistent read.
	Identity(ctx context.Context, email string) (*dashuser.Identity, []*dashuser.Membership, error)
	// CreateIdentity stores a new identity (a conflict when it exists).
	CreateIdentity(ctx context.Context, id *dashuser.Identity) error
	// UpdateIdentity writes id if its version is unchanged (else a conflict).
	UpdateIdentity(ctx context.Context, id *dashuser.Identity) error
	// Membership reads a person's membership of a merchant.
	Membership(ctx context.Context, email, merchantID string) (*dashuser.Membership, error)
	// Members lists a merchant's memberships.
	Members(ctx context.Context, merchantID string) ([]*dashuser.Membership, error)
	// SaveMemberships writes id (nil: untouched) and ms at once: each of
	// Version 0 is created, any other written only at its version (else a
	// conflict, and nothing is written).
	SaveMemberships(ctx context.Context, id *dashuser.Identity, ms ...*dashuser.Membership) error
	// DeleteMembership removes m if its version is unchanged (else a conflict).
	DeleteMembership(ctx context.Context, m *dashuser.Membership) error
	// LockUsers takes the merchant's member-change lease (a conflict while
	// another owner holds it); UnlockUsers releases it.
	LockUsers(ctx context.Context, merchantID, owner string, until, now time.Time) error
	UnlockUsers(ctx context.Context, merchantID, owner string) error

	PutSession(ctx context.Context, s *dashuser.Session) error
	Session(ctx context.Context, idHash string, now time.Time) (*dashuser.Session, error)
	DeleteSession(ctx context.Context, idHash string) error
	// TouchSession sets a live session's last-seen time (never recreates one).
	TouchSession(ctx context.Context, idHash string, at time.Time) error
	// SetSessionMerchant records the merchant a live session last chose.
	SetSessionMerchant(ctx context.Context, idHash, merchantID string) error

	PutInvite(ctx context.Context, inv *dashuser.Invite) error
	Invite(ctx context.Context, tokenHash string, now time.Time) (*dashuser.Invite, error)
	TakeInvite(ctx context.Context, tokenHash string, now time.Time) (*dashuser.Invite, error)

	// The sign-in attempt counters (internal/lockout).
	lockout.Store

	AppendAudit(ctx context.Context, e dashuser.AuditEntry) error
	AuditEntries(ctx context.Context, merchantID string, limit int32) ([]dashuser.AuditEntry, error)

	PaymentRequestsOf(ctx context.Context, q payment.Query) ([]*payment.Request, string, error)
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
	// service (the API's refund path); it returns the refund status. A
	// refusal is an error of a kind (errkind), shown with the form.
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
	// Files holds the assets (*.css, *.js): web/dashboard.
	Files fs.FS
	Log   *slog.Logger
	// InsecureCookies drops Secure and the __Host- prefix: only for a local
	// stack served over plain http, where a browser would not send them back.
	InsecureCookies bool
	// Mailer e-mails invitations' links to the invitees; nil: the
	// dashboard invites nobody (503: payctl still does).
	Mailer Mailer
	// PublicBaseURL starts set-password links; empty: the request's host.
	PublicBaseURL string
	// SFTPAddress is shown on the profile page (host:port); empty: not configured.
	SFTPAddress string
	// Connectors are the merchant's own acquirer accounts
	// (acquireraccount.Service); nil: the Connectors page says it is not
	// available.
	Connectors Connectors
	// NewWebhookSecret mints a webhook secret (internal/webhook).
	NewWebhookSecret func() (string, error)
	// AttemptKeys names the sign-in attempt counters by a keyed hash of
	// the address: lockout.NewKeyer of the seal key. Required.
	// PublicBaseURL's host also names the service in authenticator apps.
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
	InviteTTL      = 24 * time.Hour   // a set-password link's lifetime
	enrolTTL       = 15 * time.Minute // a TOTP enrolment form's lifetime (at most its session's)
	MinPasswordLen = 12
	maxFormBytes   = 64 << 10
)

// Route patterns (template.yaml declares the same; a test ties them). The
// merchant's pages are under /dashboard/m/{merchant}; the rest belong to
// the person (sign-in, their merchants, their account).
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
	"GET /dashboard/merchants",
	"POST /dashboard/merchants/switch",
	"POST /dashboard/merchants/accept",
	"POST /dashboard/merchants/link",
	"GET /dashboard/account",
	"POST /dashboard/account/totp",
	"GET /dashboard/m/{merchant}/overview",
	"GET /dashboard/m/{merchant}/profile",
	"POST /dashboard/m/{merchant}/profile",
	"POST /dashboard/m/{merchant}/profile/api-key",
	"POST /dashboard/m/{merchant}/profile/webhook-secret",
	"POST /dashboard/m/{merchant}/profile/sftp",
	"GET /dashboard/m/{merchant}/payments",
	"GET /dashboard/m/{merchant}/payments/export",
	"GET /dashboard/m/{merchant}/payments/{id}",
	"POST /dashboard/m/{merchant}/payments/{id}/redeliver",
	"GET /dashboard/m/{merchant}/payments/{id}/refund",
	"POST /dashboard/m/{merchant}/payments/{id}/refund",
	"GET /dashboard/m/{merchant}/batches",
	"GET /dashboard/m/{merchant}/batches/result",
	"GET /dashboard/m/{merchant}/users",
	"POST /dashboard/m/{merchant}/users",
	"POST /dashboard/m/{merchant}/users/role",
	"POST /dashboard/m/{merchant}/users/remove",
	"GET /dashboard/m/{merchant}/audit",
	"GET /dashboard/m/{merchant}/connectors",
	"POST /dashboard/m/{merchant}/connectors",
	"POST /dashboard/m/{merchant}/connectors/test",
	"POST /dashboard/m/{merchant}/connectors/status",
}

// Routes are the method patterns the handler serves.
func Routes() []string { return append([]string(nil), routes...) }

// MerchantPath is the address of a merchant's page (rest starts with "/"):
// /dashboard/m/<merchantId><rest>.
func MerchantPath(merchantID, rest string) string {
	return "/dashboard/m/" + url.PathEscape(merchantID) + rest
}

// pickerPath lists the person's merchants.
const pickerPath = "/dashboard/merchants"

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
	}
	for p, f := range open {
		mux.Handle(p, f)
	}
	personal := map[string]personFunc{
		"POST /dashboard/logout":           h.logout,
		"GET /dashboard/merchants":         h.picker,
		"POST /dashboard/merchants/switch": h.switchMerchant,
		"POST /dashboard/merchants/accept": h.acceptInvitation,
		"POST /dashboard/merchants/link":   h.linkMembership,
		"GET /dashboard/account":           h.account,
		"POST /dashboard/account/totp":     h.enrollTOTP,
	}
	for p, f := range personal {
		mux.Handle(p, h.signedInPerson(f))
	}
	member := map[string]pageFunc{
		"GET /overview":                 h.overview,
		"GET /profile":                  h.profile,
		"GET /payments":                 h.payments,
		"GET /payments/export":          h.exportPayments,
		"GET /payments/{id}":            h.paymentDetail,
		"POST /payments/{id}/redeliver": h.redeliver,
		"GET /batches":                  h.batches,
		"GET /batches/result":           h.batchResult,
		"GET /connectors":               h.connectors,
	}
	admin := map[string]pageFunc{
		"POST /profile":                h.saveProfile,
		"POST /profile/api-key":        h.rotateKey,
		"POST /profile/webhook-secret": h.webhookSecret,
		"POST /profile/sftp":           h.sftp,
		"GET /payments/{id}/refund":    h.refundConfirm,
		"POST /payments/{id}/refund":   h.refund,
		"GET /users":                   h.users,
		"POST /users":                  h.invite,
		"POST /users/role":             h.changeRole,
		"POST /users/remove":           h.removeUser,
		"GET /audit":                   h.audit,
		"POST /connectors":             h.addConnector,
		"POST /connectors/test":        h.testConnector,
		"POST /connectors/status":      h.connectorStatus,
	}
	merchantRoute := func(p string) string {
		method, rest, _ := strings.Cut(p, " ")
		return method + " /dashboard/m/{merchant}" + rest
	}
	for p, f := range member {
		mux.Handle(merchantRoute(p), h.signedIn(false, f))
	}
	for p, f := range admin {
		mux.Handle(merchantRoute(p), h.signedIn(true, f))
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
func (h *handler) session(r *http.Request) (*dashuser.Session, string) {
	c, err := r.Cookie(h.sessionCookie())
	if err != nil || len(c.Value) != 43 {
		return nil, ""
	}
	now := h.Now()
	s, err := h.Store.Session(r.Context(), dashuser.HashToken(c.Value), now)
	if err != nil {
		if !errkind.Is(err, errkind.NotFound) {
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
func (h *handler) endSession(r *http.Request, s *dashuser.Session) {
	if err := h.Store.DeleteSession(r.Context(), s.IDHash); err != nil {
		httpapi.Logger(r.Context()).Error("delete session", "error", err.Error())
	}
}

// person reads the session's identity as stored now, on every request,
// with its memberships: a session ends when its identity is not the one it
// signed in (none, or created again) or changed credentials since
// (password set or reset, second factor changed: CredVersion), so those
// changes end every session of the person on its next request, not at the
// session's expiry.
func (h *handler) person(r *http.Request, s *dashuser.Session) (*dashuser.Identity, []*dashuser.Membership, bool, error) {
	id, ms, err := h.Store.Identity(r.Context(), s.Email)
	if err != nil {
		return nil, nil, false, err
	}
	if id == nil || !sessionOf(s, id) {
		h.endSession(r, s)
		return nil, nil, false, nil
	}
	return id, ms, true, nil
}

// sessionOf reports whether s is a session of id as id stands now.
func sessionOf(s *dashuser.Session, id *dashuser.Identity) bool {
	return id.Email == s.Email && s.UserSince.Equal(id.CreatedAt) && s.CredVersion == id.CredVersion
}

// membershipOf finds the person's usable membership of merchantID.
func membershipOf(ms []*dashuser.Membership, merchantID string) *dashuser.Membership {
	for _, m := range ms {
		if m.MerchantID == merchantID && m.Usable() {
			return m
		}
	}
	return nil
}

// usable lists the memberships that open a merchant's pages, by name.
func usable(ms []*dashuser.Membership) []*dashuser.Membership {
	var out []*dashuser.Membership
	for _, m := range ms {
		if m.Usable() {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *dashuser.Membership) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.MerchantName), strings.ToLower(b.MerchantName)), cmp.Compare(a.MerchantID, b.MerchantID))
	})
	return out
}

// landing is where a signed-in person goes: the merchant last chosen (or
// their only one) when it is usable and nothing awaits their answer,
// else their merchants.
func (h *handler) landing(s *dashuser.Session, ms []*dashuser.Membership) string {
	now := h.Now()
	waiting := false
	for _, m := range ms {
		waiting = waiting || m.Pending(now) || m.State == dashuser.StateUnproven
	}
	if m := membershipOf(ms, s.MerchantID); m != nil && !waiting {
		return MerchantPath(m.MerchantID, "/overview")
	}
	if u := usable(ms); len(u) == 1 && !waiting {
		return MerchantPath(u[0].MerchantID, "/overview")
	}
	return pickerPath
}

// startSession issues a new session id for id's person, replacing the one
// r carried.
func (h *handler) startSession(w http.ResponseWriter, r *http.Request, id *dashuser.Identity, ms []*dashuser.Membership, pendingTOTP bool) (*dashuser.Session, error) {
	if old, _ := r.Cookie(h.sessionCookie()); old != nil && old.Value != "" {
		if err := h.Store.DeleteSession(r.Context(), dashuser.HashToken(old.Value)); err != nil {
			return nil, err
		}
	}
	token := dashuser.NewToken()
	now := h.Now()
	ttl := SessionTTL
	if pendingTOTP {
		ttl = pendingTOTPTTL
	}
	s := &dashuser.Session{IDHash: dashuser.HashToken(token), Email: id.Email, CSRF: dashuser.NewToken(), TOTPPending: pendingTOTP,
		UserSince: id.CreatedAt, CredVersion: id.CredVersion, CreatedAt: now, LastSeen: now, ExpiresAt: now.Add(ttl)}
	if u := usable(ms); len(u) == 1 {
		s.MerchantID = u[0].MerchantID
	}
	if err := h.Store.PutSession(r.Context(), s); err != nil {
		return nil, err
	}
	h.setCookie(w, h.sessionCookie(), token, int(ttl.Seconds()))
	return s, nil
}

type pageFunc func(w http.ResponseWriter, r *http.Request, s *dashuser.Session) error

// personFunc serves a page of the person (not of one merchant): s has no
// merchant, and its CSRF token is the person's.
type personFunc func(w http.ResponseWriter, r *http.Request, s *dashuser.Session, id *dashuser.Identity, ms []*dashuser.Membership) error

// csrfFor derives the CSRF token of the session's forms for merchantID
// ("" for the person's own forms): an HMAC of the session's secret, so a
// token works only in its session, and a merchant page's token only for
// that merchant's actions (and the person's own: signing out, switching).
func csrfFor(secret, merchantID string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("payreq/dashboard-csrf/v1\x00" + merchantID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// nav is what a signed-in page's header shows: the person's merchants.
type nav struct {
	merchants []*dashuser.Membership
}

type navKey struct{}

func withNav(r *http.Request, ms []*dashuser.Membership) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), navKey{}, &nav{merchants: usable(ms)}))
}

// fullSession is the request's session once its second factor is done and
// its person still usable, with the person and their memberships; nil
// (and no error) otherwise.
func (h *handler) fullSession(r *http.Request) (*dashuser.Session, *dashuser.Identity, []*dashuser.Membership, error) {
	s, _ := h.session(r)
	if s == nil || s.TOTPPending {
		return nil, nil, nil, nil
	}
	id, ms, ok, err := h.person(r, s)
	if err != nil || !ok {
		return nil, nil, nil, err
	}
	return s, id, ms, nil
}

// sessionEnded sends a GET to the sign-in page and refuses anything else.
func (h *handler) sessionEnded(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
		return
	}
	h.fail(w, r, nil, refuse(errkind.Unauthorized, "Your session has ended. Sign in again."))
}

// signedIn admits a full session of a person with a usable membership of
// the address's merchant (and the admin role there when admin), checks the
// CSRF token of a POST against that merchant's, and renders the handler's
// error. The handler's session names that merchant and the person's role.
func (h *handler) signedIn(admin bool, f pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _, ms, err := h.fullSession(r)
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if s == nil {
			h.sessionEnded(w, r)
			return
		}
		r = withNav(r, ms)
		m := membershipOf(ms, r.PathValue("merchant"))
		if m == nil {
			// Not a member (any more), or no such merchant: the same answer.
			h.fail(w, r, personal(s), errNotFound)
			return
		}
		view := *s
		view.MerchantID, view.Role, view.CSRF = m.MerchantID, m.Role, csrfFor(s.CSRF, m.MerchantID)
		if r.Method == http.MethodPost && !validCSRF(view.CSRF, r.PostFormValue("csrf")) {
			h.fail(w, r, &view, refuse(errkind.Forbidden, "This form has expired or did not come from the dashboard. Reload the page and try again."))
			return
		}
		if admin && view.Role != dashuser.RoleAdmin {
			h.fail(w, r, &view, refuse(errkind.Forbidden, "Only the merchant's administrators can do this."))
			return
		}
		r = httpapi.AddLogAttrs(r, slog.String("merchant_id", view.MerchantID))
		if err := f(w, r, &view); err != nil {
			h.fail(w, r, &view, err)
		}
	})
}

// personal is the view of s for the person's own pages: no merchant, the
// person's CSRF token.
func personal(s *dashuser.Session) *dashuser.Session {
	v := *s
	v.MerchantID, v.Role, v.CSRF = "", "", csrfFor(s.CSRF, "")
	return &v
}

// signedInPerson admits a full session to the person's own pages. A POST
// carries the person's token, or the token of a merchant page of one of
// their usable memberships (the header's forms, on a merchant's page).
func (h *handler) signedInPerson(f personFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, id, ms, err := h.fullSession(r)
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if s == nil {
			if r.URL.Path == "/dashboard/logout" {
				h.setCookie(w, h.sessionCookie(), "", -1)
				http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
				return
			}
			h.sessionEnded(w, r)
			return
		}
		r = withNav(r, ms)
		view := personal(s)
		if r.Method == http.MethodPost && !h.personCSRF(s, ms, r.PostFormValue("csrf")) {
			h.fail(w, r, view, refuse(errkind.Forbidden, "This form has expired or did not come from the dashboard. Reload the page and try again."))
			return
		}
		if err := f(w, r, view, id, ms); err != nil {
			h.fail(w, r, view, err)
		}
	})
}

// personCSRF accepts the person's token or a merchant page's token of one
// of their usable memberships.
func (h *handler) personCSRF(s *dashuser.Session, ms []*dashuser.Membership, got string) bool {
	if validCSRF(csrfFor(s.CSRF, ""), got) {
		return true
	}
	for _, m := range usable(ms) {
		if validCSRF(csrfFor(s.CSRF, m.MerchantID), got) {
			return true
		}
	}
	return false
}

func validCSRF(want, got string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// pageError is an error the dashboard shows as it is: its kind gives the
// status, through the edge's one table (httpapi.Status), and its detail the
// message. Any other error is a failure of the service: logged, and shown
// as a 500 that says nothing of it.
type pageError struct{ e *errkind.Error }

func (p *pageError) Error() string { return p.e.Detail }
func (p *pageError) Unwrap() error { return p.e }
func (p *pageError) status() int   { return httpapi.Status(p.e) }

// refuse is an error of kind k the page shows with msg.
func refuse(k errkind.Kind, msg string) error { return &pageError{errkind.New(k, msg, "")} }

var errNotFound = refuse(errkind.NotFound, "Not found.")

func (h *handler) fail(w http.ResponseWriter, r *http.Request, s *dashuser.Session, err error) {
	var se *pageError
	if !errors.As(err, &se) {
		httpapi.Logger(r.Context()).Error("dashboard error", "error", err.Error())
		se = &pageError{errkind.New(errkind.Unknown, "Something went wrong. Try again later.", "")}
	}
	h.render(w, r, se.status(), "error", s, map[string]any{"Message": se.e.Detail})
}

// render writes page name with data; s (may be nil) fills the navigation and
// CSRF token: a merchant's pages (s.MerchantID set) get its navigation and
// its token, the person's own pages their token.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, s *dashuser.Session, data map[string]any) {
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
		data["Admin"] = s.Role == dashuser.RoleAdmin
		if s.MerchantID != "" {
			data["Base"] = MerchantPath(s.MerchantID, "")
		}
		if n, ok := r.Context().Value(navKey{}).(*nav); ok {
			data["Merchants"] = n.merchants
		}
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

// home sends a signed-in person to their landing page, anyone else to
// sign-in.
func (h *handler) home(w http.ResponseWriter, r *http.Request) {
	if s, _ := h.session(r); s != nil && !s.TOTPPending {
		_, ms, ok, err := h.person(r, s)
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if ok {
			http.Redirect(w, r, h.landing(s, ms), http.StatusSeeOther)
			return
		}
	}
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
}

// auditLog records a change. The change is already made when this runs, so
// a failure to record it is logged loudly rather than shown as a failure.
func (h *handler) auditLog(ctx context.Context, s *dashuser.Session, action, detail string) {
	if err := Record(ctx, h.Store, s.MerchantID, s.Email, action, detail, h.Now()); err != nil {
		httpapi.Logger(ctx).Error("audit log write failed", "action", action, "error", err.Error())
	}
}

// AuditStore is what Record needs.
type AuditStore interface {
	AppendAudit(ctx context.Context, e dashuser.AuditEntry) error
}

// Record appends an audit entry (payctl uses it too).
func Record(ctx context.Context, st AuditStore, merchantID, actor, action, detail string, now time.Time) error {
	return st.AppendAudit(ctx, dashuser.AuditEntry{MerchantID: merchantID, At: now.UTC(), Actor: actor, Action: action, Detail: detail})
}
