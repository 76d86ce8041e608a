// Package checkout is the `checkout` function: the hosted payment page, its
// API (authenticated by the checkout session token, never the API key), the
// PayCheckout script, and payment links.
package checkout

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/checkouttoken"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/paylink"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/ratelimit"
	"github.com/payreq/payreq/web"
)

// Store is the persistence the checkout reads.
type Store interface {
	PaymentRequest(ctx context.Context, id int64) (*payment.Request, error)
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
}

// Payer runs payment attempts (*paycore.Service).
type Payer interface {
	Pay(ctx context.Context, m *merchant.Merchant, requestID int64, a paycore.Attempt) (paycore.Result, error)
}

// Challenges completes sandbox 3-D Secure challenges through the provider
// callback endpoint (the result must arrive through /callbacks/3ds). The
// implementation knows its target from configuration only, never from the
// request being served (its Host header is the caller's to choose).
type Challenges interface {
	CompleteChallenge(ctx context.Context, requestID, transactionID int64, approve bool) error
}

// AttemptLimiter counts payment attempts per request (card-testing guard).
type AttemptLimiter interface {
	TakeRateLimit(ctx context.Context, client string, window int64, limit int, expiresAt time.Time) (int, error)
}

// Deps are the handler's collaborators.
type Deps struct {
	Store      Store
	Payments   Payer
	Challenges Challenges
	Limiter    AttemptLimiter
	Tokens     *checkouttoken.Issuer
	// Links opens the slugs of payment links (/pay/{slug}).
	Links *paylink.Signer
	// Public rate-limits the unauthenticated routes (payment links and the
	// hosted page's API) per client IP and per link or token; nil means
	// ratelimit.NewPublic(Limiter).
	Public        *ratelimit.Public
	Log           *slog.Logger
	PublicBaseURL string
	Sandbox       bool
	Now           func() time.Time
	// MaxAttempts bounds payment attempts per request per 15 minutes.
	MaxAttempts int
	// StripePublishableKey (pk_…) is what Google Pay tokenizes for on a
	// production stage (the `stripe` gateway) and what the Apple Pay button's
	// Stripe.js runs with. Without one, production shows no wallet buttons:
	// the API still takes wallet tokens.
	StripePublishableKey string
	// StripeAccountCountry is the Stripe account's two-letter country, which
	// Stripe.js's payment request (Apple Pay) requires; "US" when empty.
	StripeAccountCountry string
	// StripeMinorUnits is an amount in Stripe's minor units and currency
	// code (provider/stripe.MinorUnits), Apple Pay's total; an error for an
	// amount Stripe cannot take. Required with StripePublishableKey.
	StripeMinorUnits func(amount decimal.Decimal, unit string) (int64, string, error)
	// GooglePayMerchantID is the merchant id the Google Pay & Wallet Console
	// issues; Google requires it in the PRODUCTION environment, so a
	// production stage without one shows no Google Pay button.
	GooglePayMerchantID string
}

// Routes are the method patterns this handler serves (CheckoutFunction).
func Routes() []string {
	return []string{
		"GET /checkout",
		"GET /checkout/3ds",
		"GET /checkout/assets/{file}",
		"GET /paycheckout.js",
		"GET /paycheckout.d.ts",
		"GET /favicon.ico",
		"GET /pay/{id}",
		"GET /checkout/api/session",
		"GET /checkout/api/status",
		"POST /checkout/api/pay/{method}",
		"POST /checkout/api/3ds/complete",
	}
}

type handler struct{ Deps }

// New returns the checkout handler.
func New(d Deps) http.Handler {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 10
	}
	if d.Public == nil {
		d.Public = ratelimit.NewPublic(d.Limiter)
	}
	h := &handler{d}
	byLink := d.Public.Middleware(func(r *http.Request) string { return r.PathValue("id") })
	byToken := d.Public.Middleware(func(r *http.Request) string { return r.Header.Get(checkouttoken.Header) })
	handlers := map[string]http.Handler{
		"GET /checkout":                   httpapi.HandlerFunc(h.page("checkout/index.html")),
		"GET /checkout/3ds":               httpapi.HandlerFunc(h.page("checkout/acs.html")),
		"GET /checkout/assets/{file}":     http.HandlerFunc(h.asset),
		"GET /paycheckout.js":             http.HandlerFunc(h.sdk("sdk/paycheckout.js")),
		"GET /paycheckout.d.ts":           http.HandlerFunc(h.sdk("sdk/paycheckout.d.ts")),
		"GET /favicon.ico":                http.HandlerFunc(favicon),
		"GET /pay/{id}":                   byLink(http.HandlerFunc(h.payLink)),
		"GET /checkout/api/session":       byToken(h.api(h.session)),
		"GET /checkout/api/status":        byToken(h.api(h.status)),
		"POST /checkout/api/pay/{method}": byToken(h.api(h.pay)),
		"POST /checkout/api/3ds/complete": byToken(h.api(h.completeChallenge)),
	}
	mux := http.NewServeMux()
	for _, r := range Routes() {
		mux.Handle(r, handlers[r])
	}
	return httpapi.Wrap(mux, d.Log)
}

