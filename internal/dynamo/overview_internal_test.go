package dynamo

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

// On AWS, payments of one merchant settling at once meet on the same hour
// and day items, and DynamoDB cancels all but one of the transactions with
// TransactionConflict (the emulators run them one at a time and never do):
// the aggregate write is sent again until it goes through, a bounded
// number of times, and a failed mark condition (counted before) is an
// answer, not an error.
func TestAggregateRetriesConflictsAndStopsAtTheMark(t *testing.T) {
	ctx := context.Background()
	tx := &payment.Transaction{ID: 7, MerchantID: "mer_x", Status: payment.TxApproved, Method: "card", Amount: decimal.RequireFromString("12.50"),
		Unit: "EUR", UpdatedAt: time.Now()}
	conflict := func(n int) []error {
		errs := make([]error, n)
		for i := range errs {
			errs[i] = cancelledWith("None", "TransactionConflict", "None")
		}
		return errs
	}
	fake := &scriptedTransactions{errs: conflict(5)}
	s := &Store{db: fake, t: Tables{Operations: "ops", Transactions: "txs"}}
	if added, err := s.AggregateSettled(ctx, tx, time.Now()); err != nil || !added || fake.calls != 6 {
		t.Fatalf("5 conflicts then success: added %v, %v after %d calls", added, err, fake.calls)
	}
	fake = &scriptedTransactions{errs: conflict(aggregateTries + 2)}
	s.db = fake
	if added, err := s.AggregateSettled(ctx, tx, time.Now()); err == nil || added || fake.calls != aggregateTries {
		t.Fatalf("endless conflicts: added %v, %v after %d calls; want an error after %d", added, err, fake.calls, aggregateTries)
	}
	fake = &scriptedTransactions{errs: []error{cancelledWith("ConditionalCheckFailed", "None", "None")}}
	s.db = fake
	if added, err := s.AggregateSettled(ctx, tx, time.Now()); err != nil || added || fake.calls != 1 {
		t.Fatalf("counted before: added %v, %v after %d calls", added, err, fake.calls)
	}
}
