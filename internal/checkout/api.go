package checkout

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/httpapi"
	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// Bodies of POST /checkout/api/pay/{method}.
type cardBody struct {
	HolderName string `json:"holderName"`
	Number     string `json:"number"`
	Expiry     string `json:"expiry"`
	CVC        string `json:"cvc"`
	Email      string `json:"email"`
}

type walletBody struct {
	Token string `json:"token"`
}

type upiBody struct {
	UPIID string `json:"upiId"`
}

const attemptWindow = 15 * time.Minute

func (h *handler) pay(w http.ResponseWriter, r *http.Request, s *session) error {
	if s.req.Status != payment.RequestUnpaid {
		return notUnpaid(s.req)
	}
	// Pages reached without the token in their address carry a frame ticket
	// instead, so their framing policy still comes from the token.
	frame := h.Tokens.FrameTicket(s.claims)
	a := paycore.Attempt{Hosted: true, CardholderPresent: true, BaseURL: h.baseURL(r),
		ReturnTo: "/checkout?" + url.Values{"requestId": {strconv.FormatInt(s.req.ID, 10)}, "resume": {"1"}, "frame": {frame}}.Encode()}
	switch r.PathValue("method") {
	case "card":
		var b cardBody
		if err := httpapi.DecodeJSON(w, r, &b); err != nil {
			return err
		}
		a.Method = provider.MethodCard
		a.Card = &card.Input{Holder: b.HolderName, Number: b.Number, Expiry: b.Expiry, CVV: b.CVC}
	case "wallet":
		var b walletBody
		if err := httpapi.DecodeJSON(w, r, &b); err != nil {
			return err
		}
		a.Method, a.WalletToken = provider.MethodWallet, b.Token
	case "upi":
		var b upiBody
		if err := httpapi.DecodeJSON(w, r, &b); err != nil {
			return err
		}
		a.Method, a.UPIID = provider.MethodUPI, b.UPIID
	case "qr":
		var b struct{}
		if r.ContentLength != 0 {
			if err := httpapi.DecodeJSON(w, r, &b); err != nil {
				return err
			}
		}
		a.Method = provider.MethodQR
	default:
		return errkind.BadInput("Unknown payment method.", codes.InvalidPaymentMethod)
	}
	if !offered(methods(s.merchant), r.PathValue("method")) {
		return errkind.BadInput("This payment method is not available for this merchant.", codes.InvalidPaymentMethod)
	}
	// Card-testing guard: a bounded number of attempts per request.
	now := h.Now()
	window := now.Unix() / int64(attemptWindow.Seconds())
	if _, err := h.Limiter.TakeRateLimit(r.Context(), "checkout#"+strconv.FormatInt(s.req.ID, 10), window, h.MaxAttempts,
		time.Unix((window+1)*int64(attemptWindow.Seconds()), 0)); err != nil {
		if errkind.Is(err, errkind.RateLimited) {
			e := errkind.Because(errkind.TooManyAttempts,
				"Too many payment attempts for this request; try again later.", "")
			e.RetryAfter = attemptWindow
			return e
		}
		return err
	}
	res, err := h.Payments.Pay(r.Context(), s.merchant, s.req.ID, a)
	if err != nil {
		return pageFields(err)
	}
	if na := res.NextAction; na != nil && na.Type == provider.ActionThreeDSRedirect {
		// The challenge runs in the hosted page's own frame, on our ACS page.
		na.URL = "/checkout/3ds?" + url.Values{"transactionId": {strconv.FormatInt(res.TransactionID, 10)},
			"requestId": {strconv.FormatInt(s.req.ID, 10)}, "frame": {frame}}.Encode()
	}
	out, err := forPage(res)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

func offered(list []string, m string) bool {
	for _, v := range list {
		if v == m {
			return true
		}
	}
	return false
}

// pageFields renames field errors to the page's form fields ("card.number" → "number").
func pageFields(err error) error {
	if e, ok := errkind.As(err); ok {
		for i := range e.Fields {
			e.Fields[i].Field = strings.TrimPrefix(e.Fields[i].Field, "card.")
		}
	}
	return err
}

func (h *handler) status(w http.ResponseWriter, _ *http.Request, s *session) error {
	if s.req.TransactionID == 0 || s.req.TransactionStatus == nil {
		return errkind.NotFoundErr("No payment attempt yet.")
	}
	res := paycore.Result{
		PaymentRequestID: s.req.ID, TransactionID: s.req.TransactionID, PaymentID: strconv.FormatInt(s.req.TransactionID, 10),
		TransactionNumber: s.req.TransactionNumber, TransactionStatusID: *s.req.TransactionStatus, PaymentRequestStatusID: s.req.Status,
	}
	if s.req.LastLog != nil {
		res.LastLog = *s.req.LastLog
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
	return nil
}

// completeChallenge is the sandbox ACS page's answer. The result travels to
// the service the way a real ACS result does: a signed /callbacks/3ds call.
func (h *handler) completeChallenge(w http.ResponseWriter, r *http.Request, s *session) error {
	if !h.Sandbox {
		return errkind.NotFoundErr("There is no simulated 3-D Secure outside the sandbox.")
	}
	var b struct {
		TransactionID json.Number `json:"transactionId"`
		Result        string      `json:"result"`
	}
	if err := httpapi.DecodeJSON(w, r, &b); err != nil {
		return err
	}
	txID, err := strconv.ParseInt(b.TransactionID.String(), 10, 64)
	if err != nil || txID <= 0 || (b.Result != "approve" && b.Result != "fail") {
		return errkind.BadInput(`Send {"transactionId": <id>, "result": "approve" | "fail"}.`, "")
	}
	if txID != s.req.TransactionID {
		return errkind.NotFoundErr("This transaction is not the current attempt of the payment request.")
	}
	if s.req.TransactionStatus == nil || *s.req.TransactionStatus != payment.TxPending {
		return errkind.ConflictErr("This challenge was already answered.", "")
	}
	if err := h.Challenges.CompleteChallenge(r.Context(), s.req.ID, txID, b.Result == "approve"); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
