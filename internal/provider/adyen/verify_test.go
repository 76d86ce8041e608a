package adyen_test

import (
	"context"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/provider/adyen"
)

// TestVerifyChecksTheAccount: the harmless call made when a merchant's
// Adyen account is saved passes Prism's validation against Adyen's
// description and tells a working account from a wrong key and from a key
// that does not reach the merchant account.
func TestVerifyChecksTheAccount(t *testing.T) {
	m := startMock(t)
	m.Front.SetMerchantAccount(testAccount)
	defer m.Front.SetMerchantAccount("")
	ctx := context.Background()
	if err := newProvider(t, m, nil).Verify(ctx); err != nil {
		t.Fatalf("a working account: %v", err)
	}
	for name, tune := range map[string]func(*adyen.Options){
		"wrong API key":          func(o *adyen.Options) { o.APIKey = "AQE_wrong_key_0000000000" },
		"other merchant account": func(o *adyen.Options) { o.MerchantAccount = "SomeoneElsesAccount" },
	} {
		err := newProvider(t, m, tune).Verify(ctx)
		if err == nil {
			t.Fatalf("%s: verified", name)
		}
		if strings.Contains(err.Error(), "422") {
			t.Fatalf("%s: Prism refused the request itself: %v", name, err)
		}
	}
}
