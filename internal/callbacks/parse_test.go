package callbacks

import (
	"net/url"
	"testing"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

func TestParseResult(t *testing.T) {
	ok := func(kv ...string) url.Values {
		v := url.Values{"eventId": {"e1"}, "transactionId": {"42"}, "status": {"approved"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	r, err := ParseResult(ok("paymentRequestId", "7", "code", "005"))
	if err != nil || r.Status != provider.Approved || r.TransactionID != 42 || r.PaymentRequestID != 7 || r.Code != "" {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = ParseResult(ok("status", "2"))
	if err != nil || r.Status != provider.Declined || r.Code != codes.DeclinedContactIssuer {
		t.Fatalf("declined without code: %+v %v", r, err)
	}
	r, err = ParseResult(ok("status", "failed", "code", "013"))
	if err != nil || r.Code != codes.AuthenticationTimeout {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []url.Values{
		ok("status", "pending"), ok("status", ""), ok("transactionId", "x"), ok("transactionId", "-1"),
		ok("eventId", ""), ok("code", "1234"), ok("paymentRequestId", "abc"),
	} {
		if _, err := ParseResult(bad); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

func TestRoutes(t *testing.T) {
	if got := len(Routes()); got != 16 {
		t.Fatalf("%d routes: %v", got, Routes())
	}
}
