package stripe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	sg "github.com/stripe/stripe-go/v83"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// The routing table: which Stripe payment method serves each of the
// service's operations, by currency where that decides (docs/stripe.md,
// "Routing"). Which of these a merchant may use is its configuration
// (merchant.Methods); a request the table cannot serve in its currency is
// refused with 020 before any call.
//
//	card (hosted page, PayCheckout, batch)          card                 any currency
//	wallet (/payments/walletA, selectors 44-59)     card, from the       any currency
//	                                                wallet's Stripe token
//	UPI (selectors 30, 31)                          upi                  INR
//	QR (/payments/qr)                               pix BRL, promptpay THB, paynow SGD,
//	                                                wechat_pay CNY, upi INR
//	alternative 27                                  cashapp              USD
//	alternative 43                                  swish                SEK
type route struct {
	method     provider.Method
	selector   int    // 0: every selector of the method
	currencies string // "": any currency
	pmType     string // Stripe's payment method type
}

var routes = []route{
	{provider.MethodCard, 0, "", "card"},
	{provider.MethodWallet, 0, "", "card"},
	{provider.MethodUPI, 0, "INR", "upi"},
	{provider.MethodQR, 0, "BRL", "pix"},
	{provider.MethodQR, 0, "THB", "promptpay"},
	{provider.MethodQR, 0, "SGD", "paynow"},
	{provider.MethodQR, 0, "CNY", "wechat_pay"},
	{provider.MethodQR, 0, "INR", "upi"},
	{provider.MethodAlternative, 27, "USD", "cashapp"},
	{provider.MethodAlternative, 43, "SEK", "swish"},
}

// Serves reports whether some route serves method m.
func (p *Provider) Serves(m provider.Method) bool {
	return slices.ContainsFunc(routes, func(r route) bool { return r.method == m })
}

var _ provider.MethodServer = (*Provider)(nil)

// routeOf is the Stripe payment method type of method m, selector n, in
// unit; a *provider.AmountError (020 on unit) when no route serves that
// currency, ErrInvalidRequest when none serves the method.
func routeOf(m provider.Method, n int, unit string) (string, error) {
	code := strings.ToUpper(unit)
	served := []string{}
	for _, r := range routes {
		if r.method != m || (r.selector != 0 && r.selector != n) {
			continue
		}
		if r.currencies == "" || r.currencies == code {
			return r.pmType, nil
		}
		served = append(served, r.currencies)
	}
	if len(served) == 0 {
		return "", fmt.Errorf("%w: no Stripe payment method serves %s (selector %d)", provider.ErrInvalidRequest, m, n)
	}
	return "", &provider.AmountError{Field: "unit", Code: codes.CurrencyNotAllowed,
		Detail: fmt.Sprintf("This payment method takes %s only, not %s.", strings.Join(served, ", "), code)}
}

// CheckRoute refuses, before anything is written, a method the table
// cannot serve in unit (provider.RouteChecker).
func (p *Provider) CheckRoute(m provider.Method, selector int, unit string) error {
	_, err := routeOf(m, selector, unit)
	return err
}

var _ provider.RouteChecker = (*Provider)(nil)

// notRefundable are the payment method types Stripe cannot refund through
// its Refunds API: PromptPay has no native refund (Stripe can only e-mail
// the payer instructions, its Refunds API's instructions_email), so such a
// payment is refunded by the merchant from the Stripe Dashboard.
var notRefundable = map[string]string{
	"promptpay": "PromptPay payments have no refund through Stripe's API (Stripe can only e-mail the payer refund instructions); refund it from the Stripe Dashboard.",
}

// CheckRefund refuses the refund of a method Stripe cannot refund
// (provider.RefundChecker).
func (p *Provider) CheckRefund(m provider.Method, selector int, unit string) error {
	pmType, err := routeOf(m, selector, unit)
	if err != nil {
		return nil // not routed today: Stripe answers for what it charged
	}
	if why, ok := notRefundable[pmType]; ok {
		return fmt.Errorf("%s", why)
	}
	return nil
}

var _ provider.RefundChecker = (*Provider)(nil)

// qrAction is the payer's next step of an intent waiting for a QR code
// or an app (the sandbox's shapes: qr with its payload, upi_collect), and
// how long the code is valid (0: unknown).
func qrAction(pi *sg.PaymentIntent) (*provider.NextAction, time.Duration) {
	na := pi.NextAction
	if na == nil {
		return nil, 0
	}
	qr := func(data, url string, expires int64) (*provider.NextAction, time.Duration) {
		var left time.Duration
		if expires > 0 {
			left = time.Until(time.Unix(expires, 0))
		}
		return &provider.NextAction{Type: provider.ActionQR, QRPayload: data, URL: url, Reference: pi.ID}, left
	}
	switch {
	case na.PixDisplayQRCode != nil:
		c := na.PixDisplayQRCode
		return qr(c.Data, c.HostedInstructionsURL, c.ExpiresAt)
	case na.PromptPayDisplayQRCode != nil:
		c := na.PromptPayDisplayQRCode
		return qr(c.Data, c.HostedInstructionsURL, 0)
	case na.PayNowDisplayQRCode != nil:
		c := na.PayNowDisplayQRCode
		return qr(c.Data, c.HostedInstructionsURL, 0)
	case na.WeChatPayDisplayQRCode != nil:
		c := na.WeChatPayDisplayQRCode
		return qr(c.Data, c.HostedInstructionsURL, 0)
	case na.SwishHandleRedirectOrDisplayQRCode != nil:
		c := na.SwishHandleRedirectOrDisplayQRCode
		data := c.MobileAuthURL
		if c.QRCode != nil && c.QRCode.Data != "" {
			data = c.QRCode.Data
		}
		return qr(data, c.HostedInstructionsURL, 0)
	case na.CashAppHandleRedirectOrDisplayQRCode != nil:
		c := na.CashAppHandleRedirectOrDisplayQRCode
		var expires int64
		if c.QRCode != nil {
			expires = c.QRCode.ExpiresAt
		}
		return qr(c.MobileAuthURL, c.HostedInstructionsURL, expires)
	case string(na.Type) == "upi_handle_redirect_or_display_qr_code":
		// Not in stripe-go v83's types: read from the intent's JSON.
		var raw struct {
			NextAction struct {
				UPI struct {
					HostedInstructionsURL string `json:"hosted_instructions_url"`
					QRCode                struct {
						Data      string `json:"data"`
						ExpiresAt int64  `json:"expires_at"`
					} `json:"qr_code"`
				} `json:"upi_handle_redirect_or_display_qr_code"`
			} `json:"next_action"`
		}
		if pi.LastResponse != nil {
			_ = json.Unmarshal(pi.LastResponse.RawJSON, &raw)
		}
		u := raw.NextAction.UPI
		a, left := qr(u.QRCode.Data, u.HostedInstructionsURL, u.QRCode.ExpiresAt)
		a.Type = provider.ActionUPICollect
		return a, left
	}
	return nil, 0
}
