package paycore_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/merchant"
)

// The 3-D Secure page's Content-Security-Policy takes the merchant's valid
// allowed origins only: values stored before the origin rules (a wildcard,
// an added directive) are dropped, never written into the header.
func TestThreeDSPageFramesOnlyValidStoredOrigins(t *testing.T) {
	m := newMerchant(t, func(m *merchant.Merchant) {
		m.AllowedOrigins = []string{"https://shop.example", "https://*", "https://a.com;sandbox allow-scripts", "https://x.example 'unsafe-inline'"}
	})
	id := createRequest(t, m, "10", "EUR")
	r := pay(t, m, "/payments/walletA/"+strconv.FormatInt(id, 10), payerData("token", "tok_3ds_required"))
	if r.NextAction == nil || r.NextAction.URL == "" {
		t.Fatalf("no 3-D Secure redirect: %+v", r)
	}
	resp, err := http.Get(r.NextAction.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.HasSuffix(csp, "; frame-ancestors 'self' https://shop.example") || strings.Contains(csp, "*") ||
		strings.Contains(csp, "sandbox") || strings.Contains(csp, "unsafe") {
		t.Errorf("%d: CSP %q, want frame-ancestors 'self' https://shop.example and nothing of the stored bad values", resp.StatusCode, csp)
	}
}
