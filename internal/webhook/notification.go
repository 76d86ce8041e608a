// Package webhook is the message merchants receive: it builds, signs,
// schedules and sends the notifications the service POSTs to a merchant's
// notify URL when a transaction reaches a final state, and verifies them on
// the receiving side. It is pure: queueing and
// storage are wired on top of it elsewhere.
//
// The merchant-facing contract is docs/notifications.md; keep the two in step.
//
// The function that queues and delivers them is internal/notifier.
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
)

// Values of transactionStatusId and paymentRequestStatusId a notification
// may carry (spec: "Notifications to the merchant carry only
// transactionStatusId 1 or 2 and paymentRequestStatusId 1 or 2").
const (
	TxApproved = 1
	TxDeclined = 2

	RequestPaid   = 1
	RequestUnpaid = 2
)

// Notification is the spec's "Notification to the merchant", field for field.
// The JSON tags are the spec's names (for logs and tools),
// not the wire format, which is FormBody or JSONBody.
type Notification struct {
	ID                     int64           `json:"id"`
	TransactionID          int64           `json:"transactionId"`
	TransactionStatusID    int             `json:"transactionStatusId"`
	PaymentRequestStatusID int             `json:"paymentRequestStatusId"`
	MerchantID             string          `json:"merchantId"`
	Unit                   string          `json:"unit"`
	GrossAmount            decimal.Decimal `json:"grossAmount"`
	Fee                    decimal.Decimal `json:"fee"`
	NetAmount              decimal.Decimal `json:"netAmount"`
	ReferenceID            string          `json:"referenceId"`
	Notes                  string          `json:"notes"`
	ClientID               string          `json:"clientId"`
	ClientName             string          `json:"clientName"`
	ClientEmail            string          `json:"clientEmail"`
	ClientPhone            string          `json:"clientPhone"`
	ClientMemberID         string          `json:"clientMemberId"`
	Message                string          `json:"message"`
	Code                   codes.Code      `json:"code"`
	// Event, when set, makes this a refund's or a dispute's notification
	// (event.go): its own type and fields after the payment's.
	Event *Event `json:"event,omitempty"`
}

// Validate rejects a notification the spec does not allow to be sent.
func (n Notification) Validate() error {
	var errs []error
	if n.TransactionStatusID != TxApproved && n.TransactionStatusID != TxDeclined {
		errs = append(errs, fmt.Errorf("transactionStatusId %d: only 1 (approved) or 2 (declined) are notified", n.TransactionStatusID))
	}
	if n.PaymentRequestStatusID != RequestPaid && n.PaymentRequestStatusID != RequestUnpaid {
		errs = append(errs, fmt.Errorf("paymentRequestStatusId %d: only 1 (paid) or 2 (unpaid) are notified", n.PaymentRequestStatusID))
	}
	if n.ID <= 0 {
		errs = append(errs, errors.New("id must be positive"))
	}
	if n.TransactionID <= 0 {
		errs = append(errs, errors.New("transactionId must be positive"))
	}
	if n.MerchantID == "" {
		errs = append(errs, errors.New("merchantId is required"))
	}
	if n.Unit == "" {
		errs = append(errs, errors.New("unit is required"))
	}
	for _, a := range []struct {
		name string
		v    decimal.Decimal
	}{{"grossAmount", n.GrossAmount}, {"fee", n.Fee}, {"netAmount", n.NetAmount}} {
		if a.v.IsNegative() {
			errs = append(errs, fmt.Errorf("%s must not be negative", a.name))
		}
	}
	if n.Event != nil {
		if err := n.Event.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook: invalid notification: %w", err)
	}
	return nil
}

// FormFields lists the form body's keys in the order FormBody writes them:
// the order of the spec's table. Receivers must not depend on the order, but
// a fixed one makes bodies reproducible and diffs readable.
var FormFields = []string{
	"id", "transactionId", "transactionStatusId", "paymentRequestStatusId",
	"merchantId", "unit", "grossAmount", "fee", "netAmount", "referenceId",
	"notes", "clientId", "clientName", "clientEmail", "clientPhone",
	"clientMemberId", "message", "code",
}

// formValues returns the field values in FormFields order. Amounts carry
// exactly decimals places (the currency's minor-unit exponent: 2 for EUR, 0
// for JPY, 8 for BTC), never an exponent and never through float64.
func (n Notification) formValues(decimals int32) []string {
	// message is the failure reason: empty on an approval whatever the
	// attempt's last log said ("Approved"), as in the JSON variant.
	message := n.Message
	if n.TransactionStatusID == TxApproved {
		message = ""
	}
	return []string{
		strconv.FormatInt(n.ID, 10),
		strconv.FormatInt(n.TransactionID, 10),
		strconv.Itoa(n.TransactionStatusID),
		strconv.Itoa(n.PaymentRequestStatusID),
		n.MerchantID,
		n.Unit,
		n.GrossAmount.StringFixed(decimals),
		n.Fee.StringFixed(decimals),
		n.NetAmount.StringFixed(decimals),
		n.ReferenceID,
		n.Notes,
		n.ClientID,
		n.ClientName,
		n.ClientEmail,
		n.ClientPhone,
		n.ClientMemberID,
		message,
		string(n.Code),
	}
}

// FormBody renders n as application/x-www-form-urlencoded with every field
// present (empty ones as "key="), in FormFields order. url.Values.Encode is
// not used because it sorts the keys.
func (n Notification) FormBody(decimals int32) []byte {
	var b strings.Builder
	for i, v := range n.formValues(decimals) {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(FormFields[i])
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(v))
	}
	if n.Event != nil {
		n.Event.appendForm(&b, decimals)
	}
	return []byte(b.String())
}

