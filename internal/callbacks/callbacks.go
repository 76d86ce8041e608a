// Package callbacks is the `callbacks` function: the endpoints on which
// payment providers (and the sandbox provider's asynchronous side) report
// results, and the 3-D Secure callback the payer's browser reaches from the
// challenge page.
//
// Every provider callback is signed (package sig): a missing, wrong or stale
// signature is a 401 before anything is parsed. Bodies are JSON or
// application/x-www-form-urlencoded; a GET carries the same fields in its
// query. Results are applied exactly once (paycore.Service.Settle): a
// duplicate event id is acknowledged with 200 and changes nothing, and a
// result for a transaction that is no longer pending never regresses it.
package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/paymentsapi"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/sig"
)

// MaxBody is the largest callback body read.
const MaxBody = 64 << 10

// DefaultTimeout bounds the processing of one callback, well inside the
// providers' usual 10 to 30 s and the function's 10 s: a slow dependency
// gets a 503 and the provider's retry (processing is idempotent, so a
// processing cut short is completed by the retry).
const DefaultTimeout = 5 * time.Second

// Deps are the handler's collaborators.
type Deps struct {
	Service *paycore.Service
	Key     []byte // provider callback key (sig.InfoProviderCallback)
	Log     *slog.Logger
	Now     func() time.Time
	Timeout time.Duration
	// Stripe, when set, takes the Stripe-signed events of /callbacks/svcwh
	// (stripe.go).
	Stripe *StripeWebhook
	// Adyen, when set, takes Adyen's webhooks on /callbacks/adyen
	// (adyen.go); without it that address answers 404.
	Adyen *AdyenWebhook
}

// Provider result endpoints (same contract, one per integration style).
var resultPaths = []string{"/callbacks/svc", "/callbacks/svc-gateway", "/callbacks/svcwh"}

// Routes are the method patterns of the callbacks function; template.yaml
// must declare exactly these for CallbacksFunction.
func Routes() []string {
	var out []string
	for _, p := range append(slices.Clone(resultPaths), "/callbacks/3ds") {
		out = append(out, "GET "+p, "POST "+p)
	}
	out = append(out, "POST "+AdyenPath, "POST "+StripeAccountPath)
	// The spec lets a merchant's callback be called with GET or POST, so each
	// test callback answers both.
	for _, p := range testPaths {
		out = append(out, "GET "+p, "POST "+p)
	}
	return out
}

// testPaths are the test callbacks merchants can point notifications at.
var testPaths = []string{"/callbacks/test/json", "/callbacks/test/form", "/callbacks/test/text"}

type handler struct{ Deps }

// New returns the callbacks handler.
func New(d Deps) http.Handler {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Timeout <= 0 {
		d.Timeout = DefaultTimeout
	}
	h := &handler{d}
	mux := http.NewServeMux()
	for _, p := range resultPaths {
		mux.Handle("GET "+p, httpapi.HandlerFunc(h.result))
		mux.Handle("POST "+p, httpapi.HandlerFunc(h.result))
	}
	mux.Handle("GET /callbacks/3ds", httpapi.HandlerFunc(h.threeDSBrowser))
	mux.Handle("POST /callbacks/3ds", httpapi.HandlerFunc(h.threeDSPost))
	mux.Handle("POST "+AdyenPath, httpapi.HandlerFunc(h.adyenEvent))
	mux.Handle("POST "+StripeAccountPath, httpapi.HandlerFunc(h.stripeAccountEvent))
	for i, fn := range []httpapi.HandlerFunc{echoJSON, echoForm, echoText} {
		mux.Handle("GET "+testPaths[i], fn)
		mux.Handle("POST "+testPaths[i], fn)
	}
	return httpapi.Wrap(mux, d.Log)
}

