package payments

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/sig"
)

// 3-D Secure in this service:
//
//   - A pending attempt that needs a challenge answers with nextAction
//     {type: "threeds_redirect", url, reference}. url is
//     /payments/threeds/redirect/{transactionId}?exp=..&sig=.. on this
//     service: the payer's browser opens it, so it cannot carry the merchant's
//     API key; the HMAC-signed, expiring query authenticates it instead.
//   - In the sandbox that page is the issuer's challenge (ACS) page: its
//     "Approve" and "Fail" links are pre-signed GET callbacks to
//     /callbacks/3ds, signed like every provider callback.
//   - reference is the transaction3dsId ("3ds_<transactionId>") that
//     GET /payments/threeds/status/{transaction3dsId} reports on.

// ThreeDSID is the transaction3dsId of a transaction's challenge.
func ThreeDSID(txID int64) string { return "3ds_" + strconv.FormatInt(txID, 10) }

// ParseThreeDSID accepts "3ds_<transactionId>" or the bare transaction id.
func ParseThreeDSID(s string) (int64, bool) {
	return parsePositive(strings.TrimPrefix(s, "3ds_"))
}

func parsePositive(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != s {
		return 0, false
	}
	return id, true
}

// RedirectPath is the path of the 3-D Secure redirect of a transaction.
func RedirectPath(txID int64) string {
	return "/payments/threeds/redirect/" + strconv.FormatInt(txID, 10)
}

func redirectMAC(key []byte, txID int64, exp string) string {
	return sig.MAC(key, exp, []byte("threeds-redirect:"+strconv.FormatInt(txID, 10)))
}

// ChallengeURL is the signed 3-D Secure redirect URL of transaction txID,
// valid for the challenge window. returnTo (optional) is where the payer
// goes afterwards: a path on this service (the hosted checkout uses its
// own) or the request's successUrl/failureUrl.
func (s *Service) ChallengeURL(baseURL string, txID int64, returnTo string) string {
	exp := strconv.FormatInt(s.Now().Add(s.ChallengeWindow).Unix(), 10)
	v := url.Values{"exp": {exp}, "sig": {redirectMAC(s.ThreeDSKey, txID, exp)}}
	if returnTo != "" {
		v.Set("return", returnTo)
	}
	return strings.TrimRight(baseURL, "/") + RedirectPath(txID) + "?" + v.Encode()
}

// Errors of VerifyChallengeURL.
var (
	ErrLinkInvalid = errors.New("the 3-D Secure link is invalid")
	ErrLinkExpired = errors.New("the 3-D Secure link has expired")
)

// VerifyChallengeURL checks the exp and sig query parameters of a redirect.
func (s *Service) VerifyChallengeURL(txID int64, exp, mac string) error {
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !hmac.Equal([]byte(redirectMAC(s.ThreeDSKey, txID, exp)), []byte(mac)) {
		return ErrLinkInvalid
	}
	if s.Now().Unix() > unix {
		return ErrLinkExpired
	}
	return nil
}

// ChallengeLink is a pre-signed GET to /callbacks/3ds answering the
// challenge of tx with result ("approve" or "fail").
func (s *Service) ChallengeLink(tx *payment.Transaction, result, returnTo string) string {
	v := url.Values{
		"transactionId":    {strconv.FormatInt(tx.ID, 10)},
		"paymentRequestId": {strconv.FormatInt(tx.PaymentRequestID, 10)},
		"result":           {result},
	}
	if returnTo != "" {
		v.Set("return", returnTo)
	}
	return "/callbacks/3ds?" + sig.SignQuery(s.CallbackKey, v, s.Now())
}

// ReturnTarget decides where the payer goes after a challenge: returnTo when
// it is a path on this service or one of the request's own URLs, else the
// request's successUrl (approved) or failureUrl (declined); "" shows the
// result page. A relative target gets transactionId and
// transactionStatusId appended. Nothing else is ever redirected to, so the
// callback cannot be used as an open redirect.
func ReturnTarget(returnTo string, req *payment.Request, tx *payment.Transaction) string {
	if returnTo != "" {
		if LocalPath(returnTo) {
			u, _ := url.Parse(returnTo)
			q := u.Query()
			q.Set("transactionId", strconv.FormatInt(tx.ID, 10))
			q.Set("transactionStatusId", strconv.Itoa(int(tx.Status)))
			u.RawQuery = q.Encode()
			return u.String()
		}
		if req != nil && (returnTo == req.SuccessURL || returnTo == req.FailureURL) {
			return returnTo
		}
	}
	if req == nil {
		return ""
	}
	if tx.Status == payment.TxApproved {
		return req.SuccessURL
	}
	if tx.Status == payment.TxDeclined {
		return req.FailureURL
	}
	return ""
}

// LocalPath reports whether s is an absolute path on this host: "/x", not
// "//host/x", no scheme, no backslashes or control characters.
func LocalPath(s string) bool {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n\t") || len(s) > 2048 {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "" && u.Host == "" && u.User == nil
}

// ---- pages -----------------------------------------------------------------