func (h *handler) baseURL(r *http.Request) string {
	if h.PublicBaseURL != "" {
		return h.PublicBaseURL
	}
	return "https://" + r.Host
}

// ---- pages and assets ------------------------------------------------------

// pageCSP admits the wallets' origins and no others: Google Pay's pay.js
// (script), its payment sheet (a pay.google.com frame where the browser has
// no native sheet), the calls pay.js makes (pay.google.com, and google.com
// for Chrome's Payment Request method https://google.com/pay) and the
// button's images (www.gstatic.com). Apple Pay on a production stage runs
// through Stripe.js (stripeCSP), added only to pages that offer it.
const pageCSP = "default-src 'self'; script-src 'self' https://pay.google.com; style-src 'self'; " +
	"img-src 'self' data: https://www.gstatic.com; connect-src 'self' https://pay.google.com https://google.com; " +
	"frame-src https://pay.google.com; form-action 'self'; object-src 'none'; base-uri 'none'; frame-ancestors "

// stripeCSP are the origins Stripe's security guide lists for Stripe.js
// (script, its frames, its API), by directive: the production page's Apple
// Pay button (a Stripe.js payment request) needs them, no other page does.
var stripeCSP = map[string]string{
	"script-src":  "https://js.stripe.com https://*.js.stripe.com",
	"frame-src":   "https://js.stripe.com https://*.js.stripe.com https://hooks.stripe.com",
	"connect-src": "https://api.stripe.com",
}

// PagePolicy is the hosted page's Content-Security-Policy: pageCSP, with
// Stripe.js's origins when the page offers Apple Pay through Stripe
// (withStripe), and frame-ancestors. Exported for the browser tests.
func PagePolicy(withStripe bool, ancestors string) string {
	if !withStripe {
		return pageCSP + ancestors
	}
	ds := strings.Split(pageCSP, ";")
	for i, d := range ds {
		if f := strings.Fields(d); len(f) > 0 && stripeCSP[f[0]] != "" {
			ds[i] = d + " " + stripeCSP[f[0]]
		}
	}
	return strings.Join(ds, ";") + ancestors
}

// page serves a hosted page with a CSP whose frame-ancestors lists the
// registered origins of the merchant whose request the verified checkout
// token (`token`) or frame ticket (`frame`) names, so an unregistered site
// cannot frame it. The requestId parameter never chooses the policy: when it
// names another request than the token, only this service may frame the page.
func (h *handler) page(file string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ancestors, withStripe := "'self'", false
		if m := h.framingMerchant(r); m != nil {
			for _, o := range merchant.HeaderOrigins(r.Context(), httpapi.Logger(r.Context()), m) {
				ancestors += " " + o
			}
			if w := h.wallets(m); file == "checkout/index.html" && w != nil {
				withStripe = w.ApplePay != nil
			}
		}
		var body *encodedFile
		hd := w.Header()
		if file == "checkout/index.html" {
			// The shopper's language: PayCheckout's locale option, else Accept-Language.
			lang := web.Negotiate(r.URL.Query().Get("locale"), r.Header.Get("Accept-Language"))
			p, err := checkoutPage(lang)
			if err != nil {
				return err
			}
			body = p
			hd.Set("Content-Language", lang)
			hd.Add("Vary", "Accept-Language")
		} else {
			raw, err := fs.ReadFile(web.Files, file)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			body = newEncodedFile(raw, nil, nil)
		}
		hd.Set("Content-Type", "text/html; charset=utf-8")
		hd.Set("Content-Security-Policy", PagePolicy(withStripe, ancestors))
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(self)")
		body.write(w, r)
		return nil
	}
}

