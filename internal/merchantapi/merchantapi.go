// Package merchantapi is the merchant-server API: payment requests and their
// status. It is a plain http.Handler; functions/merchantapi wraps it for
// Lambda and the local stack mounts the very same handler.
//
// Not to be confused with internal/merchant, the merchant account itself.
package merchantapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paylink"
	"github.com/payreq/payreq/internal/payment"
)

// Store is the persistence the API needs.
type Store interface {
	CreatePaymentRequest(ctx context.Context, r *payment.Request) error
	PaymentRequest(ctx context.Context, id int64) (*payment.Request, error)
	CancelPaymentRequest(ctx context.Context, id int64, merchantID string, now time.Time) (*payment.Request, error)
}

// Deps are the handler's collaborators.
type Deps struct {
	Store  Store
	Auth   *apikey.Authenticator
	Tokens *checkouttoken.Issuer
	// Links signs the slug of each request's payment link; without it the
	// link field is empty (never a link built from the bare id).
	Links *paylink.Signer
	// Guard wraps every route: API-key authentication first, then rate
	// limiting and idempotency. Defaults to Auth.Require alone.
	Guard func(http.Handler) http.Handler
	// CheckAmount refuses an amount or unit the acquirer cannot take
	// (paycore.Service.CheckAmount: no connector the merchant's routing can
	// reach takes it: 400 026 or 020); nil takes every
	// amount the service accepts. Sandbox merchants are not asked.
	CheckAmount func(m *merchant.Merchant, amount decimal.Decimal, unit string) error
	// Transactions serves GET /transactions/{id} (paymentsapi.TransactionLookup).
	Transactions  httpapi.HandlerFunc
	Log           *slog.Logger
	PublicBaseURL string // empty: https://<request host>
	AllowHTTPURLs bool   // sandbox and local stack accept http:// merchant URLs
	Now           func() time.Time
}

// Routes are the method patterns this handler serves; template.yaml must
// declare exactly these for MerchantApiFunction (a test checks both ways).
func Routes() []string {
	return []string{
		"POST /payment-requests",
		"GET /payment-requests/status/{id}",
		"POST /payment-requests/{id}/checkout-session",
		"POST /payment-requests/{id}/cancel",
		"GET /transactions/{id}",
	}
}

type api struct{ Deps }

// New returns the merchant API handler.
func New(d Deps) http.Handler {
	if d.Now == nil {
		d.Now = time.Now
	}
	a := &api{d}
	if d.Guard == nil {
		d.Guard = d.Auth.Require
	}
	handlers := map[string]httpapi.HandlerFunc{
		"POST /payment-requests":                       a.create,
		"GET /payment-requests/status/{id}":            a.status,
		"POST /payment-requests/{id}/checkout-session": a.checkoutSession,
		"POST /payment-requests/{id}/cancel":           a.cancel,
		"GET /transactions/{id}":                       d.Transactions,
	}
	if d.Transactions == nil {
		handlers["GET /transactions/{id}"] = func(http.ResponseWriter, *http.Request) error {
			return errkind.NotFoundErr("Transaction lookups are not configured.")
		}
	}
	mux := http.NewServeMux()
	for _, route := range Routes() {
		mux.Handle(route, d.Guard(handlers[route]))
	}
	return httpapi.Wrap(mux, d.Log)
}

func (a *api) create(w http.ResponseWriter, r *http.Request) error {
	m := apikey.MerchantFrom(r.Context())
	var in payment.CreateInput
	if err := httpapi.DecodeJSON(w, r, &in); err != nil {
		return err
	}
	req, errs := in.Validate(payment.CreateRules{AllowHTTP: a.AllowHTTPURLs || m.Sandbox, DefaultRecipient: m.Name})
	if len(errs) > 0 {
		return errkind.Validation(errs)
	}
	if a.CheckAmount != nil && !m.Sandbox {
		if err := a.CheckAmount(m, req.Amount, req.Unit); err != nil {
			return err
		}
	}
	now := a.Now().UTC()
	req.MerchantID, req.CreatedAt, req.UpdatedAt = m.ID, now, now
	// Ids are random; a collision is astronomically rare and the conditional
	// put turns it into a retry, never an overwrite. With an Idempotency-Key
	// the first id is derived from the key's record: a retry after a crash
	// finds the request the first try created and answers with it.
	seed := ids.SeedFrom(r.Context())
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		req.ID = ids.New(now)
		if seed != nil && attempt == 0 {
			req.ID = ids.Derive(seed, "payment-request")
		}
		err = a.Store.CreatePaymentRequest(r.Context(), &req)
		if errkind.Is(err, errkind.Exists) && seed != nil && attempt == 0 {
			cur, gerr := a.Store.PaymentRequest(r.Context(), req.ID)
			if gerr != nil {
				return gerr
			}
			if cur.MerchantID == m.ID && cur.CreatedAt.After(now.Add(-idempotency.DefaultTTL)) {
				req, err = *cur, nil // created by an earlier try with this key
				break
			}
		}
		if !errkind.Is(err, errkind.Exists) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create payment request for merchant %s: %w", m.ID, err)
	}
	httpapi.AddLogAttrs(r, slog.Int64("payment_request_id", req.ID))
	w.Header().Set("Location", "/payment-requests/status/"+strconv.FormatInt(req.ID, 10))
	httpapi.WriteJSON(w, http.StatusCreated, a.view(&req, r))
	return nil
}

