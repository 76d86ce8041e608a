// Package batch reads and writes the files of batch payment by file transfer:
// the merchant's semicolon-delimited payment rows (spec "Batch file row
// (SFTP)") and the result file written back next to them.
//
// Reading streams: memory stays bounded whatever the file size, and a reader
// can stop after any row and be resumed later from Offset over the remaining
// byte range of the object.
//
// Not to be confused with internal/batchproc (the batch function) or internal/batchwire (its wiring).
package batch

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
)

// Row is one payment of a batch file, fields in the spec's order.
//
// Row carries the full card number and security code, so its String, Format,
// LogValue and MarshalJSON show only the reference, the amount and the masked
// card (brand, first six and last four digits, as card.Mask allows): printing
// or logging a Row can never leak card data.
type Row struct {
	HolderName  string
	CardNumber  string // as written in the file (spaces and dashes allowed); never log it
	CardExpiry  string // MM/YY
	CVV         string // never log, store or write back
	Email       string
	Phone       string
	Address     string
	City        string
	State       string
	PostalCode  string
	Country     string // upper-cased by the reader
	Amount      decimal.Decimal
	Unit        string // upper-cased by the reader
	ReferenceID string // optional
}

// redacted is the shape every printing path of Row shares.
type redacted struct {
	ReferenceID string      `json:"referenceId,omitempty"`
	Amount      string      `json:"amount"`
	Unit        string      `json:"unit"`
	Card        card.Masked `json:"card"`
}

func (r Row) redacted() redacted {
	return redacted{ReferenceID: r.ReferenceID, Amount: r.Amount.String(), Unit: r.Unit,
		Card: card.Mask(card.Normalize(r.CardNumber))}
}

// String shows the row without card data, e.g.
// "batch.Row{ref=INV-1 amount=10.5 USD card=visa 411111******1111}".
func (r Row) String() string {
	v := r.redacted()
	return "batch.Row{ref=" + v.ReferenceID + " amount=" + v.Amount + " " + v.Unit + " card=" + v.Card.String() + "}"
}

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, …) print String, so
// neither the card number nor the CVV can leak through fmt.
func (r Row) Format(f fmt.State, verb rune) {
	s := r.String()
	if verb == 'q' {
		s = strconv.Quote(s)
	}
	_, _ = f.Write([]byte(s))
}

// LogValue implements slog.LogValuer with the redacted fields.
func (r Row) LogValue() slog.Value {
	v := r.redacted()
	return slog.GroupValue(
		slog.String("referenceId", v.ReferenceID),
		slog.String("amount", v.Amount),
		slog.String("unit", v.Unit),
		slog.Any("card", v.Card),
	)
}

// MarshalJSON writes the redacted fields, so a Row put in a JSON document
// (an SQS message, a log line) carries no card data.
func (r Row) MarshalJSON() ([]byte, error) { return json.Marshal(r.redacted()) }
