package paycore

import (
	"context"

	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
)

// ChallengeReader is implemented by acquirer connectors whose 3-D Secure
// challenge runs on the issuer's page (Stripe): it reads the charge's
// current state, next action included, without settling anything.
type ChallengeReader interface {
	ChallengeStatus(ctx context.Context, providerRef string) (provider.Outcome, error)
}

// SettleChallengeReturn settles tx from the acquirer's state out when the
// payer comes back from the issuer's challenge page. ok is false when out
// is not tx's charge (bind logs and counts it): nothing changed.
func (s *Service) SettleChallengeReturn(ctx context.Context, tx *payment.Transaction, out provider.Outcome) (st Settled, ok bool, err error) {
	if err := s.bind(tx, out.ProviderRef, out.Facts, false, "3-D Secure return"); err != nil {
		return Settled{}, false, nil
	}
	if st, late, err := s.lateSuccess(ctx, tx, out.Status, out.ProviderRef); late {
		return st, true, err // succeeded after the attempt was declined: voided
	}
	tds := payment.ThreeDSFailed
	if out.Status == provider.Approved {
		tds = payment.ThreeDSAuthenticated
	}
	st, err = s.settleWith(ctx, tx, out, tds)
	return st, true, err
}