// ParseForm reads a form body as FormBody writes it. Unknown keys are
// ignored so that fields added later do not break older receivers.
func ParseForm(body []byte) (Notification, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return Notification{}, fmt.Errorf("webhook: form body: %w", err)
	}
	var n Notification
	var errs []error
	integer := func(key string) int64 {
		i, err := strconv.ParseInt(v.Get(key), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return i
	}
	amount := func(key string) decimal.Decimal {
		d, err := decimal.NewFromString(v.Get(key))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return d
	}
	n.ID = integer("id")
	n.TransactionID = integer("transactionId")
	n.TransactionStatusID = int(integer("transactionStatusId"))
	n.PaymentRequestStatusID = int(integer("paymentRequestStatusId"))
	n.MerchantID = v.Get("merchantId")
	n.Unit = v.Get("unit")
	n.GrossAmount = amount("grossAmount")
	n.Fee = amount("fee")
	n.NetAmount = amount("netAmount")
	n.ReferenceID = v.Get("referenceId")
	n.Notes = v.Get("notes")
	n.ClientID = v.Get("clientId")
	n.ClientName = v.Get("clientName")
	n.ClientEmail = v.Get("clientEmail")
	n.ClientPhone = v.Get("clientPhone")
	n.ClientMemberID = v.Get("clientMemberId")
	n.Message = v.Get("message")
	n.Code = codes.Code(v.Get("code"))
	if err := errors.Join(errs...); err != nil {
		return Notification{}, fmt.Errorf("webhook: form body: %w", err)
	}
	return n, nil
}

// JSONNotification is the spec's test-environment JSON variant. Amount is a
// JSON string ("10.50") so that it keeps its exact digits in every language
// and can be fed back into the signature unchanged.
type JSONNotification struct {
	PaymentRequestID int64  `json:"paymentRequestId"`
	Status           string `json:"status"` // "completed" (approved) or "failed" (declined)
	TransactionID    int64  `json:"transactionId"`
	Amount           string `json:"amount"` // grossAmount with the currency's decimals
	Currency         string `json:"currency"`
	ErrorCode        string `json:"errorCode"`    // "" when completed
	ErrorMessage     string `json:"errorMessage"` // "" when completed
	Timestamp        string `json:"timestamp"`    // RFC 3339, UTC, seconds: when this attempt was made
	Signature        string `json:"signature"`    // hex HMAC-SHA512 of SigningString, keyed with the webhook secret
}

// JSON variant status values.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// JSON returns the unsigned JSON variant of n for an attempt made at now.
func (n Notification) JSON(decimals int32, now time.Time) JSONNotification {
	j := JSONNotification{
		PaymentRequestID: n.ID,
		Status:           StatusCompleted,
		TransactionID:    n.TransactionID,
		Amount:           n.GrossAmount.StringFixed(decimals),
		Currency:         n.Unit,
		Timestamp:        now.UTC().Format(time.RFC3339), // whole seconds,
	}
	if n.TransactionStatusID != TxApproved {
		j.Status = StatusFailed
		j.ErrorCode = string(n.Code)
		j.ErrorMessage = n.Message
	}
	return j
}

// SigningString is what the embedded signature covers: the values of every
// other field, in the order of the struct, joined by "|":
//
//	paymentRequestId|status|transactionId|amount|currency|errorCode|errorMessage|timestamp
//
// Values rather than the JSON text are signed so that a receiver whose
// framework has already parsed the body can still verify: re-serialising JSON
// differs between languages (key order, escaping of "/" or "&", number
// formatting), the values do not. Only errorMessage is free text, and it is
// the only field that may contain "|", so the split is unambiguous.
func (j JSONNotification) SigningString() []byte {
	return []byte(strings.Join([]string{
		strconv.FormatInt(j.PaymentRequestID, 10), j.Status,
		strconv.FormatInt(j.TransactionID, 10), j.Amount, j.Currency,
		j.ErrorCode, j.ErrorMessage, j.Timestamp,
	}, "|"))
}

// JSONBody renders the signed JSON variant of n for an attempt made at now;
// webhookSecret is the merchant's "whsec_..." secret, used verbatim as the
// HMAC key.
func (n Notification) JSONBody(decimals int32, now time.Time, webhookSecret string) []byte {
	if n.Event != nil {
		return n.eventJSON(decimals, now, webhookSecret)
	}
	j := n.JSON(decimals, now)
	j.Signature = SignHex(j.SigningString(), webhookSecret)
	b, err := json.Marshal(j)
	if err != nil {
		panic(err) // only strings and integers: cannot fail
	}
	return b
}

// VerifyJSONBody parses a JSON variant body and checks its embedded signature.
func VerifyJSONBody(body []byte, webhookSecret string) (JSONNotification, error) {
	if isJSONEvent(body) {
		// A refund's or dispute's notification: its own signing string.
		e, err := VerifyJSONEventBody(body, webhookSecret)
		return JSONNotification{PaymentRequestID: e.PaymentRequestID, Status: e.Type, TransactionID: e.TransactionID,
			Amount: e.Amount, Currency: e.Currency, Timestamp: e.Timestamp, Signature: e.Signature}, err
	}
	var j JSONNotification
	if err := json.Unmarshal(body, &j); err != nil {
		return JSONNotification{}, fmt.Errorf("webhook: JSON body: %w", err)
	}
	if !VerifyHex(j.SigningString(), j.Signature, webhookSecret) {
		return j, ErrSignature
	}
	return j, nil
}
