package paycore

import (
	"context"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/merchant"
	"github.com/payreq/payreq/internal/payment"
)

// The service's storage, by use. Each role is the few methods one part of
// the service calls, with the rule those writes keep; the parts depend on
// their roles only (Service's fields), so a reader of complete.go sees the
// commit and the settle, and a test can fake only what it drives.
// *dynamo.Store implements every role; internal/testing/memstore does too,
// and its contract tests hold it to DynamoDB. Errors are errkind kinds:
// Conflict where a write's guard failed (nothing written unless said),
// NotFound for a missing item; any other error is a failed call whose
// write may or may not have been applied, so every caller reads again or
// leaves the attempt to the reconciler. Three optional roles are found
// on Store by type assertion, so a store without them still charges:
// AfterStore (after.go), outboxMarker (complete.go) and refundAggregator
// (views.go).

// Leases is the attempt lease (pay.go, recover.go): the request
// names the one transaction that may charge it (attemptTx). It is taken by
// one conditional write, so of two concurrent attempts one gets Conflict;
// it is released only by the attempt's final commit (Commits) or, when
// nothing was charged, by ReleaseLease. An expired lease is never taken
// over: its attempt may have charged, so it is driven to a final state
// first.
type Leases interface {
	// LeasePaymentRequest takes the lease for l.TxID on an unpaid request of
	// l.MerchantID, with the expected amount and unit, that no attempt
	// holds; Conflict otherwise (PaymentRequestLease tells why).
	LeasePaymentRequest(ctx context.Context, l payment.Lease) (*payment.Request, error)
	// CreateLeasedPaymentRequest stores a new request already leased by
	// txID until until; Exists when the id is taken.
	CreateLeasedPaymentRequest(ctx context.Context, r *payment.Request, txID int64, until time.Time) error
	// CreateLeasedRequestWithTransaction stores a new request leased by t
	// and t's write-ahead record, both or neither: Exists when the request
	// id is taken, Conflict when only t's is.
	CreateLeasedRequestWithTransaction(ctx context.Context, r *payment.Request, t *payment.Transaction, until time.Time) error
	// PaymentRequestLease reads a request with its lease (strongly
	// consistent); NotFound when missing.
	PaymentRequestLease(ctx context.Context, id int64) (*payment.Request, payment.AttemptLease, error)
	// ReleaseLease gives up txID's lease without recording an attempt (it
	// was refused before any charge); Conflict when txID does not hold it.
	ReleaseLease(ctx context.Context, requestID, txID int64) error
}

// Commits records an attempt's outcome on its request (complete.go). Each
// write is guarded by "the request is unpaid and the attempt holds its
// lease", so a request is paid once, by the attempt holding it, and paying
// and cancelling exclude each other. The commit comes before the
// transaction's settle (Transactions): it decides whether a charge pays
// the request.
type Commits interface {
	// CommitAttempt applies c: approved pays the request (once), declined
	// leaves it payable, pending extends the lease; a final status releases
	// the lease. Conflict when the guard fails.
	CommitAttempt(ctx context.Context, c payment.AttemptCommit) (*payment.Request, error)
	// CommitAndSettle is CommitAttempt and Transactions.SettleTransaction of
	// a final outcome in one all-or-nothing write; Conflict when either
	// guard fails (nothing written: the caller takes the two steps, which
	// tell the cases apart).
	CommitAndSettle(ctx context.Context, c payment.AttemptCommit, st payment.Settlement) error
	// DiscardAttempt deletes a waiting transaction without provider
	// reference and releases its lease, both or neither, when the acquirer
	// provably never processed the charge; Conflict otherwise.
	DiscardAttempt(ctx context.Context, requestID, txID int64) error
	// RecordCancelledAttempt shows attempt txID's final state on a request
	// cancelled while it was pending; Conflict unless the request is
	// cancelled and names txID.
	RecordCancelledAttempt(ctx context.Context, requestID, txID int64, st payment.TransactionStatus, code codes.Code, message string, now time.Time) error
}

// Requests reads payment requests.
type Requests interface {
	// PaymentRequest reads a request (strongly consistent); NotFound when
	// missing.
	PaymentRequest(ctx context.Context, id int64) (*payment.Request, error)
}

