package payment

import (
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/currency"
)

// View is the payment request object of the spec's Resources table, as the
// status endpoint and the create response return it.
type View struct {
	ID                     int64              `json:"id"`
	RecipientName          string             `json:"recipientName"`
	PaymentRequestStatusID RequestStatus      `json:"paymentRequestStatusId"`
	TransactionID          *int64             `json:"transactionId"`
	TransactionNumber      *string            `json:"transactionNumber"`
	TransactionStatusID    *TransactionStatus `json:"transactionStatusId"`
	Link                   string             `json:"link"`
	Unit                   string             `json:"unit"`
	Amount                 Amount             `json:"amount"`
	ReferenceID            string             `json:"referenceId"`
	Notes                  string             `json:"notes"`
	Client                 *Client            `json:"client"`
	NotifyURL              string             `json:"notifyUrl"`
	SuccessURL             string             `json:"successUrl"`
	FailureURL             string             `json:"failureUrl"`
	LastLog                *LastLog           `json:"lastLog,omitempty"`
	CreatedAt              time.Time          `json:"createdAt"`
	UpdatedAt              time.Time          `json:"updatedAt"`
}

// Amount is a money amount rendered as a JSON number literal with exact
// digits, never through float64 (0.000000000000000001 ETH stays exact).
type Amount string

func (a Amount) MarshalJSON() ([]byte, error) {
	if a == "" {
		return []byte("null"), nil
	}
	return []byte(a), nil
}

func (a *Amount) UnmarshalJSON(b []byte) error {
	d, err := decimal.NewFromString(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*a = Amount(d.String())
	return nil
}

// Decimal returns the amount as a decimal.
func (a Amount) Decimal() (decimal.Decimal, error) { return decimal.NewFromString(string(a)) }

// DisplayAmount renders fiat amounts with the currency's decimal places
// (25 EUR → 25.00) and crypto amounts as exact as they were given.
func DisplayAmount(a decimal.Decimal, unit string) Amount {
	if c, ok := currency.Lookup(unit); ok && !c.Crypto {
		return Amount(c.Format(a))
	}
	return Amount(a.String())
}

// ViewOf renders r; linkBase is the public base URL of the hosted pages.
func ViewOf(r *Request, linkBase string) View {
	v := View{
		ID:                     r.ID,
		RecipientName:          r.RecipientName,
		PaymentRequestStatusID: r.Status,
		Link:                   linkBase + "/pay/" + strconv.FormatInt(r.ID, 10),
		Unit:                   r.Unit,
		Amount:                 DisplayAmount(r.Amount, r.Unit),
		ReferenceID:            r.ReferenceID,
		Notes:                  r.Notes,
		Client:                 r.Client,
		NotifyURL:              r.NotifyURL,
		SuccessURL:             r.SuccessURL,
		FailureURL:             r.FailureURL,
		LastLog:                r.LastLog,
		CreatedAt:              r.CreatedAt.UTC(),
		UpdatedAt:              r.UpdatedAt.UTC(),
	}
	if r.TransactionID != 0 {
		id, num := r.TransactionID, r.TransactionNumber
		v.TransactionID, v.TransactionNumber = &id, &num
		v.TransactionStatusID = r.TransactionStatus
	}
	return v
}
