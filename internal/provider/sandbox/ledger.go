package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/provider"
)

// The sandbox keeps a ledger like a real acquirer: one entry per charge
// reference and one per refund id, written with create-if-absent, so a
// repeated call answers with the stored outcome and never moves money twice.
// It lives in DynamoDB (the operations table, *dynamo.Store) in every
// deployment, because the service calls the sandbox from several Lambda
// instances and across crashes.

// Kinds of ledger entries.
const (
	KindCharge = "charge"
	KindRefund = "refund"
)

// LedgerEntry is one charge or refund as the sandbox acquirer books it. It
// holds no card data: only what a statement line would.
type LedgerEntry struct {
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

// Ledger stores the entries. Implementations: *dynamo.Store, and
// MemoryLedger for unit tests of the sandbox alone.
type Ledger interface {
	// PutLedgerEntry stores e unless its reference exists; it returns the
	// stored entry and whether e was the one stored.
	PutLedgerEntry(ctx context.Context, e LedgerEntry) (LedgerEntry, bool, error)
	// LedgerEntry reads an entry; ErrNoEntry when absent.
	LedgerEntry(ctx context.Context, ref string) (LedgerEntry, error)
	// SettleLedgerEntry moves a pending entry to status/code; a final entry
	// is returned unchanged.
	SettleLedgerEntry(ctx context.Context, ref string, status provider.Status, code codes.Code, message string, now time.Time) (LedgerEntry, error)
	// VoidLedgerEntry marks an approved charge as voided.
	VoidLedgerEntry(ctx context.Context, ref string, now time.Time) error
}

// ErrNoEntry: the ledger has no entry with that reference.
var ErrNoEntry = errors.New("sandbox ledger: no entry")

// outcome is the Outcome a stored entry stands for, with async delays
// counted from now.
func (e LedgerEntry) outcome(now time.Time) provider.Outcome {
	if e.Abandoned {
		return provider.Final(provider.Declined, codes.TransactionCancelled, e.ProviderRef)
	}
	o := provider.Outcome{Status: e.Status, Code: e.Code, Message: e.Message, ProviderRef: e.ProviderRef, NextAction: e.NextAction}
	if o.Message == "" {
		o.Message = provider.Message(e.Status, e.Code)
	}
	if e.Status == provider.Pending && e.NextAction != nil && e.NextAction.Type != provider.ActionThreeDSRedirect {
		after := e.DueAt.Sub(now)
		if after < 0 {
			after = 0
		}
		o.Async = &provider.AsyncResult{After: after, Status: e.AsyncStatus, Code: e.AsyncCode}
	}
	return o
}

// MemoryLedger is an in-process Ledger for unit tests of the sandbox's
// logic; deployments use the DynamoDB one.
type MemoryLedger struct {
	mu sync.Mutex
	m  map[string]LedgerEntry
}

// NewMemoryLedger returns an empty ledger.
func NewMemoryLedger() *MemoryLedger { return &MemoryLedger{m: map[string]LedgerEntry{}} }

func (l *MemoryLedger) PutLedgerEntry(_ context.Context, e LedgerEntry) (LedgerEntry, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.m[e.Reference]; ok {
		return cur, false, nil
	}
	l.m[e.Reference] = e
	return e, true, nil
}

func (l *MemoryLedger) LedgerEntry(_ context.Context, ref string) (LedgerEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[ref]
	if !ok {
		return LedgerEntry{}, ErrNoEntry
	}
	return e, nil
}

func (l *MemoryLedger) SettleLedgerEntry(_ context.Context, ref string, st provider.Status, c codes.Code, msg string, now time.Time) (LedgerEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[ref]
	if !ok {
		return LedgerEntry{}, ErrNoEntry
	}
	if e.Status == provider.Pending && !e.Abandoned {
		e.Status, e.Code, e.Message, e.NextAction, e.UpdatedAt = st, c, msg, nil, now
		l.m[ref] = e
	}
	return e, nil
}

func (l *MemoryLedger) VoidLedgerEntry(_ context.Context, ref string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[ref]
	if !ok {
		return ErrNoEntry
	}
	e.Voided, e.UpdatedAt = true, now
	l.m[ref] = e
	return nil
}

// Entries lists every entry (tests).
func (l *MemoryLedger) Entries() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LedgerEntry, 0, len(l.m))
	for _, e := range l.m {
		out = append(out, e)
	}
	return out
}
