package paymentsapi

import (
	"net/http"
	"strings"

	"github.com/payreq/payreq/internal/paycore"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// acquirerChallenge serves the service's challenge page for a real
// acquirer. While the challenge is open the payer is sent (303) to the
// issuer's page; when the acquirer sent the payer back here (its return
// URL is this page), the transaction is settled from the acquirer's answer
// and the payer goes on to the return target or the result page. It
// reports false when the provider has no such challenge.
//
// Two kinds of acquirer: one that reads a charge (Stripe,
// paycore.ChallengeReader) is asked for its state; one that cannot (Adyen)
// hands the payer back with a redirectResult, which goes to the acquirer
// unread (provider.ChallengeResult.Details) and whose answer decides, and
// before that its issuer's page is the first answer to the charge's own
// key (Lookup).
func (h *handler) acquirerChallenge(w http.ResponseWriter, r *http.Request, tx *payment.Transaction, origins []string) (bool, error) {
	p := h.Service.ProviderOf(r.Context(), tx) // the connector that charged it
	cr, reads := p.(paycore.ChallengeReader)
	var (
		out provider.Outcome
		err error
	)
	switch rr := r.URL.Query().Get("redirectResult"); {
	case reads && tx.ProviderRef != "":
		out, err = cr.ChallengeStatus(r.Context(), tx.ProviderRef)
	case reads:
		return false, nil
	case rr != "":
		out, err = p.CompleteChallenge(r.Context(), provider.ChallengeResult{Reference: tx.Reference, TransactionID: tx.ID,
			ProviderRef: tx.ProviderRef, Details: map[string]string{"redirectResult": rr}})
	default:
		out, err = p.Lookup(r.Context(), tx.Reference)
	}
	if err != nil && !reads {
		// The acquirer refused the details or did not answer: the attempt
		// stays as it stands (its webhook, or the reconciler, settles it).
		h.Log.Warn("3-D Secure return not confirmed by the acquirer", "transaction_id", tx.ID, "error", err.Error())
		WriteResultPage(w, http.StatusOK, tx, origins, "")
		return true, nil
	}
	if err != nil {
		return true, err
	}
	if out.Status == provider.Pending {
		u := ""
		if out.NextAction != nil {
			u = out.NextAction.URL
		}
		if !strings.HasPrefix(u, "https://") && !(h.AllowHTTPURLs && strings.HasPrefix(u, "http://")) {
			WriteResultPage(w, http.StatusOK, tx, origins, "")
			return true, nil
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, u, http.StatusSeeOther)
		return true, nil
	}
	s, bound, err := h.Service.SettleChallengeReturn(r.Context(), tx, out)
	if !bound {
		// Not this transaction's charge (logged and counted): the payer
		// sees the attempt as it stands; nothing changed.
		WriteResultPage(w, http.StatusOK, tx, origins, "")
		return true, nil
	}
	if err != nil {
		return true, err
	}
	req := s.Request
	if req == nil || req.ID != tx.PaymentRequestID {
		req, _ = h.Service.Store.PaymentRequest(r.Context(), tx.PaymentRequestID)
	}
	st := s.Transaction
	if st == nil {
		st = tx
	}
	if target := paycore.ReturnTarget(r.URL.Query().Get("return"), req, st); target != "" {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, target, http.StatusSeeOther)
		return true, nil
	}
	WriteResultPage(w, http.StatusOK, st, origins, "")
	return true, nil
}
