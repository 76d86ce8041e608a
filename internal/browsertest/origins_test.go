package browsertest_test

import (
	"strings"
	"testing"
	"time"

	bt "github.com/payreq/payreq/internal/browsertest"
	pmerchant "github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/testenv"
)

// A wildcard among a merchant's stored allowed origins (a value saved
// before the origin rules; "https://*" lets any HTTPS site on port 443 frame
// the card form, and "http://*:*", stored here, any http page on any port,
// the local pages included) frames nothing: the hosted page's frame-ancestors lists the valid origins only,
// so Chromium shows the card form in the registered shop and blocks it in a
// page on any other origin.
func TestStoredWildcardOriginFramesNothing(t *testing.T) {
	api := testenv.Stack(t).Info.APIBase
	browser := bt.New(t)
	shop := startShop(t, api)
	m := testenv.NewMerchant(t, func(m *pmerchant.Merchant) { m.AllowedOrigins = []string{shop.Origin, "http://*:*"} })
	b := &backend{api: api, m: m, shop: shop}

	s := openShop(t, browser, shop)
	s.open(t, "inline", b.session(t, b.createRequest(t, "17.50")))
	s.ready(t)
	bt.Eval[void](t, s.ctx, `PayCheckout.destroy()`)

	rogue := startShop(t, api) // the same page, on a port the merchant did not register
	r := openShop(t, browser, rogue)
	r.open(t, "inline", b.session(t, b.createRequest(t, "17.50")))
	var blocked string
	for deadline := time.Now().Add(10 * time.Second); blocked == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, _, _, _, failed := r.log.snapshot()
		for _, f := range failed {
			if strings.HasPrefix(f, api+"/checkout?") && strings.Contains(f, "ERR_BLOCKED_BY_RESPONSE") {
				blocked = f
			}
		}
	}
	if blocked == "" {
		_, _, _, logs, failed := r.log.snapshot()
		t.Errorf("the rogue page's frame was not blocked (log %q, failed loads %q)", logs, failed)
	}
	time.Sleep(2 * time.Second) // payment.ready would have come by now
	if ok, err := bt.FrameEvalErr[bool](r.ctx, "", `!!document.getElementById('cc-number')`); err == nil && ok {
		t.Error("the card form rendered inside the rogue page's iframe")
	}
	if n := r.log.requested("/checkout/api/"); n != 0 {
		t.Errorf("%d checkout API calls from the blocked frame", n)
	}
}