// framingMerchant is the merchant whose origins may frame the page r asks
// for, or nil.
func (h *handler) framingMerchant(r *http.Request) *merchant.Merchant {
	q := r.URL.Query()
	var c checkouttoken.Claims
	var err error
	switch {
	case q.Get("token") != "":
		c, err = h.Tokens.Open(q.Get("token"))
		if errors.Is(err, checkouttoken.ErrExpired) {
			err = nil // an expired session may still say so inside the merchant's frame
		}
	case q.Get("frame") != "":
		c, err = h.Tokens.OpenFrameTicket(q.Get("frame"))
	default:
		return nil
	}
	if err != nil || c.RequestID <= 0 {
		return nil
	}
	if rid := q.Get("requestId"); rid != "" && rid != strconv.FormatInt(c.RequestID, 10) {
		return nil
	}
	req, err := h.Store.PaymentRequest(r.Context(), c.RequestID)
	if err != nil || req.MerchantID != c.MerchantID {
		return nil
	}
	m, err := h.Store.Merchant(r.Context(), req.MerchantID)
	if err != nil {
		return nil
	}
	return m
}

func contentType(name string) string {
	if strings.HasSuffix(name, ".d.ts") {
		return "text/plain; charset=utf-8"
	}
	if strings.HasSuffix(name, ".ico") {
		return "image/x-icon" // not in Go's built-in table, and Lambda has no mime.types
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func (h *handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if strings.HasSuffix(name, ".html") || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	serveFile(w, r, "checkout/"+name, "public, max-age=300")
}

func (h *handler) sdk(file string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Merchants load the script from their own pages (and may use SRI).
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Cross-Origin-Resource-Policy", "cross-origin")
		serveFile(w, r, file, "public, max-age=300")
	}
}

func serveFile(w http.ResponseWriter, r *http.Request, file, cache string) {
	f, ok := staticAsset(file)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType(file))
	w.Header().Set("Cache-Control", cache)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	f.write(w, r)
}

// favicon is the browser tab's icon (a PNG inside an ICO, already
// compressed): it changes with a deployment at most, so browsers keep it a
// day and then revalidate it by its ETag.
func favicon(w http.ResponseWriter, r *http.Request) {
	serveFile(w, r, "favicon.ico", "public, max-age=86400")
}

// payLink is the payment request's `link` (/pay/{slug}, see paylink): anyone
// holding it may pay, so it mints a session token and sends the browser to
// the hosted page. A bare request id, a forged slug, an unknown request and
// a paid or cancelled one all get the same 404 with the same body, so the
// link tells a stranger nothing about which requests exist.
func (h *handler) payLink(w http.ResponseWriter, r *http.Request) {
	if err := h.openLink(w, r); err != nil {
		// The instance is fixed so that the body does not even echo the slug.
		httpapi.ErrorAt(w, r, err, "/pay")
	}
}

func (h *handler) openLink(w http.ResponseWriter, r *http.Request) error {
	id, err := h.Links.Open(r.PathValue("id"))
	if err != nil {
		return linkGone()
	}
	req, err := h.Store.PaymentRequest(r.Context(), id)
	if errkind.Is(err, errkind.NotFound) {
		return linkGone()
	}
	if err != nil {
		return err
	}
	if req.Status != payment.RequestUnpaid {
		return linkGone()
	}
	token, _ := h.Tokens.Mint(req.ID, req.MerchantID)
	q := url.Values{"requestId": {strconv.FormatInt(req.ID, 10)}, "token": {token}}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, "/checkout?"+q.Encode(), http.StatusSeeOther)
	return nil
}

// ---- API -------------------------------------------------------------------

// session is an authenticated hosted-page call: the request and merchant
// named by the checkout token.
type session struct {
	claims   checkouttoken.Claims
	req      *payment.Request
	merchant *merchant.Merchant
}

type apiFunc func(w http.ResponseWriter, r *http.Request, s *session) error

// api authenticates by X-Checkout-Token only: 401 without a valid,
// unexpired token; the token names the one request it may touch.
func (h *handler) api(f apiFunc) http.Handler {
	return httpapi.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		tok := r.Header.Get(checkouttoken.Header)
		if tok == "" {
			return tokenProblem(w, "The X-Checkout-Token header is missing.")
		}
		claims, err := h.Tokens.Open(tok)
		if err != nil {
			httpapi.Logger(r.Context()).Warn("checkout token refused", "reason", err.Error())
			if errors.Is(err, checkouttoken.ErrExpired) {
				return tokenProblem(w, "This checkout session has expired. Ask the merchant for a new payment link.")
			}
			return tokenProblem(w, "The checkout session token is invalid.")
		}
		req, err := h.Store.PaymentRequest(r.Context(), claims.RequestID)
		if errkind.Is(err, errkind.NotFound) || (err == nil && req.MerchantID != claims.MerchantID) {
			return tokenProblem(w, "The checkout session token is invalid.")
		}
		if err != nil {
			return err
		}
		m, err := h.Store.Merchant(r.Context(), req.MerchantID)
		if err != nil {
			return fmt.Errorf("load merchant %s: %w", req.MerchantID, err)
		}
		r = httpapi.AddLogAttrs(r, slog.String("merchant_id", m.ID), slog.Int64("payment_request_id", req.ID))
		return f(w, r, &session{claims: claims, req: req, merchant: m})
	})
}