// ownRequest loads the request named by the path for the calling merchant.
// Another merchant's request is indistinguishable from a missing one.
func (a *api) ownRequest(r *http.Request) (*payment.Request, error) {
	m := apikey.MerchantFrom(r.Context())
	id, err := ParseID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	req, err := a.Store.PaymentRequest(r.Context(), id)
	if errkind.Is(err, errkind.NotFound) || (err == nil && req.MerchantID != m.ID) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load payment request %d: %w", id, err)
	}
	return req, nil
}

func notFound(id int64) error {
	return errkind.NotFoundErr(fmt.Sprintf("Payment request %d does not exist.", id))
}

func (a *api) status(w http.ResponseWriter, r *http.Request) error {
	req, err := a.ownRequest(r)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, a.view(req, r))
	return nil
}

// CheckoutSession is the response of POST /payment-requests/{id}/checkout-session.
type CheckoutSession struct {
	Token      string    `json:"token"`
	ExpiresAt  time.Time `json:"expiresAt"`
	ExpiresIn  int       `json:"expiresIn"`
	PaymentURL string    `json:"paymentUrl"`
}

func (a *api) checkoutSession(w http.ResponseWriter, r *http.Request) error {
	if err := allowEmptyBody(w, r); err != nil {
		return err
	}
	req, err := a.ownRequest(r)
	if err != nil {
		return err
	}
	if req.Status != payment.RequestUnpaid {
		return notUnpaid(req)
	}
	token, exp := a.Tokens.Mint(req.ID, req.MerchantID)
	q := url.Values{"requestId": {strconv.FormatInt(req.ID, 10)}, "token": {token}}
	httpapi.WriteJSON(w, http.StatusCreated, CheckoutSession{
		Token: token, ExpiresAt: exp.UTC(), ExpiresIn: int(checkouttoken.TTL.Seconds()),
		PaymentURL: a.baseURL(r) + "/checkout?" + q.Encode(),
	})
	return nil
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) error {
	if err := allowEmptyBody(w, r); err != nil {
		return err
	}
	m := apikey.MerchantFrom(r.Context())
	id, err := ParseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	req, err := a.Store.CancelPaymentRequest(r.Context(), id, m.ID, a.Now())
	switch {
	case errkind.Is(err, errkind.NotFound):
		return notFound(id)
	case errkind.Is(err, errkind.Conflict) && req != nil && req.Status == payment.RequestCancelled:
		// Cancelling is idempotent: a retried cancel (its first answer lost)
		// gets the cancelled request again.
	case errkind.Is(err, errkind.Conflict):
		return notUnpaid(req)
	case err != nil:
		return fmt.Errorf("cancel payment request %d: %w", id, err)
	}
	httpapi.WriteJSON(w, http.StatusOK, a.view(req, r))
	return nil
}

func notUnpaid(req *payment.Request) error {
	if req.Status == payment.RequestCancelled {
		return errkind.ConflictErr(fmt.Sprintf("Payment request %d is cancelled.", req.ID), codes.TransactionCancelled)
	}
	return errkind.ConflictErr(fmt.Sprintf("Payment request %d is already %s.", req.ID, req.Status), "")
}

// allowEmptyBody accepts no body (with or without a JSON Content-Type) or a
// JSON object (these POSTs take no parameters today; an empty object keeps
// clients future-proof).
func allowEmptyBody(w http.ResponseWriter, r *http.Request) error {
	var empty struct{}
	return httpapi.DecodeOptionalJSON(w, r, &empty)
}

// ParseID reads a positive int64 path id or returns a 400 problem.
func ParseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != s {
		return 0, errkind.BadInput("The id must be a positive 64-bit integer, got "+strconv.Quote(s)+".", "")
	}
	return id, nil
}

// view renders req with its signed payment link (`/pay/{slug}`, never the id).
func (a *api) view(req *payment.Request, r *http.Request) payment.View {
	v := payment.ViewOf(req, a.baseURL(r))
	v.Link = ""
	if a.Links != nil {
		v.Link = a.Links.URL(a.baseURL(r), req.ID)
	}
	return v
}

func (a *api) baseURL(r *http.Request) string {
	if a.PublicBaseURL != "" {
		return a.PublicBaseURL
	}
	return "https://" + r.Host
}
