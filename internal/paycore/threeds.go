package paycore

import (
	"context"
	"crypto/hmac"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/payreq/payreq/internal/merchant"
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
	return ParseID(strings.TrimPrefix(s, "3ds_"))
}

// ParseID reads a positive decimal id written without sign or leading zeros.
func ParseID(s string) (int64, bool) {
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

// FrameOrigins are the origins allowed to frame the payer pages of a
// merchant's transaction (best effort: none when the merchant is unknown):
// its valid allowed origins only (merchant.HeaderOrigins).
func (s *Service) FrameOrigins(ctx context.Context, merchantID string) []string {
	m, err := s.merch.Merchant(ctx, merchantID)
	if err != nil {
		return nil
	}
	return merchant.HeaderOrigins(ctx, s.Log, m)
}
