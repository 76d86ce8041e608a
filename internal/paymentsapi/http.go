// Package paymentsapi is the payments function's HTTP edge: its routes,
// request bodies, problems and the payer's 3-D Secure pages. The attempts
// themselves run in the payment core, internal/paycore, which has no HTTP
// import.
package paymentsapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/payreq/payreq/internal/apikey"
	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payer"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// HandlerDeps are the HTTP handler's collaborators.
type HandlerDeps struct {
	Service *paycore.Service
	// Guard wraps every merchant-server route: API-key authentication (it
	// must put the merchant in the context, see apikey.MerchantFrom), and
	// whatever else applies to merchant calls (rate limit, idempotency).
	Guard         func(http.Handler) http.Handler
	Log           *slog.Logger
	PublicBaseURL string // empty: https://<request host>
	AllowHTTPURLs bool   // local stack: http:// merchant URLs in created requests
}

// Route patterns of the payments function (template.yaml PaymentsFunction).
const (
	RouteWalletA         = "POST /payments/walletA/{id}"
	RouteQR              = "POST /payments/qr/{id}"
	RouteH2H             = "POST /payments/h2h/{n}"
	RouteCardStatus      = "GET /payments/creditCard/status/{paymentId}"
	RouteThreeDSStatus   = "GET /payments/threeds/status/{transaction3dsId}"
	RouteThreeDSRedirect = "GET /payments/threeds/redirect/{transactionId}"
	RouteRefund          = "GET /payments/h2h/refund/{transactionId}"
	// RouteTransaction is served by the merchant API function with
	// TransactionLookup.
	RouteTransaction = "GET /transactions/{id}"
)

// Routes are the method patterns the handler serves; template.yaml must
// declare exactly these for PaymentsFunction.
func Routes() []string {
	return []string{RouteWalletA, RouteQR, RouteH2H, RouteCardStatus, RouteThreeDSStatus, RouteThreeDSRedirect, RouteRefund}
}

type handler struct{ HandlerDeps }

// NewHandler returns the payments function's handler. Every route but the
// 3-D Secure redirect (opened by the payer's browser, authenticated by its
// signed query) goes through Guard.
func NewHandler(d HandlerDeps) http.Handler {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h := &handler{d}
	merchantRoutes := map[string]httpapi.HandlerFunc{
		RouteWalletA:       h.walletA,
		RouteQR:            h.qr,
		RouteH2H:           h.h2h,
		RouteCardStatus:    h.cardStatus,
		RouteThreeDSStatus: h.threeDSStatus,
		RouteRefund:        h.refund,
	}
	mux := http.NewServeMux()
	for route, fn := range merchantRoutes {
		mux.Handle(route, d.Guard(fn))
	}
	mux.Handle(RouteThreeDSRedirect, httpapi.HandlerFunc(h.threeDSRedirect))
	return httpapi.Wrap(mux, d.Log)
}

func (h *handler) baseURL(r *http.Request) string {
	if h.PublicBaseURL != "" {
		return h.PublicBaseURL
	}
	return "https://" + r.Host
}

func pathID(r *http.Request, name string) (int64, error) {
	id, ok := paycore.ParseID(r.PathValue(name))
	if !ok {
		return 0, errkind.BadInput("The "+name+" must be a positive 64-bit integer, got "+strconv.Quote(r.PathValue(name))+".", "")
	}
	return id, nil
}

func (h *handler) walletA(w http.ResponseWriter, r *http.Request) error {
	return h.payExisting(w, r, provider.MethodWallet)
}

func (h *handler) qr(w http.ResponseWriter, r *http.Request) error {
	return h.payExisting(w, r, provider.MethodQR)
}

// payExisting serves the walletA and QR operations: payer data on an
// existing request.
func (h *handler) payExisting(w http.ResponseWriter, r *http.Request, method provider.Method) error {
	m := apikey.MerchantFrom(r.Context())
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var body payer.Data
	if err := httpapi.DecodeJSON(w, r, &body); err != nil {
		return err
	}
	res, err := h.Service.Pay(r.Context(), m, id, paycore.Attempt{Method: method, Payer: &body, CardholderPresent: true, BaseURL: h.baseURL(r)})
	if err != nil {
		return err
	}
	h.logResult(r, res)
	httpapi.WriteJSON(w, http.StatusOK, res)
	return nil
}

