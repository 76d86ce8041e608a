package paycore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/routing"
	"github.com/payreq/payreq/internal/testenv"
)

// Through the real stack (gateway, functions, DynamoDB Local): an attempt
// the merchant's routing sends to a connector the stage does not configure
// (the local stack is a sandbox stage: "sandbox" only) is answered 400 046
// as a problem, and nothing of it stays written; an attempt routed to
// "sandbox" is charged there and shows its connector.
func TestRoutingToAnUnconfiguredConnectorAnswers046(t *testing.T) {
	ctx := context.Background()
	routed := newMerchant(t, func(m *merchant.Merchant) {
		m.Routing = routing.Rules{Rules: []routing.Rule{{Methods: []string{"card"}, Connector: "sandbox"}}, Default: "adyen"}
	})
	st := store(t)

	check046 := func(what string, resp testenv.Response) {
		t.Helper()
		if resp.Status != 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("%s: %d %s %s, want a 400 problem", what, resp.Status, resp.Header.Get("Content-Type"), resp.Body)
		}
		if p := resp.JSON(t); p["code"] != "046" || !strings.Contains(p["detail"].(string), `"adyen"`) {
			t.Fatalf("%s: problem %s, want code 046 naming the connector", what, resp.Body)
		}
	}

	// An existing request: the lease the attempt took is given back.
	id := createRequest(t, routed, "10.00", "EUR")
	check046("walletA on a request", testenv.Do(t, "POST", base(t)+"/payments/walletA/"+strconv.FormatInt(id, 10), routed.APIKey,
		payerData("token", "tok_success")))
	if txs, err := st.TransactionsOfRequest(ctx, id); err != nil || len(txs) != 0 {
		t.Fatalf("transactions of the refused attempt: %d %v", len(txs), err)
	}
	req, lease, err := st.PaymentRequestLease(ctx, id)
	if err != nil || req.Status != 2 || lease.TransactionID != 0 {
		t.Fatalf("request after the refused attempt: %+v lease %+v %v", req, lease, err)
	}

	// Amount and unit in the body: not even the request is written.
	q := payment.Query{MerchantID: routed.ID, Limit: 100}
	before, _, _ := st.PaymentRequestsOf(ctx, q)
	check046("h2h create and pay", testenv.Do(t, "POST", base(t)+"/payments/h2h/27", routed.APIKey,
		payerData("amount", 10, "unit", "EUR")))
	if after, _, _ := st.PaymentRequestsOf(ctx, q); len(after) != len(before) || len(after) != 1 {
		t.Fatalf("create and pay refused with 046 wrote a request: %d → %d", len(before), len(after))
	}

	// The card rule routes to the sandbox: charged, and shown.
	r := pay(t, routed, "/payments/h2h/1", payerData("amount", 10, "unit", "EUR",
		"card", map[string]any{"number": "4111111111111111", "expiry": "12/39", "cvc": "123"}))
	view := testenv.Do(t, "GET", base(t)+"/transactions/"+strconv.FormatInt(r.TransactionID, 10), routed.APIKey, nil)
	if view.Status != 200 || view.JSON(t)["connector"] != "sandbox" {
		t.Fatalf("GET /transactions/%d: %d %s, want connector sandbox", r.TransactionID, view.Status, view.Body)
	}
}
