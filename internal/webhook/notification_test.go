package webhook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// approved is a notification with every kind of value FormBody must escape.
func approved() Notification {
	return Notification{
		ID: 123456789, TransactionID: 987654321,
		TransactionStatusID: TxApproved, PaymentRequestStatusID: RequestPaid,
		MerchantID: "m_42", Unit: "EUR",
		GrossAmount: dec("10.5"), Fee: dec("0.3"), NetAmount: dec("10.2"),
		ReferenceID: "order 17/A&B", Notes: "café=ok",
		ClientID: "c1", ClientName: "Ada Lovelace", ClientEmail: "ada@example.com",
		ClientPhone: "+44 20 7946 0000",
	}
}

func declined() Notification {
	n := approved()
	n.TransactionStatusID, n.PaymentRequestStatusID = TxDeclined, RequestUnpaid
	n.Fee, n.NetAmount = decimal.Zero, decimal.Zero
	n.Code, n.Message = codes.InsufficientFunds, "Insufficient funds"
	return n
}

func TestValidate(t *testing.T) {
	if err := approved().Validate(); err != nil {
		t.Fatalf("approved: %v", err)
	}
	if err := declined().Validate(); err != nil {
		t.Fatalf("declined: %v", err)
	}
	bad := map[string]func(*Notification){
		"tx waiting":        func(n *Notification) { n.TransactionStatusID = 0 },
		"tx pending":        func(n *Notification) { n.TransactionStatusID = 3 },
		"tx 4":              func(n *Notification) { n.TransactionStatusID = 4 },
		"request cancelled": func(n *Notification) { n.PaymentRequestStatusID = 3 },
		"request 0":         func(n *Notification) { n.PaymentRequestStatusID = 0 },
		"no id":             func(n *Notification) { n.ID = 0 },
		"no transaction":    func(n *Notification) { n.TransactionID = -1 },
		"no merchant":       func(n *Notification) { n.MerchantID = "" },
		"no unit":           func(n *Notification) { n.Unit = "" },
		"negative fee":      func(n *Notification) { n.Fee = dec("-0.01") },
	}
	for name, mutate := range bad {
		n := approved()
		mutate(&n)
		if err := n.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

func TestFormBodyOrderAndEscaping(t *testing.T) {
	want := "id=123456789&transactionId=987654321&transactionStatusId=1&paymentRequestStatusId=1" +
		"&merchantId=m_42&unit=EUR&grossAmount=10.50&fee=0.30&netAmount=10.20" +
		"&referenceId=order+17%2FA%26B&notes=caf%C3%A9%3Dok&clientId=c1&clientName=Ada+Lovelace" +
		"&clientEmail=ada%40example.com&clientPhone=%2B44+20+7946+0000&clientMemberId=&message=&code="
	if got := string(approved().FormBody(2)); got != want {
		t.Fatalf("FormBody:\n got %s\nwant %s", got, want)
	}
	// The key order is the spec table's, not url.Values' sorted order.
	var keys []string
	for pair := range strings.SplitSeq(want, "&") {
		k, _, _ := strings.Cut(pair, "=")
		keys = append(keys, k)
	}
	if strings.Join(keys, ",") != strings.Join(FormFields, ",") {
		t.Fatalf("keys %v, want %v", keys, FormFields)
	}
}

func TestFormBodyDecimals(t *testing.T) {
	n := approved()
	n.GrossAmount, n.Fee, n.NetAmount = dec("1500"), dec("0"), dec("1500")
	if got := string(n.FormBody(0)); !strings.Contains(got, "&grossAmount=1500&fee=0&netAmount=1500&") {
		t.Errorf("JPY: %s", got)
	}
	n.GrossAmount, n.Fee, n.NetAmount = dec("0.00012"), dec("0.000001"), dec("0.000119")
	if got := string(n.FormBody(8)); !strings.Contains(got, "&grossAmount=0.00012000&fee=0.00000100&netAmount=0.00011900&") {
		t.Errorf("BTC: %s", got)
	}
	// Large and tiny values stay plain decimals, never exponent notation.
	n.GrossAmount, n.Fee, n.NetAmount = dec("1e21"), dec("1e-18"), dec("1e21")
	if got := string(n.FormBody(18)); !strings.Contains(got, "&grossAmount=1000000000000000000000.000000000000000000&fee=0.000000000000000001&") {
		t.Errorf("ETH: %s", got)
	}
}

func TestParseFormRoundTrip(t *testing.T) {
	for _, n := range []Notification{approved(), declined()} {
		got, err := ParseForm(n.FormBody(2))
		if err != nil {
			t.Fatal(err)
		}
		// Amounts compare by value: 10.50 parses back as 10.5 with another exponent.
		if !got.GrossAmount.Equal(n.GrossAmount) || !got.Fee.Equal(n.Fee) || !got.NetAmount.Equal(n.NetAmount) {
			t.Fatalf("amounts %v %v %v", got.GrossAmount, got.Fee, got.NetAmount)
		}
		got.GrossAmount, got.Fee, got.NetAmount = n.GrossAmount, n.Fee, n.NetAmount
		if got != n {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, n)
		}
	}
	if _, err := ParseForm([]byte("id=x&transactionId=1")); err == nil {
		t.Fatal("ParseForm accepted a non-numeric id")
	}
}

func TestJSONVariant(t *testing.T) {
	now := time.Date(2026, 3, 1, 13, 0, 0, 999, time.FixedZone("CET", 3600))
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	body := declined().JSONBody(2, now, secret)
	signed := "123456789|failed|987654321|10.50|EUR|005|Insufficient funds|2026-03-01T12:00:00Z"
	sig := hexOf(manualHMAC(sha512Hash, []byte(secret), []byte(signed)))
	want := `{"paymentRequestId":123456789,"status":"failed","transactionId":987654321,"amount":"10.50",` +
		`"currency":"EUR","errorCode":"005","errorMessage":"Insufficient funds",` +
		`"timestamp":"2026-03-01T12:00:00Z","signature":"` + sig + `"}`
	if string(body) != want {
		t.Fatalf("JSONBody:\n got %s\nwant %s", body, want)
	}

	j, err := VerifyJSONBody(body, secret)
	if err != nil {
		t.Fatalf("VerifyJSONBody: %v", err)
	}
	if j.Status != StatusFailed || j.ErrorCode != "005" {
		t.Fatalf("parsed %+v", j)
	}

	ok := approved().JSON(2, now)
	if ok.Status != StatusCompleted || ok.ErrorCode != "" || ok.ErrorMessage != "" {
		t.Fatalf("approved JSON %+v", ok)
	}

	// Tampering with any signed value, or the wrong secret, is refused.
	for _, tamper := range []func(m map[string]any){
		func(m map[string]any) { m["amount"] = "1000.50" },
		func(m map[string]any) { m["status"] = "completed" },
		func(m map[string]any) { m["timestamp"] = "2026-03-01T12:00:01Z" },
		func(m map[string]any) { m["paymentRequestId"] = 123456780 },
	} {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		tamper(m)
		b, _ := json.Marshal(m)
		if _, err := VerifyJSONBody(b, secret); !errors.Is(err, ErrSignature) {
			t.Errorf("tampered %s: err = %v", b, err)
		}
	}
	if _, err := VerifyJSONBody(body, "whsec_other"); !errors.Is(err, ErrSignature) {
		t.Errorf("wrong secret: err = %v", err)
	}
	// Re-serialised JSON (other key order, spacing) still verifies: the
	// signature covers values, not bytes.
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(body)))
	d.UseNumber()
	_ = d.Decode(&m)
	pretty, _ := json.MarshalIndent(m, "", "  ")
	if _, err := VerifyJSONBody(pretty, secret); err != nil {
		t.Errorf("re-serialised body: %v", err)
	}
}

// message is the failure reason: an approval's form body carries
// message= whatever the attempt's last log said, as the JSON variant does.
func TestApprovalFormMessageIsEmpty(t *testing.T) {
	n := approved()
	n.Message = "Approved"
	v, err := ParseForm(n.FormBody(2))
	if err != nil {
		t.Fatal(err)
	}
	if v.Message != "" || !strings.Contains(string(n.FormBody(2)), "&message=&code=") {
		t.Fatalf("approval form body carries message %q: %s", v.Message, n.FormBody(2))
	}
	if d, _ := ParseForm(declined().FormBody(2)); d.Message != "Insufficient funds" {
		t.Fatalf("a decline keeps its reason, got %q", d.Message)
	}
}
