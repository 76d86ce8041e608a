package browsertest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/checkout"
	"github.com/payreq/payreq/web"
)

// fakeAPI is a stand-in for the checkout handler: it serves the real hosted page, its assets and
// the sandbox 3-D Secure page from web.Files, under the production CSP, and implements the
// checkout API contract with a few sandbox outcomes. It records every request.
type fakeAPI struct {
	*site
	token          string
	frameAncestors string   // CSP frame-ancestors
	registered     []string // origins the merchant registered (session parentOrigin)
	methods        []string
	amount         string         // the session's decimal amount ("10.50" unless a test sets another)
	wallets        map[string]any // the session's wallet button configuration, when set
	stripePolicy   bool           // serve the hosted page with the checkout handler's Stripe.js policy
	sessionGate    chan struct{}  // when set, session answers wait until it is closed
	successURL     string
	failureURL     string

	mu            sync.Mutex
	requestStatus int // 1 paid, 2 unpaid, 3 cancelled
	last          map[string]any
	upiPolls      int
	reqs          []apiRequest
}

type apiRequest struct {
	Method, Path, Query, Token, Referer string
	Body                                map[string]any
}

func newFakeAPI(t testing.TB, frameAncestors string, registered ...string) *fakeAPI {
	f := &fakeAPI{
		site: newSite(t), token: "tok-123", frameAncestors: frameAncestors, registered: registered,
		methods: []string{"card", "wallet", "upi", "qr"}, amount: "10.50", requestStatus: 2,
	}
	f.successURL = f.Origin + "/merchant/success"
	f.failureURL = f.Origin + "/merchant/failure"
	return f
}

func (f *fakeAPI) requests() []apiRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apiRequest(nil), f.reqs...)
}

func (f *fakeAPI) lastRequest(path string) (apiRequest, bool) {
	r := f.requests()
	for i := len(r) - 1; i >= 0; i-- {
		if r[i].Path == path {
			return r[i], true
		}
	}
	return apiRequest{}, false
}

func (f *fakeAPI) csp() string {
	if f.stripePolicy {
		// The checkout handler's own policy of a page that offers Apple Pay through Stripe.js.
		return checkout.PagePolicy(true, f.frameAncestors)
	}
	// Google Pay's script origin, as the checkout handler's CSP admits it.
	return "default-src 'self'; script-src 'self' https://pay.google.com; style-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors " + f.frameAncestors
}

func problem(w http.ResponseWriter, status int, code, detail string, errs ...map[string]any) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	p := map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail, "instance": "/checkout/api", "code": code}
	if errs != nil {
		p["errors"] = errs
	}
	json.NewEncoder(w).Encode(p)
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func paymentResult(ts, prs int, code, message string, next map[string]any) map[string]any {
	r := map[string]any{
		"paymentRequestId": "42", "transactionId": "987", "paymentId": "987", "transactionNumber": "TX-0000987",
		"transactionStatusId": ts, "paymentRequestStatusId": prs,
		"lastLog": map[string]any{"transactionStatusId": ts, "message": message, "code": code},
	}
	if next != nil {
		r["nextAction"] = next
	}
	return r
}