// Transactions is the write-ahead record of an attempt and its one-way
// states: written (waiting, with its provider reference) before the
// provider is called, it leaves waiting or pending exactly once, and an
// approved transaction never changes status again.
type Transactions interface {
	// CreateTransaction stores a new transaction; Exists when the id is
	// taken (the caller draws another).
	CreateTransaction(ctx context.Context, t *payment.Transaction) error
	// Transaction reads a transaction (strongly consistent); NotFound when
	// missing.
	Transaction(ctx context.Context, id int64) (*payment.Transaction, error)
	// TransactionByNumber finds a transaction by its public number
	// (eventually consistent: a new one may be missing); NotFound.
	TransactionByNumber(ctx context.Context, num string) (*payment.Transaction, error)
	// MarkPending applies p to a waiting transaction; Conflict (with the
	// current transaction) otherwise.
	MarkPending(ctx context.Context, p payment.Pending) (*payment.Transaction, error)
	// SettleTransaction applies a final st to a waiting or pending
	// transaction with its notification in the outbox; Conflict with the
	// stored transaction when it is final already (a late, repeated or
	// reordered result never changes it).
	SettleTransaction(ctx context.Context, s payment.Settlement) (*payment.Transaction, error)
	// FailOver applies f to a transaction that is waiting on connector
	// f.From; Conflict (with the current transaction) otherwise.
	FailOver(ctx context.Context, f payment.Failover) (*payment.Transaction, error)
}

// OpenIndex is the reconciler's list (recover.go): a transaction with
// work left (an attempt not final, a refund in processing, a change after
// its answer not finished) carries a recovery time until that work is done.
type OpenIndex interface {
	// OpenAttempts lists up to limit transactions of shard whose recovery
	// time is before cutoff.
	OpenAttempts(ctx context.Context, shard int, cutoff time.Time, limit int32) ([]*payment.Transaction, error)
}

// Refunds is the service's refund of an approved transaction (views.go,
// refund_events.go): one per transaction, begun before the acquirer is
// asked and moved from processing to a final status once.
type Refunds interface {
	// BeginRefund records r in processing on an approved transaction of
	// merchantID without refund, and opens it for the reconciler until
	// recoverAfter, so a refund a crash left is finished; Conflict
	// otherwise.
	BeginRefund(ctx context.Context, txID int64, merchantID string, r payment.Refund, recoverAfter time.Time) (*payment.Transaction, error)
	// CompleteRefund moves processing refund refundID to status; Conflict
	// when it is no longer processing. Used only by a store without
	// AfterStore: *dynamo.Store and memstore complete a refund through
	// AfterStore.WriteRefund, under the refund's revision.
	CompleteRefund(ctx context.Context, txID int64, refundID, status, providerRef string, code codes.Code, now time.Time) (*payment.Transaction, error)
}

// LimitCounters are a merchant's counters per window (limits.go): an attempt is
// reserved before its charge and released when it ends declined, so the
// counters never let more through than the caps.
type LimitCounters interface {
	// ReserveLimits adds one attempt of amount if every capped counter
	// stays within caps; Conflict (nothing added) otherwise.
	ReserveLimits(ctx context.Context, w payment.LimitWindow, amount decimal.Decimal, caps payment.LimitCaps) error
	// ReleaseLimits takes one attempt of amount back out.
	ReleaseLimits(ctx context.Context, w payment.LimitWindow, amount decimal.Decimal) error
	// LimitUsageOf reads the counters (which limit a refusal hit).
	LimitUsageOf(ctx context.Context, w payment.LimitWindow) (payment.LimitUsage, error)
}

// Merchants reads merchant accounts.
type Merchants interface {
	// Merchant reads a merchant; NotFound when missing.
	Merchant(ctx context.Context, id string) (*merchant.Merchant, error)
}

// Store is every role: what wiring passes (*dynamo.Store); New hands each
// part its own.
type Store interface {
	Leases
	Commits
	Requests
	Transactions
	OpenIndex
	Refunds
	LimitCounters
	Merchants
}

// stores are the service's roles, each the Store it was built with.
type stores struct {
	leases   Leases
	commits  Commits
	requests Requests
	txs      Transactions
	open     OpenIndex
	refunds  Refunds
	limits   LimitCounters
	merch    Merchants
}

func storesOf(st Store) stores {
	if st == nil {
		return stores{}
	}
	return stores{leases: st, commits: st, requests: st, txs: st, open: st, refunds: st, limits: st, merch: st}
}
