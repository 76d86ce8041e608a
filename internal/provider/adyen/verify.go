package adyen

import (
	"context"
	"fmt"
	"time"
)

// Verify makes a harmless call with the provider's API key and merchant
// account: it lists the account's payment methods (POST /paymentMethods),
// which moves no money and fails when the key is wrong (401), lacks the
// Checkout role (403) or does not reach the merchant account (403, 901).
// It returns nil when Adyen accepted them.
func (p *Provider) Verify(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	key := p.opts.KeyPrefix + ":verify:" + time.Now().UTC().Format("20060102T150405.000000000")
	var out struct {
		PaymentMethods []struct {
			Type string `json:"type"`
		} `json:"paymentMethods"`
	}
	if err := p.post(ctx, "/paymentMethods", key, map[string]any{"merchantAccount": p.opts.MerchantAccount}, &out); err != nil {
		return fmt.Errorf("adyen: list payment methods: %w", err)
	}
	return nil
}
