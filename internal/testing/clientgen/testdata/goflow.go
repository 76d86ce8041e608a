// A merchant's program written against the client oapi-codegen generates
// from docs/openapi.yaml (package payreq, default configuration). The test
// builds it in a scratch module and runs it against the local stack; it
// prints what it observed as JSON for the test to check.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"clientflow/payreq"
)

type problem struct {
	Status     int    `json:"status"`
	Type       string `json:"type"`
	Code       string `json:"code"`
	RetryAfter int    `json:"retryAfter,omitempty"`
}

type summary struct {
	RequestID             int64              `json:"requestId"`
	Replayed              bool               `json:"replayed"`
	ReplayedSameID        bool               `json:"replayedSameId"`
	Amount                string             `json:"amount"`
	StatusTransactionNull bool               `json:"statusTransactionNull"`
	SessionToken          bool               `json:"sessionToken"`
	PaymentURL            string             `json:"paymentUrl"`
	PaymentID             string             `json:"paymentId"`
	TransactionID         int64              `json:"transactionId"`
	TransactionNumber     string             `json:"transactionNumber"`
	TransactionStatusID   int                `json:"transactionStatusId"`
	PaidStatusID          int                `json:"paidStatusId"`
	PaidTransactionID     int64              `json:"paidTransactionId"`
	CardStatusID          int                `json:"cardStatusId"`
	TxByID                int64              `json:"txById"`
	TxByIDAmount          string             `json:"txByIdAmount"`
	TxByNumber            int64              `json:"txByNumber"`
	CancelledID           int64              `json:"cancelledId"`
	CancelledStatusID     int                `json:"cancelledStatusId"`
	Amounts               map[string]string  `json:"amounts"`
	Problems              map[string]problem `json:"problems"`
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "goflow: "+format+"\n", a...)
	os.Exit(1)
}

func client(base, key string) *payreq.ClientWithResponses {
	c, err := payreq.NewClientWithResponses(base, payreq.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		return nil
	}))
	if err != nil {
		fail("client: %v", err)
	}
	return c
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func fromProblem(p *payreq.Problem) problem {
	out := problem{Status: p.Status, Type: p.Type}
	if p.Code != nil {
		out.Code = string(*p.Code)
	}
	return out
}

func create(ctx context.Context, c *payreq.ClientWithResponses, amount, unit string, key *string) *payreq.CreatePaymentRequestResponse {
	var a payreq.Amount
	check(a.FromAmount1(amount), "amount")
	name, ref := "Coffee Corner", "order-"+unit
	res, err := c.CreatePaymentRequestWithResponse(ctx, &payreq.CreatePaymentRequestParams{IdempotencyKey: key},
		payreq.CreatePaymentRequestJSONRequestBody{Amount: a, Unit: unit, RecipientName: &name, ReferenceId: &ref})
	check(err, "create")
	if res.JSON201 == nil {
		fail("create %s %s: %d %s", amount, unit, res.StatusCode(), res.Body)
	}
	return res
}

