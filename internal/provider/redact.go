package provider

import (
	"fmt"
	"log/slog"
	"strconv"
)

// String describes the request without the CVV, the full card number or the
// wallet token, so a request can be logged while debugging a provider.
func (r ChargeRequest) String() string {
	s := "provider.ChargeRequest{tx:" + strconv.FormatInt(r.TransactionID, 10) +
		" pr:" + strconv.FormatInt(r.PaymentRequestID, 10) +
		" " + r.Amount.String() + " " + r.Unit +
		" method:" + string(r.Method)
	if r.Selector != 0 {
		s += " selector:" + strconv.Itoa(r.Selector)
	}
	if r.Card != nil {
		s += " card:" + r.Card.Masked.String()
	}
	return s + " cardholderPresent:" + strconv.FormatBool(r.CardholderPresent) + "}"
}

// Format prints String for every verb; without it %+v would print the CVV.
func (r ChargeRequest) Format(f fmt.State, verb rune) {
	s := r.String()
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = f.Write([]byte(s))
}

// LogValue keeps slog from reflecting over the CVV and the wallet token.
func (r ChargeRequest) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.Int64("transactionId", r.TransactionID),
		slog.Int64("paymentRequestId", r.PaymentRequestID),
		slog.String("amount", r.Amount.String()),
		slog.String("unit", r.Unit),
		slog.String("method", string(r.Method)),
		slog.Int("selector", r.Selector),
		slog.Bool("cardholderPresent", r.CardholderPresent),
	}
	if r.Card != nil {
		attrs = append(attrs, slog.Any("card", r.Card.Masked))
	}
	return slog.GroupValue(attrs...)
}

// errSerialise stops a ChargeRequest from being queued or stored: it carries
// the card number and CVV, which must never leave the process (docs/security.md).
var errSerialise = fmt.Errorf("%w: a ChargeRequest carries card data and must not be serialised", ErrInvalidRequest)

// MarshalJSON always fails; see errSerialise.
func (r ChargeRequest) MarshalJSON() ([]byte, error) { return nil, errSerialise }