// signedFields verifies the request's signature and returns its fields: the
// query of a GET, the JSON or form body of a POST.
func (h *handler) signedFields(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	header := r.Header.Get(sig.Header)
	if r.Method == http.MethodGet {
		if err := sig.VerifyQuery(h.Key, header, r.URL.RawQuery, h.Now()); err != nil {
			return nil, unauthorized(err)
		}
		q := r.URL.Query()
		q.Del(sig.ParamTime)
		q.Del(sig.ParamSig)
		return q, nil
	}
	body, err := httpapi.ReadBody(w, r, MaxBody)
	if err != nil {
		return nil, err
	}
	if err := sig.Verify(h.Key, header, body, h.Now()); err != nil {
		return nil, unauthorized(err)
	}
	return parseBody(r.Header.Get("Content-Type"), body)
}

func unauthorized(err error) error {
	return errkind.UnauthorizedErr("The " + sig.Header + " signature is " + strings.TrimPrefix(err.Error(), "signature ") + ".")
}

// parseBody reads a JSON object (scalar members only) or a form.
func parseBody(contentType string, body []byte) (url.Values, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, errkind.BadInput("The form body is malformed.", "")
		}
		return v, nil
	case "application/json", "":
		var obj map[string]any
		if err := httpapi.Unmarshal(body, &obj); err != nil {
			return nil, err
		}
		if obj == nil {
			return nil, errkind.BadInput("The body must be a JSON object.", "")
		}
		v := url.Values{}
		for k, val := range obj {
			switch x := val.(type) {
			case string:
				v.Set(k, x)
			case json.Number:
				v.Set(k, x.String())
			case bool:
				v.Set(k, strconv.FormatBool(x))
			case nil:
			default:
				// Provider-specific nested data is accepted and ignored.
			}
		}
		return v, nil
	}
	return nil, httpapi.UnsupportedMedia("Send the callback as application/json or application/x-www-form-urlencoded.")
}

// fieldErr collects the field errors of a malformed callback.
type fieldErr []errkind.FieldError

func (f *fieldErr) add(field, detail string) {
	*f = append(*f, errkind.FieldError{Field: field, Detail: detail})
}

func idField(v url.Values, name string, required bool, errs *fieldErr) int64 {
	s := v.Get(name)
	if s == "" {
		if required {
			errs.add(name, name+" is required")
		}
		return 0
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		errs.add(name, name+" must be a positive integer")
	}
	return id
}

func eventIDField(v url.Values, errs *fieldErr) string {
	id := v.Get("eventId")
	switch {
	case id == "":
		errs.add("eventId", "eventId is required")
	case len(id) > 200 || strings.ContainsAny(id, "\x00\r\n"):
		errs.add("eventId", "eventId must be at most 200 printable characters")
	}
	return id
}

// ParseResult reads a provider result callback's fields.
func ParseResult(v url.Values) (paycore.ProviderResult, error) {
	var errs fieldErr
	r := paycore.ProviderResult{
		EventID:          eventIDField(v, &errs),
		TransactionID:    idField(v, "transactionId", true, &errs),
		PaymentRequestID: idField(v, "paymentRequestId", false, &errs),
		Message:          v.Get("message"),
		ProviderRef:      v.Get("providerRef"),
	}
	switch strings.ToLower(v.Get("status")) {
	case "approved", "1", "success", "succeeded", "completed", "paid":
		r.Status = provider.Approved
	case "declined", "2", "failed", "failure", "rejected":
		r.Status = provider.Declined
	case "":
		errs.add("status", "status is required")
	default:
		errs.add("status", "status must be approved or declined")
	}
	if c := codes.Code(v.Get("code")); c != "" {
		if !c.Known() {
			errs.add("code", "code must be one of the specification's codes")
		}
		r.Code = c
	}
	if r.Status == provider.Approved {
		r.Code = ""
	} else if r.Status == provider.Declined && r.Code == "" {
		r.Code = codes.DeclinedContactIssuer
	}
	if len(r.Message) > 500 {
		r.Message = r.Message[:500]
	}
	if len(errs) > 0 {
		return r, errkind.Validation(errs)
	}
	return r, nil
}

