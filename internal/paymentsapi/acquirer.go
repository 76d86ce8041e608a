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
// issuer's page; when the acquirer sent the payer back here (its return_url
// is this page), the transaction is settled from the acquirer's state and
// the payer goes on to the return target or the result page. It reports
// false when the provider has no such challenge.
func (h *handler) acquirerChallenge(w http.ResponseWriter, r *http.Request, tx *payment.Transaction, origins []string) (bool, error) {
	cr, ok := h.Service.ProviderOf(tx).(paycore.ChallengeReader)
	if !ok || tx.ProviderRef == "" {
		return false, nil
	}
	out, err := cr.ChallengeStatus(r.Context(), tx.ProviderRef)
	if err != nil {
		return true, err
	}
	if out.Status == provider.Pending {
		if out.NextAction == nil || !strings.HasPrefix(out.NextAction.URL, "https://") {
			WriteResultPage(w, http.StatusOK, tx, origins, "")
			return true, nil
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, out.NextAction.URL, http.StatusSeeOther)
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