// linkGone is the one answer for every link that opens no checkout.
func linkGone() error {
	return errkind.NotFoundErr("This payment link does not exist or can no longer be paid.")
}

func tokenProblem(w http.ResponseWriter, detail string) error {
	w.Header().Set("Www-Authenticate", `Token header="X-Checkout-Token"`)
	return errkind.Because(errkind.CheckoutTokenInvalid, detail, codes.InvalidToken)
}

func notUnpaid(req *payment.Request) error {
	if req.Status == payment.RequestCancelled {
		return errkind.ConflictErr("This payment request was cancelled.", codes.TransactionCancelled)
	}
	return errkind.ConflictErr("This payment request is already paid.", "")
}

// Session is the response of GET /checkout/api/session.
type Session struct {
	RequestID              string                `json:"requestId"`
	RecipientName          string                `json:"recipientName"`
	Amount                 string                `json:"amount"`
	Unit                   string                `json:"unit"`
	PaymentRequestStatusID payment.RequestStatus `json:"paymentRequestStatusId"`
	Methods                []string              `json:"methods"`
	Sandbox                bool                  `json:"sandbox"`
	SuccessURL             string                `json:"successUrl"`
	FailureURL             string                `json:"failureUrl"`
	ParentOrigin           *string               `json:"parentOrigin"`
	ExpiresAt              time.Time             `json:"expiresAt"`
	// Wallets configures the wallet buttons; present when "wallet" is in Methods.
	Wallets *Wallets `json:"wallets,omitempty"`
}

// Wallets is what the page needs to show the wallets' own buttons; a
// wallet the stage cannot offer is absent.
type Wallets struct {
	GooglePay *GooglePay `json:"googlePay,omitempty"`
	// ApplePay: offer Apple Pay where the browser does, through Stripe.js.
	ApplePay *ApplePay `json:"applePay,omitempty"`
}

// GooglePay is the Google Pay API's environment and the tokenization
// parameters of its PAYMENT_GATEWAY specification.
type GooglePay struct {
	Environment  string            `json:"environment"` // TEST | PRODUCTION
	Tokenization map[string]string `json:"tokenizationParameters"`
	MerchantName string            `json:"merchantName"`
	MerchantID   string            `json:"merchantId,omitempty"`
}

// ApplePay is what Stripe.js's payment request needs: Stripe validates the
// merchant with Apple for domains registered with Stripe and hands the page
// a card PaymentMethod (pm_…), which the wallet route charges. The amount is
// in Stripe's minor units of the request's currency.
type ApplePay struct {
	PublishableKey string `json:"publishableKey"`
	Country        string `json:"country"`
	Currency       string `json:"currency"`
	Amount         int64  `json:"amount"`
	Label          string `json:"label"`
}

// stripeAPIVersion is the `stripe:version` tokenization parameter: the
// version Stripe's entry in Google's gateway table passes.
const stripeAPIVersion = "2018-10-31"

// wallets is the wallet configuration of the merchant's stage, nil when it
// offers none:
//   - sandbox: Google Pay's TEST environment with Google's `example` gateway
//     (Google returns a constant test token, which the sandbox approves); no
//     Apple Pay, whose merchant validation needs an acquirer's Apple merchant
//     identity (the API takes the sandbox's Apple Pay test tokens).
//   - production with a publishable key: Google Pay's PRODUCTION environment
//     with the `stripe` gateway when Google's merchant id is configured, and
//     Apple Pay through Stripe.js.
func (h *handler) wallets(m *merchant.Merchant) *Wallets {
	if m.Sandbox {
		return &Wallets{GooglePay: &GooglePay{Environment: "TEST", MerchantName: m.Name, MerchantID: h.GooglePayMerchantID,
			Tokenization: map[string]string{"gateway": "example", "gatewayMerchantId": m.ID}}}
	}
	if h.StripePublishableKey == "" {
		return nil
	}
	country := h.StripeAccountCountry
	if country == "" {
		country = "US"
	}
	w := &Wallets{ApplePay: &ApplePay{PublishableKey: h.StripePublishableKey, Country: country, Label: m.Name}}
	if h.GooglePayMerchantID != "" {
		w.GooglePay = &GooglePay{Environment: "PRODUCTION", MerchantName: m.Name, MerchantID: h.GooglePayMerchantID,
			Tokenization: map[string]string{"gateway": "stripe", "stripe:version": stripeAPIVersion,
				"stripe:publishableKey": h.StripePublishableKey}}
	}
	return w
}

