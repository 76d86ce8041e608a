package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

// The sandbox keeps a ledger like a real acquirer: one entry per charge
// reference and one per refund id, written with create-if-absent, so a
// repeated call answers with the stored outcome and never moves money twice.
// It lives in DynamoDB (the operations table, *dynamo.Store) in every
// deployment, because the service calls the sandbox from several Lambda
// instances and across crashes.

// outcomeOf is the Outcome a stored entry stands for, with async delays
// counted from now.
func outcomeOf(e ledger.Entry, now time.Time) provider.Outcome {
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
	m  map[string]ledger.Entry
}

// NewMemoryLedger returns an empty ledger.
func NewMemoryLedger() *MemoryLedger { return &MemoryLedger{m: map[string]ledger.Entry{}} }

func (l *MemoryLedger) PutLedgerEntry(_ context.Context, e ledger.Entry) (ledger.Entry, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.m[e.Reference]; ok {
		return cur, false, nil
	}
	l.m[e.Reference] = e
	return e, true, nil
}

func (l *MemoryLedger) LedgerEntry(_ context.Context, ref string) (ledger.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[ref]
	if !ok {
		return ledger.Entry{}, noEntry()
	}
	return e, nil
}

func (l *MemoryLedger) SettleLedgerEntry(_ context.Context, ref string, st provider.Status, c codes.Code, msg string, now time.Time) (ledger.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[ref]
	if !ok {
		return ledger.Entry{}, noEntry()
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
		return noEntry()
	}
	e.Voided, e.UpdatedAt = true, now
	l.m[ref] = e
	return nil
}

// Entries lists every entry (tests).
func (l *MemoryLedger) Entries() []ledger.Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ledger.Entry, 0, len(l.m))
	for _, e := range l.m {
		out = append(out, e)
	}
	return out
}

// noEntry is the ledger's answer for a reference it has no entry for.
func noEntry() error { return errkind.New(errkind.NotFound, "sandbox ledger: no entry", "") }