// H2HBody is the body of POST /payments/h2h/{n}: the payer data, the
// method's fields, and either paymentRequestId or amount + unit (docs/payments.md).
type H2HBody struct {
	payer.Data
	PaymentRequestID json.RawMessage `json:"paymentRequestId,omitempty"`
	Amount           json.RawMessage `json:"amount,omitempty"`
	Unit             string          `json:"unit,omitempty"`
	ReferenceID      string          `json:"referenceId,omitempty"`
	Notes            string          `json:"notes,omitempty"`
	NotifyURL        string          `json:"notifyUrl,omitempty"`
	SuccessURL       string          `json:"successUrl,omitempty"`
	FailureURL       string          `json:"failureUrl,omitempty"`
	// Card is accepted by the sandbox card selector 1 only.
	Card *CardBody `json:"card,omitempty"`
}

// CardBody is card data in an h2h body (sandbox selector 1).
type CardBody struct {
	HolderName string `json:"holderName,omitempty"`
	Number     string `json:"number"`
	Expiry     string `json:"expiry"` // MM/YY
	CVC        string `json:"cvc"`
}

func (h *handler) h2h(w http.ResponseWriter, r *http.Request) error {
	m := apikey.MerchantFrom(r.Context())
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || !h.Service.SelectorEnabled(m, n) {
		return paycore.SelectorProblem(n)
	}
	var body H2HBody
	if err := httpapi.DecodeJSON(w, r, &body); err != nil {
		return err
	}
	method, _ := paycore.MethodOf(n, body.Card != nil)
	if body.Card != nil && n != 1 {
		return errkind.Validation([]errkind.FieldError{{Field: "card", Code: codes.InvalidPaymentMethod,
			Detail: "card data is accepted by the sandbox card selector 1 only"}})
	}
	a := paycore.Attempt{Method: method, Selector: n, Payer: &body.Data, CardholderPresent: true, BaseURL: h.baseURL(r)}
	if body.Card != nil {
		a.Card = &card.Input{Holder: body.Card.HolderName, Number: body.Card.Number, Expiry: body.Card.Expiry, CVV: body.Card.CVC}
	}
	body.Data.Normalize()
	errs := body.Data.Validate(paycore.PayerKind(method))
	var res paycore.Result
	if raw := bytes.TrimSpace(body.PaymentRequestID); len(raw) > 0 && string(raw) != "null" {
		id, ok := parseJSONID(raw)
		if !ok {
			errs = append(errs, errkind.FieldError{Field: "paymentRequestId", Detail: "paymentRequestId must be a positive 64-bit integer"})
		}
		if len(bytes.TrimSpace(body.Amount)) > 0 {
			amt, msg := payment.ParseAmount(body.Amount)
			if msg != "" {
				errs = append(errs, errkind.FieldError{Field: "amount", Code: codes.InvalidAmount, Detail: msg})
			}
			a.Amount = &amt
		}
		a.Unit = body.Unit
		if len(errs) > 0 {
			return errkind.Validation(errs)
		}
		if res, err = h.Service.Pay(r.Context(), m, id, a); err != nil {
			return err
		}
	} else {
		in := payment.CreateInput{Amount: body.Amount, Unit: body.Unit, ReferenceID: body.ReferenceID, Notes: body.Notes,
			NotifyURL: body.NotifyURL, SuccessURL: body.SuccessURL, FailureURL: body.FailureURL}
		if len(errs) == 0 {
			in.Client = &payment.Client{Name: body.Name, Email: body.Email, Phone: body.PhoneNumber}
		}
		req, cerrs := in.Validate(payment.CreateRules{AllowHTTP: h.AllowHTTPURLs || m.Sandbox, DefaultRecipient: m.Name})
		if errs = append(errs, cerrs...); len(errs) > 0 {
			return errkind.Validation(errs)
		}
		if res, err = h.Service.CreateAndPay(r.Context(), m, req, a); err != nil {
			return err
		}
	}
	h.logResult(r, res)
	httpapi.WriteJSON(w, http.StatusOK, res)
	return nil
}

// parseJSONID reads a JSON number or numeric string id.
func parseJSONID(raw json.RawMessage) (int64, bool) {
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false
		}
	}
	return paycore.ParseID(s)
}

