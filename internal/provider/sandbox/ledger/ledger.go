// Package ledger is the sandbox acquirer's ledger as domain types:
// one entry per charge reference and per refund id. The sandbox provider
// (internal/provider/sandbox) keeps it and internal/dynamo stores it, and
// neither imports the other for it.
package ledger

import (
	"context"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// Kinds of ledger entries.
const (
	KindCharge = "charge"
	KindRefund = "refund"
)

// Entry is one charge or refund as the sandbox acquirer books it. It
// holds no card data: only what a statement line would.
type Entry struct {
	Reference     string          // charge reference or refund id
	Kind          string          // KindCharge or KindRefund
	TransactionID int64           //
	Method        provider.Method //
	Amount        string          // decimal text
	Unit          string          //
	Status        provider.Status // Approved = money moved; Pending while a challenge or callback is open
	Code          codes.Code      //
	Message       string          //
	ProviderRef   string          //
	// Abandoned marks a reference closed by Lookup before any charge: the
	// sandbox refuses to charge it later.
	Abandoned bool
	// While pending: the open next action, the final result of an
	// asynchronous flow and when it is due, and whether a 3-D Secure
	// challenge fails whatever the payer answers.
	NextAction  *provider.NextAction
	AsyncStatus provider.Status
	AsyncCode   codes.Code
	DueAt       time.Time
	AlwaysFails bool
	// Voided is set on a charge whose money went back because it could not
	// pay its request (RefundRequest.Void).
	Voided    bool
	ChargeRef string // refunds: the charge they return money of
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Store keeps the entries. Implementations: *dynamo.Store, and
// sandbox.MemoryLedger for unit tests of the sandbox alone.
type Store interface {
	// PutLedgerEntry stores e unless its reference exists; it returns the
	// stored entry and whether e was the one stored.
	PutLedgerEntry(ctx context.Context, e Entry) (Entry, bool, error)
	// LedgerEntry reads an entry; a NotFound error (errkind) when absent.
	LedgerEntry(ctx context.Context, ref string) (Entry, error)
	// SettleLedgerEntry moves a pending entry to status/code; a final entry
	// is returned unchanged.
	SettleLedgerEntry(ctx context.Context, ref string, status provider.Status, code codes.Code, message string, now time.Time) (Entry, error)
	// VoidLedgerEntry marks an approved charge as voided.
	VoidLedgerEntry(ctx context.Context, ref string, now time.Time) error
}