func main() {
	ctx := context.Background()
	base := os.Getenv("PAYREQ_API")
	c := client(base, os.Getenv("PAYREQ_KEY"))
	var s summary

	// Create with an Idempotency-Key, then the same again: the replay.
	key := "order-1042-" + os.Getenv("PAYREQ_RUN")
	first := create(ctx, c, "25.00", "EUR", &key)
	again := create(ctx, c, "25.00", "EUR", &key)
	s.RequestID = first.JSON201.Id
	s.Amount = first.JSON201.Amount.String()
	s.Replayed = again.Headers201 != nil && again.Headers201.IdempotentReplayed != nil && *again.Headers201.IdempotentReplayed == "true"
	s.ReplayedSameID = again.JSON201.Id == first.JSON201.Id

	st, err := c.GetPaymentRequestStatusWithResponse(ctx, s.RequestID)
	check(err, "status")
	if st.JSON200 == nil {
		fail("status: %d %s", st.StatusCode(), st.Body)
	}
	s.StatusTransactionNull = st.JSON200.TransactionId == nil && st.JSON200.TransactionNumber == nil && st.JSON200.TransactionStatusId == nil

	sess, err := c.CreateCheckoutSessionWithResponse(ctx, s.RequestID, &payreq.CreateCheckoutSessionParams{}, payreq.CreateCheckoutSessionJSONRequestBody{})
	check(err, "checkout session")
	if sess.JSON201 == nil {
		fail("checkout session: %d %s", sess.StatusCode(), sess.Body)
	}
	s.SessionToken, s.PaymentURL = sess.JSON201.Token != "", sess.JSON201.PaymentUrl

	// Host-to-host: a sandbox card that approves, paying the request.
	var reqID payreq.HostToHostPayment_PaymentRequestId
	check(reqID.FromHostToHostPaymentPaymentRequestId0(s.RequestID), "paymentRequestId")
	holder := "Ann Lee"
	body := payreq.PayHostToHostJSONRequestBody{
		Name: "Ann Lee", Email: "ann@example.com", PhoneNumber: "4915112345678", Address: "1 Market Street",
		City: "Berlin", State: "BE", PostalCode: "10115", Country: "DE", PaymentRequestId: &reqID,
	}
	body.Card = &struct {
		Cvc        string  `json:"cvc"`
		Expiry     string  `json:"expiry"`
		HolderName *string `json:"holderName,omitempty"`
		Number     string  `json:"number"`
	}{Cvc: "123", Expiry: "12/39", HolderName: &holder, Number: "4111111111111111"}
	payKey := "pay-" + key
	pay, err := c.PayHostToHostWithResponse(ctx, 1, &payreq.PayHostToHostParams{IdempotencyKey: &payKey}, body)
	check(err, "h2h payment")
	if pay.JSON200 == nil {
		fail("h2h payment: %d %s", pay.StatusCode(), pay.Body)
	}
	s.PaymentID, s.TransactionID = pay.JSON200.PaymentId, pay.JSON200.TransactionId
	s.TransactionNumber, s.TransactionStatusID = pay.JSON200.TransactionNumber, int(pay.JSON200.TransactionStatusId)

	paid, err := c.GetPaymentRequestStatusWithResponse(ctx, s.RequestID)
	check(err, "status after payment")
	if paid.JSON200 == nil || paid.JSON200.TransactionId == nil {
		fail("status after payment: %d %s", paid.StatusCode(), paid.Body)
	}
	s.PaidStatusID, s.PaidTransactionID = int(paid.JSON200.PaymentRequestStatusId), *paid.JSON200.TransactionId

	// Lookups: the card payment's status and GET /transactions/{id} by id
	// and by transaction number.
	paymentID, err := strconv.ParseInt(s.PaymentID, 10, 64)
	check(err, "paymentId")
	card, err := c.GetCardPaymentStatusWithResponse(ctx, paymentID)
	check(err, "card status")
	if card.JSON200 == nil {
		fail("card status: %d %s", card.StatusCode(), card.Body)
	}
	s.CardStatusID = int(card.JSON200.TransactionStatusId)
	byID, err := c.GetTransactionWithResponse(ctx, s.PaymentID)
	check(err, "transaction by id")
	if byID.JSON200 == nil {
		fail("transaction by id: %d %s", byID.StatusCode(), byID.Body)
	}
	s.TxByID, s.TxByIDAmount = byID.JSON200.Id, byID.JSON200.Amount.String()
	byNumber, err := c.GetTransactionWithResponse(ctx, s.TransactionNumber)
	check(err, "transaction by number")
	if byNumber.JSON200 == nil {
		fail("transaction by number: %d %s", byNumber.StatusCode(), byNumber.Body)
	}
	s.TxByNumber = byNumber.JSON200.Id

	// Cancel another request.
	other := create(ctx, c, "10.00", "EUR", nil)
	cancel, err := c.CancelPaymentRequestWithResponse(ctx, other.JSON201.Id, &payreq.CancelPaymentRequestParams{}, payreq.CancelPaymentRequestJSONRequestBody{})
	check(err, "cancel")
	if cancel.JSON200 == nil {
		fail("cancel: %d %s", cancel.StatusCode(), cancel.Body)
	}
	s.CancelledID, s.CancelledStatusID = cancel.JSON200.Id, int(cancel.JSON200.PaymentRequestStatusId)

	// Amounts beyond a float32, beyond a double, and 18 decimal places, as
	// decoded by the generated types.
	s.Amounts = map[string]string{}
	for _, a := range [][2]string{{"1234567.89", "EUR"}, {"16777217", "JPY"}, {"999999999999999.99", "EUR"},
		{"999999999999999", "JPY"}, {"0.123456789012345678", "ETH"}} {
		res := create(ctx, c, a[0], a[1], nil)
		got, err := c.GetPaymentRequestStatusWithResponse(ctx, res.JSON201.Id)
		check(err, "status of "+a[0])
		if got.JSON200 == nil {
			fail("status of %s: %d %s", a[0], got.StatusCode(), got.Body)
		}
		s.Amounts[a[0]+" "+a[1]] = got.JSON200.Amount.String()
	}

	// Problems, each decoded into the generated type of its status.
	s.Problems = map[string]problem{}
	var zero payreq.Amount
	check(zero.FromAmount1("0"), "amount")
	bad, err := c.CreatePaymentRequestWithResponse(ctx, nil, payreq.CreatePaymentRequestJSONRequestBody{Amount: zero, Unit: "EUR"})
	check(err, "400")
	if bad.ApplicationproblemJSON400 == nil {
		fail("want a 400 problem: %d %s", bad.StatusCode(), bad.Body)
	}
	s.Problems["400"] = fromProblem(bad.ApplicationproblemJSON400)
	unauth, err := client(base, "prk_test_not-a-key").GetPaymentRequestStatusWithResponse(ctx, s.RequestID)
	check(err, "401")
	if unauth.ApplicationproblemJSON401 == nil {
		fail("want a 401 problem: %d %s", unauth.StatusCode(), unauth.Body)
	}
	s.Problems["401"] = fromProblem(unauth.ApplicationproblemJSON401)
	missing, err := c.GetTransactionWithResponse(ctx, "1")
	check(err, "404")
	if missing.ApplicationproblemJSON404 == nil {
		fail("want a 404 problem: %d %s", missing.StatusCode(), missing.Body)
	}
	s.Problems["404"] = fromProblem(missing.ApplicationproblemJSON404)
	limited := client(base, os.Getenv("PAYREQ_LIMITED_KEY"))
	for i := 0; i < 10; i++ {
		res, err := limited.GetPaymentRequestStatusWithResponse(ctx, 1)
		check(err, "429")
		if res.ApplicationproblemJSON429 != nil {
			p := fromProblem(res.ApplicationproblemJSON429)
			if res.Headers429 != nil && res.Headers429.RetryAfter != nil {
				p.RetryAfter = *res.Headers429.RetryAfter
			}
			s.Problems["429"] = p
			break
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(s); err != nil {
		fail("%v", err)
	}
}
