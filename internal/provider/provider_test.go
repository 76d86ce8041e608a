package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
)

var fixedNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStatus(t *testing.T) {
	tests := []struct {
		s     Status
		id    int
		name  string
		final bool
	}{
		{Waiting, 0, "waiting", false},
		{Approved, 1, "approved", true},
		{Declined, 2, "declined", true},
		{Pending, 3, "pending", false},
		{Status(9), 9, "unknown", false},
	}
	for _, tt := range tests {
		if int(tt.s) != tt.id || tt.s.String() != tt.name || tt.s.Final() != tt.final {
			t.Errorf("Status %d: got (%d, %q, %v), want (%d, %q, %v)",
				tt.s, int(tt.s), tt.s.String(), tt.s.Final(), tt.id, tt.name, tt.final)
		}
	}
}

func TestFinalAndMessage(t *testing.T) {
	tests := []struct {
		s    Status
		c    codes.Code
		want string
	}{
		{Approved, "", "Approved"},
		{Declined, codes.InsufficientFunds, "Insufficient funds"},
		{Declined, codes.ThreeDSDecline, "3-D Secure system decline"},
		{Declined, "", "Declined"},
		{Pending, "", "Pending"},
		{Waiting, "", "Waiting"},
	}
	for _, tt := range tests {
		o := Final(tt.s, tt.c, "ref")
		want := Outcome{Status: tt.s, Code: tt.c, Message: tt.want, ProviderRef: "ref"}
		if o.Status != want.Status || o.Code != want.Code || o.Message != want.Message ||
			o.ProviderRef != want.ProviderRef || o.NextAction != nil || o.Async != nil {
			t.Errorf("Final(%v, %q) = %+v, want %+v", tt.s, tt.c, o, want)
		}
	}
}

func TestNextActionJSON(t *testing.T) {
	tests := []struct {
		a    NextAction
		want string
	}{
		{NextAction{Type: ActionThreeDSRedirect, URL: "https://x/3ds", Reference: "r"}, `{"type":"threeds_redirect","url":"https://x/3ds","reference":"r"}`},
		{NextAction{Type: ActionQR, QRPayload: "p", Reference: "r"}, `{"type":"qr","qrPayload":"p","reference":"r"}`},
		{NextAction{Type: ActionUPICollect, Reference: "r"}, `{"type":"upi_collect","reference":"r"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.a)
		if err != nil || string(b) != tt.want {
			t.Errorf("json = %s, %v; want %s", b, err, tt.want)
		}
	}
}

func TestChargeRequestIsRedacted(t *testing.T) {
	d, errs := card.Input{Holder: "A", Number: "4111111111111111", Expiry: "12/99", CVV: "123"}.Validate(fixedNow)
	if errs != nil {
		t.Fatal(errs)
	}
	req := ChargeRequest{
		TransactionID: 7, PaymentRequestID: 9, Amount: decimal.RequireFromString("10.50"), Unit: "EUR",
		Method: MethodCard, Card: &d, CVV: "987", WalletToken: "tok_secret_wallet", CardholderPresent: true,
	}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		outs = append(outs, fmt.Sprintf(verb, req), fmt.Sprintf(verb, &req))
	}
	outs = append(outs, fmt.Sprintf("%+v", struct{ R ChargeRequest }{req}))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("charge", "req", req)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("charge", "req", &req)
	outs = append(outs, buf.String())

	for _, out := range outs {
		for _, secret := range []string{"987", "111111111", "tok_secret_wallet"} {
			if strings.Contains(out, secret) {
				t.Errorf("output leaks %q: %s", secret, out)
			}
		}
		if !strings.Contains(out, "411111") {
			t.Errorf("output lacks the masked card: %s", out)
		}
	}
	if got, want := req.String(), "provider.ChargeRequest{tx:7 pr:9 10.5 EUR method:card card:visa 411111******1111 cardholderPresent:true}"; got != want {
		t.Errorf("String = %q\nwant       %q", got, want)
	}

	if _, err := json.Marshal(req); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("json.Marshal(ChargeRequest) error = %v, want ErrInvalidRequest", err)
	}
	if _, err := json.Marshal(struct{ Req *ChargeRequest }{&req}); err == nil {
		t.Error("json.Marshal of a struct holding a ChargeRequest must fail")
	}
}