func (h *handler) logResult(r *http.Request, res paycore.Result) {
	httpapi.AddLogAttrs(r, slog.Int64("payment_request_id", res.PaymentRequestID), slog.Int64("transaction_id", res.TransactionID),
		slog.Int("transaction_status", int(res.TransactionStatusID)), slog.String("code", string(res.LastLog.Code)))
}

func (h *handler) cardStatus(w http.ResponseWriter, r *http.Request) error {
	m := apikey.MerchantFrom(r.Context())
	id, err := pathID(r, "paymentId")
	if err != nil {
		return err
	}
	tx, err := h.Service.TransactionOf(r.Context(), m, id)
	if err == nil {
		tx, err = h.Service.AsCommitted(r.Context(), tx)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, h.Service.ViewOf(tx, h.baseURL(r)))
	return nil
}

func (h *handler) threeDSStatus(w http.ResponseWriter, r *http.Request) error {
	m := apikey.MerchantFrom(r.Context())
	ref := r.PathValue("transaction3dsId")
	id, ok := paycore.ParseThreeDSID(ref)
	if !ok {
		return errkind.BadInput("The transaction3dsId must look like 3ds_<transactionId>, got "+strconv.Quote(ref)+".", "")
	}
	tx, err := h.Service.TransactionOf(r.Context(), m, id)
	if err == nil && tx.ThreeDS == "" {
		err = errkind.NotFoundErr("Transaction " + strconv.FormatInt(id, 10) + " has no 3-D Secure authentication.")
	}
	if err == nil {
		tx, err = h.Service.AsCommitted(r.Context(), tx)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, h.Service.ThreeDSView(tx, h.baseURL(r)))
	return nil
}

func (h *handler) refund(w http.ResponseWriter, r *http.Request) error {
	m := apikey.MerchantFrom(r.Context())
	id, err := pathID(r, "transactionId")
	if err != nil {
		return err
	}
	rv, err := h.Service.Refund(r.Context(), m, id)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, rv)
	return nil
}

// threeDSRedirect serves the payer's browser: the sandbox challenge page
// while the challenge is open, a result page afterwards.
func (h *handler) threeDSRedirect(w http.ResponseWriter, r *http.Request) error {
	id, ok := paycore.ParseID(r.PathValue("transactionId"))
	if !ok {
		WriteResultPage(w, http.StatusNotFound, nil, nil, "This authentication does not exist.")
		return nil
	}
	q := r.URL.Query()
	if err := h.Service.VerifyChallengeURL(id, q.Get("exp"), q.Get("sig")); err != nil {
		WriteResultPage(w, http.StatusUnauthorized, nil, nil, "This authentication link is invalid or has expired.")
		return nil
	}
	tx, err := h.Service.Store.Transaction(r.Context(), id)
	if errkind.Is(err, errkind.NotFound) {
		WriteResultPage(w, http.StatusNotFound, nil, nil, "This authentication does not exist.")
		return nil
	}
	if err != nil {
		return err
	}
	origins := h.Service.FrameOrigins(r.Context(), tx.MerchantID)
	if tx.Status == payment.TxPending && tx.ThreeDS == payment.ThreeDSChallenge && h.Service.Sandbox {
		writeChallengePage(h.Service, w, tx, q.Get("return"), origins)
		return nil
	}
	if tx.Status == payment.TxPending && tx.ThreeDS == payment.ThreeDSChallenge {
		if served, err := h.acquirerChallenge(w, r, tx, origins); served || err != nil {
			return err
		}
	}
	WriteResultPage(w, http.StatusOK, tx, origins, "")
	return nil
}

// TransactionLookup serves GET /transactions/{id} (id: the transaction id
// or its transactionNumber) for the merchant API function, which mounts it
// behind its API-key authentication.
func TransactionLookup(svc *paycore.Service, publicBaseURL string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		m := apikey.MerchantFrom(r.Context())
		if m == nil {
			return errkind.UnauthorizedErr("The X-API-Key header is missing.")
		}
		tx, err := svc.TransactionByRef(r.Context(), m, r.PathValue("id"))
		if err == nil {
			tx, err = svc.AsCommitted(r.Context(), tx)
		}
		if err != nil {
			return err
		}
		base := publicBaseURL
		if base == "" {
			base = "https://" + r.Host
		}
		httpapi.WriteJSON(w, http.StatusOK, svc.ViewOf(tx, base))
		return nil
	}
}
