package stripe

import (
	"context"
	"fmt"
)

// Verify makes a harmless call with the provider's key: it reads the
// account's balance (GET /v1/balance), which every secret key and any
// restricted key with balance read access may do, and moves no money. It
// returns nil when Stripe accepted the key.
func (p *Provider) Verify(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	if _, err := p.c.V1Balance.Retrieve(ctx, nil); err != nil {
		return fmt.Errorf("stripe: read balance: %w", err)
	}
	return nil
}