// The payer pages are rendered with explicit escaping rather than
// html/template: its reflection keeps every exported method of every type in
// the binary alive, which would cost the function about 4 MiB.
const pageStyle = `body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1d2433}
.box{border:1px solid #d0d7e2;border-radius:8px;padding:1.5rem}
.tag{display:inline-block;background:#fff3cd;color:#7a5b00;border-radius:4px;padding:.1rem .4rem;font-size:.8rem}
a.btn{display:inline-block;margin:.5rem .5rem 0 0;padding:.6rem 1.2rem;border-radius:6px;text-decoration:none;color:#fff}
a.ok{background:#1a7f37} a.ko{background:#b42318}
dl{display:grid;grid-template-columns:auto 1fr;gap:.3rem 1rem}`

func renderPage(w io.Writer, d pageData) {
	e := html.EscapeString
	var b strings.Builder
	b.WriteString(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>` + e(d.Title) + `</title>
<style nonce="` + e(d.Nonce) + `">
` + pageStyle + `
</style></head><body><main class="box">
`)
	if d.Challenge {
		b.WriteString(`<p class="tag">Sandbox issuer — no real bank is contacted</p>
<h1>3-D Secure authentication</h1>
<dl><dt>Amount</dt><dd>` + e(d.Amount) + ` ` + e(d.Unit) + `</dd><dt>Transaction</dt><dd>` + e(d.Number) + `</dd>`)
		if d.Card != "" {
			b.WriteString(`<dt>Card</dt><dd>` + e(d.Card) + `</dd>`)
		}
		b.WriteString(`</dl>
<p>Choose the outcome of this authentication.</p>
<p><a class="btn ok" id="approve" href="` + e(d.ApproveURL) + `">Approve</a><a class="btn ko" id="fail" href="` + e(d.FailURL) + `">Fail</a></p>
`)
	} else {
		b.WriteString(`<h1>` + e(d.Title) + `</h1><p id="result" data-status="` + strconv.Itoa(d.Status) + `">` + e(d.Message) + `</p>`)
		if d.Number != "" {
			b.WriteString(`<p>Transaction ` + e(d.Number) + `</p>`)
		}
		b.WriteString("\n")
	}
	b.WriteString(`</main></body></html>`)
	_, _ = io.WriteString(w, b.String())
}

type pageData struct {
	Title, Nonce         string
	Challenge            bool
	Amount, Unit, Number string
	Card                 string
	ApproveURL, FailURL  string
	Status               int
	Message              string
}

// pageHeaders: no script at all, styles only with the page's nonce, no
// forms, framing only by this service and the merchant's registered origins
// (the hosted checkout runs the challenge inside its iframe).
func pageHeaders(w http.ResponseWriter, nonce string, frameAncestors []string) {
	fa := "'self'"
	for _, o := range frameAncestors {
		fa += " " + o
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+nonce+"'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors "+fa)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// writeChallengePage serves the sandbox issuer's challenge for tx.
func (s *Service) writeChallengePage(w http.ResponseWriter, tx *payment.Transaction, returnTo string, origins []string) {
	d := pageData{Title: "3-D Secure authentication", Nonce: newNonce(), Challenge: true,
		Amount: string(payment.DisplayAmount(tx.Amount, tx.Unit)), Unit: tx.Unit, Number: tx.Number,
		ApproveURL: s.ChallengeLink(tx, "approve", returnTo),
		FailURL:    s.ChallengeLink(tx, "fail", returnTo)}
	if tx.Card != nil {
		d.Card = tx.Card.String()
	}
	pageHeaders(w, d.Nonce, origins)
	w.WriteHeader(http.StatusOK)
	renderPage(w, d)
}

// WriteResultPage shows the state of a transaction to a payer's browser
// (the end of a 3-D Secure challenge without a return URL). tx may be nil.
func WriteResultPage(w http.ResponseWriter, status int, tx *payment.Transaction, origins []string, note string) {
	d := pageData{Title: "Payment", Nonce: newNonce(), Message: note}
	if tx != nil {
		d.Number, d.Status = tx.Number, int(tx.Status)
		switch tx.Status {
		case payment.TxApproved:
			d.Title, d.Message = "Payment approved", "The payment was approved. You can close this page."
		case payment.TxDeclined:
			d.Title, d.Message = "Payment declined", "The payment was declined: "+tx.Message+"."
		case payment.TxPending:
			d.Title, d.Message = "Payment pending", "The payment is still being processed."
		}
	}
	pageHeaders(w, d.Nonce, origins)
	w.WriteHeader(status)
	renderPage(w, d)
}

// FrameOrigins are the origins allowed to frame the payer pages of a
// merchant's transaction (best effort: none when the merchant is unknown).
func (s *Service) FrameOrigins(r *http.Request, merchantID string) []string {
	m, err := s.Store.Merchant(r.Context(), merchantID)
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range m.AllowedOrigins {
		if !strings.ContainsAny(o, " ;'\"") {
			out = append(out, o)
		}
	}
	return out
}