func (f *fakeAPI) start() *fakeAPI {
	mux := http.NewServeMux()
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Referrer-Policy", "no-referrer")
			serve(w, r, web.Files, name, f.csp())
		}
	}
	// The hosted page in the language the checkout handler would choose, from the same functions.
	mux.HandleFunc("GET /checkout", func(w http.ResponseWriter, r *http.Request) {
		lang := web.Negotiate(r.URL.Query().Get("locale"), r.Header.Get("Accept-Language"))
		body, err := web.CheckoutPage(lang)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Security-Policy", f.csp())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Language", lang)
		w.Write(body)
	})
	mux.HandleFunc("GET /checkout/3ds", page("checkout/acs.html"))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { serve(w, r, web.Files, "favicon.ico", "") })
	mux.HandleFunc("GET /checkout/assets/{file}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, web.Files, "checkout/"+r.PathValue("file"), "")
	})
	// The demo merchant page, as the checkout function serves it (same origin as the checkout).
	mux.HandleFunc("GET /demo", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, web.Files, "demo/index.html", "default-src 'self'; script-src 'self'; style-src 'self'; frame-src 'self'")
	})
	mux.HandleFunc("GET /demo/assets/{file}", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, web.Files, "demo/"+r.PathValue("file"), "")
	})
	mux.HandleFunc("GET /paycheckout.js", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, web.Files, "sdk/paycheckout.js", "")
	})
	mux.HandleFunc("POST /demo/api/checkout", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requestStatus, f.last = 2, nil // a fresh payment request
		f.mu.Unlock()
		reply(w, map[string]any{"requestId": "42", "token": f.token, "paymentUrl": f.Origin + "/checkout?requestId=42&token=" + f.token})
	})
	mux.HandleFunc("GET /merchant/{result}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>Merchant "+r.PathValue("result")+"</title><h1>Merchant "+r.PathValue("result")+" page</h1>")
	})
	mux.HandleFunc("GET /checkout/api/session", f.gated(f.api(func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		if f.requestStatus != 2 {
			problem(w, http.StatusConflict, "", "the payment request is no longer payable")
			return
		}
		var parent any
		for _, o := range f.registered {
			if o == r.URL.Query().Get("origin") {
				parent = o
			}
		}
		s := map[string]any{
			"requestId": "42", "recipientName": "Acme Books", "amount": f.amount, "unit": "EUR",
			"paymentRequestStatusId": f.requestStatus, "methods": f.methods, "sandbox": true,
			"successUrl": f.successURL, "failureUrl": f.failureURL, "parentOrigin": parent,
			"expiresAt": time.Now().Add(15 * time.Minute).UTC().Format(time.RFC3339),
		}
		if f.wallets != nil {
			s["wallets"] = f.wallets
		}
		reply(w, s)
	})))
	mux.HandleFunc("POST /checkout/api/pay/{method}", f.api(func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		if f.requestStatus != 2 {
			problem(w, http.StatusConflict, "", "the payment request is already paid")
			return
		}
		approved := paymentResult(1, 1, "", "Approved", nil)
		switch r.PathValue("method") {
		case "card":
			switch body["number"] {
			case "4000000000000002":
				f.last = paymentResult(2, 2, "999", "Declined, contact the card issuer", nil)
			case "4000000000003220", "4000008400001629":
				f.last = paymentResult(3, 2, "", "3-D Secure required", map[string]any{
					"type": "threeds_redirect", "url": "/checkout/3ds?transactionId=987&requestId=42",
				})
			case "5555555555554444":
				problem(w, http.StatusBadRequest, "040", "invalid payment data",
					map[string]any{"field": "number", "code": "040", "detail": "the card number is not accepted"})
				return
			default:
				f.last = approved
			}
		case "upi":
			f.upiPolls = 0
			f.last = paymentResult(3, 2, "", "Waiting for the payer", map[string]any{"type": "upi_collect", "reference": "UPI-REF-1"})
		case "qr":
			f.last = paymentResult(3, 2, "", "Waiting for the payer", map[string]any{"type": "qr", "qrPayload": "upi://pay?pa=acme@upi&am=10.50&cu=EUR"})
		case "wallet":
			f.last = approved
		default:
			problem(w, http.StatusBadRequest, "045", "payment method not enabled")
			return
		}
		if f.last["transactionStatusId"] == 1 {
			f.requestStatus = 1
		}
		reply(w, f.last)
	}))
	mux.HandleFunc("GET /checkout/api/status", f.api(func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		if f.last == nil {
			problem(w, http.StatusNotFound, "043", "no payment attempt yet")
			return
		}
		if next, _ := f.last["nextAction"].(map[string]any); next != nil && next["type"] == "upi_collect" {
			if f.upiPolls++; f.upiPolls >= 2 {
				f.last = paymentResult(1, 1, "", "Approved", nil)
				f.requestStatus = 1
			}
		}
		reply(w, f.last)
	}))
	mux.HandleFunc("POST /checkout/api/3ds/complete", f.api(func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		if body["transactionId"] != "987" {
			problem(w, http.StatusNotFound, "043", "no such transaction")
			return
		}
		if body["result"] == "approve" {
			f.last = paymentResult(1, 1, "", "Approved", nil)
			f.requestStatus = 1 // the session endpoint now answers 409: the page must cope on resume
		} else {
			f.last = paymentResult(2, 2, "004", "3-D Secure system decline", nil)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	f.site.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := apiRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Token: r.Header.Get("X-Checkout-Token"), Referer: r.Referer()}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &rec.Body)
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	}))
	return f
}

// gated holds h until sessionGate (when set) is closed: a test sees the page as it is painted
// while the session is loading.
func (f *fakeAPI) gated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if f.sessionGate != nil {
			select {
			case <-f.sessionGate:
			case <-r.Context().Done():
				return
			}
		}
		h(w, r)
	}
}

// api checks X-Checkout-Token, decodes a JSON body, and runs h under the lock.
func (f *fakeAPI) api(h func(w http.ResponseWriter, r *http.Request, body map[string]any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Checkout-Token") != f.token {
			problem(w, http.StatusUnauthorized, "048", "the checkout token is invalid or expired")
			return
		}
		var body map[string]any
		if r.Method == http.MethodPost {
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				problem(w, http.StatusUnsupportedMediaType, "", "want application/json, got "+ct)
				return
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				problem(w, http.StatusBadRequest, "", err.Error())
				return
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		h(w, r, body)
	}
}