// requestWallets is wallets for one request: Apple Pay's total in Stripe's
// minor units, and no Apple Pay for an amount Stripe cannot take.
func (h *handler) requestWallets(m *merchant.Merchant, req *payment.Request) *Wallets {
	w := h.wallets(m)
	if w == nil || w.ApplePay == nil {
		return w
	}
	var minor int64
	var cur string
	err := errors.New("no Stripe minor units configured")
	if h.StripeMinorUnits != nil {
		minor, cur, err = h.StripeMinorUnits(req.Amount, req.Unit)
	}
	if err != nil {
		if w.GooglePay == nil {
			return nil
		}
		w.ApplePay = nil
		return w
	}
	w.ApplePay.Amount, w.ApplePay.Currency = minor, cur
	if req.RecipientName != "" {
		w.ApplePay.Label = req.RecipientName
	}
	return w
}

func (h *handler) session(w http.ResponseWriter, r *http.Request, s *session) error {
	if s.req.Status != payment.RequestUnpaid {
		return notUnpaid(s.req)
	}
	out := Session{
		RequestID: strconv.FormatInt(s.req.ID, 10), RecipientName: s.req.RecipientName,
		Amount: string(payment.DisplayAmount(s.req.Amount, s.req.Unit)), Unit: s.req.Unit,
		PaymentRequestStatusID: s.req.Status, Methods: h.served(methods(s.merchant), s.merchant, s.req.Unit), Sandbox: s.merchant.Sandbox,
		SuccessURL: firstNonEmpty(s.req.SuccessURL, s.merchant.SuccessURL), FailureURL: firstNonEmpty(s.req.FailureURL, s.merchant.FailureURL),
		ExpiresAt: time.Unix(s.claims.ExpiresAt, 0).UTC(),
	}
	if slices.Contains(out.Methods, string(provider.MethodWallet)) {
		out.Wallets = h.requestWallets(s.merchant, s.req)
	}
	// The page posts results only to an origin the merchant registered
	// (or this service's own origin, for the demo page).
	// A malformed origin is refused (032); a well-formed one that the
	// merchant did not register just gets no parent origin.
	if q := r.URL.Query().Get("origin"); q != "" {
		o, err := merchant.NormalizeOrigin(q, true)
		if err != nil {
			return merchant.OriginProblem("origin", err)
		}
		if slices.Contains(merchant.HeaderOrigins(r.Context(), httpapi.Logger(r.Context()), s.merchant), o) || o == strings.ToLower(h.baseURL(r)) {
			out.ParentOrigin = &o
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// methods lists what the hosted page offers: cards always, the others when
// the merchant has one of their selectors enabled.
func methods(m *merchant.Merchant) []string {
	out := []string{"card"}
	has := func(group []int) bool {
		for _, n := range group {
			if slices.Contains(m.Methods, n) {
				return true
			}
		}
		return false
	}
	if has(merchant.WalletASelectors) || has(merchant.WalletBSelectors) {
		out = append(out, "wallet")
	}
	if has(merchant.UPISelectors) {
		out = append(out, "upi")
	}
	if has(merchant.AlternativeSelectors) || slices.Contains(m.Methods, merchant.SandboxSelector) {
		out = append(out, "qr")
	}
	return out
}

// served drops the methods the configured connector does not take in the
// request's currency (Stripe's QR is Pix in BRL, PromptPay in THB, ...).
// The wallet tab holds the wallets' buttons, so production shows it only
// with the publishable key they tokenize for. The page's method names are
// the provider's.
func (h *handler) served(names []string, m *merchant.Merchant, unit string) []string {
	if h.wallets(m) == nil {
		names = slices.DeleteFunc(names, func(n string) bool { return n == string(provider.MethodWallet) })
	}
	ms, ok := h.Payments.(interface {
		Offers(*merchant.Merchant, provider.Method, string) bool
	})
	if !ok {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return !ms.Offers(m, provider.Method(n), unit) })
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
