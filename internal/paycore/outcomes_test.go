package paycore_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox"
	"github.com/payreq/payreq/internal/testenv"
)

// Every published sandbox input (docs/sandbox.md, from
// sandbox.TestData) through its HTTP operation on the local stack, including
// 3-D Secure challenges answered on the challenge page and asynchronous
// results delivered by the sandbox function through signed callbacks.
func TestSandboxOutcomesOverHTTP(t *testing.T) {
	m := newMerchant(t)
	for _, tc := range sandbox.TestData() {
		if tc.Batch {
			continue // batch rows: see TestBatchCardsCannotChallenge
		}
		name := string(tc.Method) + " " + tc.Input + " " + string(tc.Answer)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var res result
			switch tc.Method {
			case provider.MethodCard:
				res = pay(t, m, "/payments/h2h/1", map[string]any{"amount": "12.50", "unit": "EUR", "successUrl": "https://shop.example/ok",
					"card": map[string]any{"number": tc.Input, "expiry": "12/30", "cvc": "123"}, "name": "Ann Lee", "email": "payer@example.com",
					"phoneNumber": "4915112345678", "address": "1 Main St", "city": "Berlin", "state": "BE", "postalCode": "10115", "country": "DE"})
			case provider.MethodWallet:
				id := createRequest(t, m, "20", "EUR")
				res = pay(t, m, "/payments/walletA/"+strconv.FormatInt(id, 10), payerData("token", tc.Input))
			case provider.MethodUPI:
				body := payerData("upiId", tc.Input)
				body["amount"], body["unit"] = 499, "INR"
				res = pay(t, m, "/payments/h2h/30", body)
			case provider.MethodQR:
				id := createRequest(t, m, "15", "USD")
				res = pay(t, m, "/payments/qr/"+strconv.FormatInt(id, 10), payerData("email", tc.Input))
			case provider.MethodAlternative:
				body := payerData("email", tc.Input)
				body["amount"], body["unit"] = "9.99", "USD"
				res = pay(t, m, "/payments/h2h/27", body)
			}
			if res.TransactionStatusID != int(tc.First) || res.LastLog.TransactionStatusID != int(tc.First) {
				t.Fatalf("response status %d (lastLog %d), want %d: %+v", res.TransactionStatusID, res.LastLog.TransactionStatusID, tc.First, res)
			}
			if res.PaymentRequestID == 0 || res.TransactionID == 0 || !strings.HasPrefix(res.TransactionNumber, "TX") ||
				res.PaymentID != strconv.FormatInt(res.TransactionID, 10) || res.LastLog.Message == "" {
				t.Fatalf("incomplete result %+v", res)
			}
			switch tc.Flow {
			case sandbox.Immediate:
				if res.LastLog.Code != string(tc.Code) {
					t.Fatalf("lastLog.code = %q, want %q", res.LastLog.Code, tc.Code)
				}
			case sandbox.Challenge:
				if res.NextAction == nil || res.NextAction.Type != "threeds_redirect" || res.NextAction.URL == "" ||
					res.NextAction.Reference != "3ds_"+strconv.FormatInt(res.TransactionID, 10) {
					t.Fatalf("nextAction = %+v", res.NextAction)
				}
				if s := getStatus(t, m, res.PaymentRequestID); s.TransactionStatusID == nil || *s.TransactionStatusID != 3 {
					t.Fatalf("status endpoint during the challenge: %+v", s)
				}
				links := challengeLinks(t, res.NextAction.URL)
				code, loc := answerChallenge(t, links[string(tc.Answer)])
				switch {
				case tc.Method == provider.MethodCard && tc.Status == provider.Approved:
					// The request has a successUrl: the payer goes back there.
					if code != http.StatusSeeOther || loc != "https://shop.example/ok" {
						t.Fatalf("approve: %d Location %q, want 303 to the successUrl", code, loc)
					}
				case code != http.StatusOK:
					t.Fatalf("answer %s: %d (Location %q), want the result page", tc.Answer, code, loc)
				}
			case sandbox.Callback:
				if res.NextAction == nil || res.NextAction.Reference == "" {
					t.Fatalf("pending without nextAction: %+v", res)
				}
				if tc.Method == provider.MethodQR && !strings.HasPrefix(res.NextAction.QRPayload, "payreq-sandbox:qr?") {
					t.Fatalf("QR payload %q", res.NextAction.QRPayload)
				}
			}
			if tc.Held {
				return // final after minutes: TestSandboxInputStaysPending
			}
			s := waitFinal(t, m, res.PaymentRequestID, 10*time.Second)
			wantRequest := 2
			if tc.Status == provider.Approved {
				wantRequest = 1
			}
			if *s.TransactionStatusID != int(tc.Status) || s.PaymentRequestStatusID != wantRequest ||
				s.LastLog == nil || s.LastLog.Code != string(tc.Code) || s.LastLog.TransactionStatusID != int(tc.Status) ||
				*s.TransactionID != res.TransactionID || *s.TransactionNumber != res.TransactionNumber {
				t.Fatalf("final status %+v lastLog %+v, want tx %d request %d code %q", s, s.LastLog, tc.Status, wantRequest, tc.Code)
			}
			// The transaction lookup agrees.
			tx := testenv.Do(t, "GET", base(t)+"/payments/creditCard/status/"+res.PaymentID, m.APIKey, nil)
			if tx.Status != http.StatusOK {
				t.Fatalf("transaction lookup: %d %s", tx.Status, tx.Body)
			}
			v := tx.JSON(t)
			if v["transactionStatusId"] != float64(tc.Status) || v["lastLog"].(map[string]any)["code"] != string(tc.Code) {
				t.Fatalf("transaction view %s", tx.Body)
			}
			if tc.Method == provider.MethodCard {
				c := v["card"].(map[string]any)
				digits := strings.ReplaceAll(tc.Input, " ", "")
				if c["bin"] != digits[:6] || c["last4"] != digits[len(digits)-4:] || strings.Contains(string(tx.Body), digits) {
					t.Fatalf("card must be kept masked: %s", tx.Body)
				}
			}
		})
	}
}
