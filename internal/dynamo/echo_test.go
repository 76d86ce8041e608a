package dynamo_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/ids"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/testenv"
)

// loseAnswer arms the stack's fault proxy to lose the answer of the next
// write whose body contains marker (after the emulator applied it), and
// returns a check that it fired.
func loseAnswer(t *testing.T, op, marker string, drop bool) func() {
	t.Helper()
	a, err := testenv.Faults(t).Arm(devstack.Fault{Kind: devstack.FaultLoseAnswer, Op: op, Contains: marker, Drop: drop})
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if a.Fired() != 1 {
			t.Fatalf("the %s answer to lose was never sent (fired %d)", op, a.Fired())
		}
	}
}

func uniq(prefix string) string { return prefix + strconv.FormatInt(time.Now().UnixNano(), 36) }

// TestLostAnswerFaultIsReal: the proxy applies the write and loses its
// answer, the SDK sends the call again, and a plain conditional create
// meets its own write as "already exists". This is what every store write
// below must recognise.
func TestLostAnswerFaultIsReal(t *testing.T) {
	_, _, client, tables := newStore(t)
	for _, drop := range []bool{false, true} {
		pk := uniq("echo-raw-")
		fired := loseAnswer(t, "PutItem", pk, drop)
		_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &tables.Operations,
			Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "x"}},
			ConditionExpression: aws.String("attribute_not_exists(pk)")})
		fired()
		var cf *types.ConditionalCheckFailedException
		if !errors.As(err, &cf) {
			t.Fatalf("drop=%v: raw conditional put after a lost answer: %v, want the retry to meet its own write", drop, err)
		}
	}
}

// TestLostAnswerCreateIsItsOwnEcho: a create whose answer was lost succeeds
// (not Exists) and exists once.
func TestLostAnswerCreateIsItsOwnEcho(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	for _, drop := range []bool{false, true} {
		now := time.Now().UTC()
		r := &payment.Request{ID: ids.New(now), MerchantID: uniq("mer_echo_"), Status: payment.RequestUnpaid,
			Amount: decimal.RequireFromString("9.99"), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
		fired := loseAnswer(t, "PutItem", strconv.FormatInt(r.ID, 10), drop)
		if err := s.CreatePaymentRequest(ctx, r); err != nil {
			t.Fatalf("drop=%v: create after a lost answer: %v", drop, err)
		}
		fired()
		if got, err := s.PaymentRequest(ctx, r.ID); err != nil || got.MerchantID != r.MerchantID {
			t.Fatalf("read back: %+v, %v", got, err)
		}
		// Another create of the same id is still refused: only the call's
		// own echo is recognised.
		if err := s.CreatePaymentRequest(ctx, r); !errkind.Is(err, errkind.Exists) {
			t.Fatalf("second create of one id: %v, want Exists", err)
		}
	}
}

// TestLostAnswerCounterCountsOnce: an ADD whose answer was lost is counted
// once, and a reservation that filled the last place is not refused by its
// own retry.
func TestLostAnswerCounterCountsOnce(t *testing.T) {
	s, _, client, tables := newStore(t)
	ctx := context.Background()
	who := uniq("mer_echo_rl_")
	const window = int64(29_000_001)
	exp := time.Now().Add(time.Hour)
	fired := loseAnswer(t, "UpdateItem", who, false)
	if n, err := s.TakeRateLimit(ctx, who, window, 1, exp); err != nil || n != 1 {
		t.Fatalf("take with a lost answer: %d, %v; want 1 (counted once, not refused by its own retry)", n, err)
	}
	fired()
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Operations, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "rl#" + who}, "sk": &types.AttributeValueMemberS{Value: strconv.FormatInt(window, 10)}}})
	if err != nil || out.Item["count"].(*types.AttributeValueMemberN).Value != "1" {
		t.Fatalf("stored count: %v, %v; want 1", out.Item["count"], err)
	}

	w := payment.WindowAt(who, "EUR", time.Now())
	one := int64(1)
	fired = loseAnswer(t, "UpdateItem", who, false)
	if err := s.ReserveLimits(ctx, w, decimal.RequireFromString("10"), payment.LimitCaps{DailyCount: one}); err != nil {
		t.Fatalf("reserve the last place with a lost answer: %v", err)
	}
	fired()
	u, err := s.LimitUsageOf(ctx, w)
	if err != nil || u.DailyCount != 1 || !u.DailyAmount.Equal(decimal.RequireFromString("10")) {
		t.Fatalf("usage after one reservation: %+v, %v", u, err)
	}
}