func (h *handler) result(w http.ResponseWriter, r *http.Request) error {
	if h.isStripeEvent(r) {
		return h.stripeEvent(w, r)
	}
	v, err := h.signedFields(w, r)
	if err != nil {
		return err
	}
	res, err := ParseResult(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	s, err := h.Service.Settle(ctx, res)
	if err != nil {
		return h.settleError(err, res.TransactionID)
	}
	h.ack(w, r, s, res.TransactionID)
	return nil
}

func (h *handler) settleError(err error, txID int64) error {
	switch {
	case errors.Is(err, paycore.ErrUnknownTransaction):
		return errkind.NotFoundErr(fmt.Sprintf("Transaction %d does not exist.", txID))
	case errors.Is(err, paycore.ErrMismatch):
		return errkind.BadInput(fmt.Sprintf("Transaction %d does not belong to that payment request.", txID), "")
	case errors.Is(err, paycore.ErrUnbound):
		return errkind.ConflictErr(fmt.Sprintf("The provider's result is not for transaction %d; nothing changed.", txID), "")
	case errors.Is(err, provider.ErrUnknownChallenge):
		return errkind.ConflictErr(fmt.Sprintf("Transaction %d has no pending 3-D Secure challenge.", txID), "")
	}
	return err
}

// Ack is the JSON answer to a processed callback.
type Ack struct {
	Received            bool                       `json:"received"`
	Duplicate           bool                       `json:"duplicate"`
	Changed             bool                       `json:"changed"`
	TransactionID       int64                      `json:"transactionId"`
	TransactionStatusID *payment.TransactionStatus `json:"transactionStatusId,omitempty"`
}

func (h *handler) ack(w http.ResponseWriter, r *http.Request, s paycore.Settled, txID int64) {
	a := Ack{Received: true, Duplicate: s.Duplicate, Changed: s.Changed, TransactionID: txID}
	if s.Transaction != nil {
		st := s.Transaction.Status
		a.TransactionStatusID = &st
	}
	httpapi.AddLogAttrs(r, slog.Int64("transaction_id", txID), slog.Bool("duplicate", s.Duplicate), slog.Bool("changed", s.Changed))
	httpapi.WriteJSON(w, http.StatusOK, a)
}

// threeDSFields reads transactionId, paymentRequestId and result.
func threeDSFields(v url.Values, results ...string) (txID, prID int64, result string, err error) {
	var errs fieldErr
	txID = idField(v, "transactionId", true, &errs)
	prID = idField(v, "paymentRequestId", false, &errs)
	result = v.Get("result")
	if !slices.Contains(results, result) {
		errs.add("result", "result must be one of "+strings.Join(results, ", "))
	}
	if len(errs) > 0 {
		return 0, 0, "", errkind.Validation(errs)
	}
	return txID, prID, result, nil
}

// threeDSPost is the 3-D Secure server's (or the sandbox's) result.
func (h *handler) threeDSPost(w http.ResponseWriter, r *http.Request) error {
	v, err := h.signedFields(w, r)
	if err != nil {
		return err
	}
	var errs fieldErr
	eventID := eventIDField(v, &errs)
	txID, prID, result, err := threeDSFields(v, "approve", "fail", "timeout")
	if len(errs) > 0 {
		return errkind.Validation(errs)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	var s paycore.Settled
	if result == "timeout" {
		s, err = h.Service.ExpireChallenge(ctx, eventID, txID, prID)
	} else {
		s, err = h.Service.CompleteChallenge(ctx, eventID, txID, prID, result == "approve")
	}
	if err != nil {
		return h.settleError(err, txID)
	}
	h.ack(w, r, s, txID)
	return nil
}

// threeDSBrowser is the payer's browser following an Approve or Fail link
// of the sandbox challenge page: settle, then go back (303) to the return
// URL when it is allowed, else show the result.
func (h *handler) threeDSBrowser(w http.ResponseWriter, r *http.Request) error {
	v, err := h.signedFields(w, r)
	if err != nil {
		paymentsapi.WriteResultPage(w, http.StatusUnauthorized, nil, nil, "This authentication link is invalid or has expired. Go back and reload the page.")
		return nil
	}
	txID, prID, result, err := threeDSFields(v, "approve", "fail")
	if err != nil {
		paymentsapi.WriteResultPage(w, http.StatusBadRequest, nil, nil, "This authentication link is malformed.")
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	// The signature is unique per link: pressing a button twice is a duplicate.
	eventID := "3ds_" + strconv.FormatInt(txID, 10) + "_" + signatureOf(r)
	s, err := h.Service.CompleteChallenge(ctx, eventID, txID, prID, result == "approve")
	if err != nil {
		if errors.Is(err, paycore.ErrUnknownTransaction) || errors.Is(err, paycore.ErrMismatch) || errors.Is(err, paycore.ErrUnbound) {
			paymentsapi.WriteResultPage(w, http.StatusNotFound, nil, nil, "This authentication does not exist.")
			return nil
		}
		return err
	}
	tx, req := s.Transaction, s.Request
	if tx == nil {
		return errors.New("3-D Secure callback: no transaction")
	}
	if req == nil || req.ID != tx.PaymentRequestID {
		if req, _, err = h.Service.Store.PaymentRequestLease(ctx, tx.PaymentRequestID); err != nil && !errkind.Is(err, errkind.NotFound) {
			return err
		}
	}
	httpapi.AddLogAttrs(r, slog.Int64("transaction_id", txID), slog.Bool("duplicate", s.Duplicate), slog.Bool("changed", s.Changed))
	if target := paycore.ReturnTarget(v.Get("return"), req, tx); target != "" {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, target, http.StatusSeeOther)
		return nil
	}
	paymentsapi.WriteResultPage(w, http.StatusOK, tx, h.Service.FrameOrigins(r.Context(), tx.MerchantID), "")
	return nil
}

func signatureOf(r *http.Request) string {
	if h := r.Header.Get(sig.Header); h != "" {
		_, sigs := sig.ParseHeader(h)
		if len(sigs) > 0 {
			return sigs[0]
		}
	}
	return r.URL.Query().Get(sig.ParamSig)
}

// ---- test echo endpoints ---------------------------------------------------

// Echo is the answer of the test callbacks: what was received.
type Echo struct {
	Method      string              `json:"method"`
	Path        string              `json:"path"`
	ContentType string              `json:"contentType,omitempty"`
	Query       map[string][]string `json:"query,omitempty"`
	Body        any                 `json:"body,omitempty"`
	Form        map[string][]string `json:"form,omitempty"`
}

// echoJSON echoes a JSON body (POST) or the query alone (GET, or a POST
// without a body).
func echoJSON(w http.ResponseWriter, r *http.Request) error {
	var body any
	if r.Method == http.MethodPost {
		if err := httpapi.DecodeOptionalJSON(w, r, &body); err != nil {
			return err
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, Echo{Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"),
		Query: r.URL.Query(), Body: body})
	return nil
}

// echoForm echoes a form: the urlencoded body of a POST, the query of a GET
// (a form notification sent with GET carries its fields in the query).
func echoForm(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodGet {
		httpapi.WriteJSON(w, http.StatusOK, Echo{Method: r.Method, Path: r.URL.Path, Form: r.URL.Query()})
		return nil
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return httpapi.UnsupportedMedia("Send the body as application/x-www-form-urlencoded.")
	}
	body, err := httpapi.ReadBody(w, r, MaxBody)
	if err != nil {
		return err
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return errkind.BadInput("The form body is malformed.", "")
	}
	httpapi.WriteJSON(w, http.StatusOK, Echo{Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"),
		Query: r.URL.Query(), Form: form})
	return nil
}

// echoText answers in plain text: the method and path, then one key=value
// line per query parameter (and, for a POST, per urlencoded body field).
func echoText(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return httpapi.TooLarge(MaxBody)
		}
		return errkind.BadInput("The form body is malformed.", "")
	}
	q := r.Form
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("received " + r.Method + " " + r.URL.Path + "\n")
	for _, k := range keys {
		for _, v := range q[k] {
			b.WriteString(k + "=" + v + "\n")
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, b.String())
	return nil
}