// TestLostAnswerClaimIsItsOwn: an Idempotency-Key claim whose answer was
// lost is the caller's claim, not a key "in use".
func TestLostAnswerClaimIsItsOwn(t *testing.T) {
	s, _, _, _ := newStore(t)
	now := time.Now()
	mer := uniq("mer_echo_idem_")
	fired := loseAnswer(t, "PutItem", mer, false)
	held, err := s.ClaimIdempotencyKey(context.Background(), newClaim(mer, "k1", "tok-1", now), now)
	fired()
	if err != nil || held != nil {
		t.Fatalf("claim after a lost answer: held %+v, %v; want the claim", held, err)
	}
	// Another request's claim of the same key is refused and sees the holder.
	held, err = s.ClaimIdempotencyKey(context.Background(), newClaim(mer, "k1", "tok-2", now), now)
	if !errkind.Is(err, errkind.Conflict) || held == nil || held.Token != "tok-1" {
		t.Fatalf("second claim: held %+v, %v; want Conflict with the first holder", held, err)
	}
}

// TestLostAnswerGuardedUpdateReturnsItsResult: a guarded state change whose
// answer was lost returns the state it wrote.
func TestLostAnswerGuardedUpdateReturnsItsResult(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	r := newRequest(t, s, uniq("mer_echo_lease_"))
	now := time.Now()
	fired := loseAnswer(t, "UpdateItem", strconv.FormatInt(r.ID, 10), false)
	got, err := s.LeasePaymentRequest(ctx, payment.Lease{RequestID: r.ID, MerchantID: r.MerchantID, TransactionID: 77, Now: now, Until: now.Add(time.Minute)})
	fired()
	if err != nil || got == nil || got.ID != r.ID {
		t.Fatalf("lease after a lost answer: %+v, %v; want the leased request", got, err)
	}
}

// TestLostAnswerTransactionAppliesOnce: a TransactWriteItems whose answer
// was lost is replayed by DynamoDB under the SDK's ClientRequestToken
// (one token across the SDK's retries): success, applied once.
func TestLostAnswerTransactionAppliesOnce(t *testing.T) {
	_, _, client, tables := newStore(t)
	ctx := context.Background()
	pk := uniq("echo-tx-")
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	add := func(sk string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{TableName: &tables.Operations, Key: key(sk),
			UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}}
	}
	fired := loseAnswer(t, "TransactWriteItems", pk, false)
	if _, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{add("a"), add("b")}}); err != nil {
		t.Fatalf("transaction after a lost answer: %v", err)
	}
	fired()
	for _, sk := range []string{"a", "b"} {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Operations, Key: key(sk), ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item["n"].(*types.AttributeValueMemberN).Value != "1" {
			t.Fatalf("%s counted %v (%v); want once", sk, out.Item["n"], err)
		}
	}
}

// TestTransactionConflictIsRetriedOnTheEmulator: a transaction DynamoDB
// cancels for a conflict (injected: DynamoDB Local never conflicts) is sent
// again by the store and applies.
func TestTransactionConflictIsRetriedOnTheEmulator(t *testing.T) {
	s, _ := txStore(t)
	ctx := context.Background()
	mer := uniq("mer_echo_conflict_")
	now := time.Now().UTC()
	r := &payment.Request{ID: ids.New(now), MerchantID: mer, Status: payment.RequestUnpaid,
		Amount: decimal.RequireFromString("5"), Unit: "EUR", CreatedAt: now, UpdatedAt: now}
	tx := &payment.Transaction{ID: ids.New(now), Number: uniq("TXC"), PaymentRequestID: r.ID, MerchantID: mer, Status: payment.TxWaiting,
		Amount: r.Amount, Unit: r.Unit, CreatedAt: now, UpdatedAt: now}
	tx.Reference = payment.ChargeReference(tx.ID)
	a, err := testenv.Faults(t).Arm(devstack.Fault{Kind: devstack.FaultTransactionConflict, Contains: mer, Times: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLeasedRequestWithTransaction(ctx, r, tx, now.Add(time.Minute)); err != nil {
		t.Fatalf("create after two conflicts: %v", err)
	}
	if a.Fired() != 2 {
		t.Fatalf("conflicts answered: %d, want 2", a.Fired())
	}
	if _, err := s.Transaction(ctx, tx.ID); err != nil {
		t.Fatalf("transaction after the retries: %v", err)
	}
}
