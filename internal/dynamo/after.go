package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/payment"
)

// A transaction after its first answer: refunds the acquirer settles by
// event, disputes, late charges, and the back-off of attempts that stay
// open. Every write here is conditional and safe to send twice: a write
// whose answer was lost and that the SDK sends again recognises its own
// earlier write (the same revision and write token, read back with
// ReturnValuesOnConditionCheckFailure ALL_OLD), never answering "conflict"
// for it.

// BackoffShards: an open attempt whose recovery left it open is moved from
// its shard n (0…OpenShards-1) to OpenShards+n, so the reconciler reads the
// attempts nobody looked at yet (a fresh crash) before those it is backing
// off from, and a crowd of stuck attempts never hides a new one.
const BackoffShards = payment.OpenShards

type disputeRecord struct {
	ID              string     `dynamodbav:"id"`
	Status          string     `dynamodbav:"status"`
	Reason          string     `dynamodbav:"reason,omitempty"`
	Amount          number     `dynamodbav:"amount"`
	Unit            string     `dynamodbav:"unit"`
	EvidenceDueBy   *time.Time `dynamodbav:"evidenceDueBy,omitempty"`
	FundsWithdrawn  bool       `dynamodbav:"fundsWithdrawn,omitempty"`
	FundsReinstated bool       `dynamodbav:"fundsReinstated,omitempty"`
	Live            bool       `dynamodbav:"live,omitempty"`
	CreatedAt       time.Time  `dynamodbav:"createdAt"`
	UpdatedAt       time.Time  `dynamodbav:"updatedAt"`
	EventAt         time.Time  `dynamodbav:"eventAt"`
	LastEvent       string     `dynamodbav:"lastEvent,omitempty"`
	LastEventID     string     `dynamodbav:"lastEventId,omitempty"`
	Notified        string     `dynamodbav:"notified,omitempty"`
}

type lateChargeRecord struct {
	ProviderRef string     `dynamodbav:"providerRef"`
	RefundRef   string     `dynamodbav:"refundRef,omitempty"`
	Status      string     `dynamodbav:"status"`
	Amount      number     `dynamodbav:"amount"`
	Unit        string     `dynamodbav:"unit"`
	SeenAt      time.Time  `dynamodbav:"seenAt"`
	VoidedAt    *time.Time `dynamodbav:"voidedAt,omitempty"`
	ConfirmedAt *time.Time `dynamodbav:"confirmedAt,omitempty"`
	Action      string     `dynamodbav:"action,omitempty"`
}

type afterRecord struct {
	Rev        int64             `dynamodbav:"rev"`
	W          string            `dynamodbav:"w,omitempty"` // token of the write that made Rev
	Refunds    []refundRecord    `dynamodbav:"refunds,omitempty"`
	Dispute    *disputeRecord    `dynamodbav:"dispute,omitempty"`
	LateCharge *lateChargeRecord `dynamodbav:"lateCharge,omitempty"`
}

func toAfterRecord(a *payment.After) *afterRecord {
	if a == nil {
		return nil
	}
	rec := &afterRecord{Rev: a.Rev}
	for i := range a.Refunds {
		rec.Refunds = append(rec.Refunds, *toRefundRecord(&a.Refunds[i]))
	}
	if d := a.Dispute; d != nil {
		rec.Dispute = &disputeRecord{ID: d.ID, Status: d.Status, Reason: d.Reason, Amount: number(d.Amount), Unit: d.Unit,
			EvidenceDueBy: timePtr(d.EvidenceDueBy), FundsWithdrawn: d.FundsWithdrawn, FundsReinstated: d.FundsReinstated, Live: d.Live,
			CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(), EventAt: d.EventAt.UTC(),
			LastEvent: d.LastEvent, LastEventID: d.LastEventID, Notified: d.Notified}
	}
	if l := a.LateCharge; l != nil {
		rec.LateCharge = &lateChargeRecord{ProviderRef: l.ProviderRef, RefundRef: l.RefundRef, Status: l.Status,
			Amount: number(l.Amount), Unit: l.Unit, SeenAt: l.SeenAt.UTC(), VoidedAt: l.VoidedAt,
			ConfirmedAt: l.ConfirmedAt, Action: l.Action}
	}
	return rec
}

func (rec *afterRecord) after() *payment.After {
	if rec == nil {
		return nil
	}
	a := &payment.After{Rev: rec.Rev}
	for i := range rec.Refunds {
		a.Refunds = append(a.Refunds, *rec.Refunds[i].refund())
	}
	if d := rec.Dispute; d != nil {
		a.Dispute = &payment.Dispute{ID: d.ID, Status: d.Status, Reason: d.Reason, Amount: decimal.Decimal(d.Amount), Unit: d.Unit,
			EvidenceDueBy: timeOf(d.EvidenceDueBy), FundsWithdrawn: d.FundsWithdrawn, FundsReinstated: d.FundsReinstated, Live: d.Live,
			CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, EventAt: d.EventAt,
			LastEvent: d.LastEvent, LastEventID: d.LastEventID, Notified: d.Notified}
	}
	if l := rec.LateCharge; l != nil {
		a.LateCharge = &payment.LateCharge{ProviderRef: l.ProviderRef, RefundRef: l.RefundRef, Status: l.Status,
			Amount: decimal.Decimal(l.Amount), Unit: l.Unit, SeenAt: l.SeenAt, VoidedAt: l.VoidedAt,
			ConfirmedAt: l.ConfirmedAt, Action: l.Action}
	}
	return a
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func writeToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// guardedTx applies in under its condition; on a failed condition, own
// reports whether the stored item (ALL_OLD) is this very write, already
// applied by an earlier send whose answer was lost: then it is a success.
// Otherwise Conflict with the current transaction, or NotFound.
func (s *Store) guardedTx(ctx context.Context, id int64, in *dynamodb.UpdateItemInput, own func(*payment.Transaction, map[string]types.AttributeValue) bool) (*payment.Transaction, error) {
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.db.UpdateItem(ctx, in)
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		item := cf.Item
		if len(item) == 0 {
			// Not every emulator returns the item (ALL_OLD): read it.
			got, gerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.t.Transactions, Key: txKey(id), ConsistentRead: aws.Bool(true)})
			if gerr != nil {
				return nil, fmt.Errorf("get transaction %d: %w", id, gerr)
			}
			if got.Item == nil {
				return nil, notFound()
			}
			item = got.Item
		}
		cur, uerr := unmarshalTransaction(item)
		if uerr != nil {
			return nil, uerr
		}
		if own != nil && own(cur, item) {
			return cur, nil
		}
		return cur, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("update transaction %d: %w", id, err)
	}
	return unmarshalTransaction(out.Attributes)
}

// tokenAt reads the write token w of the map attribute attr of item.
func tokenAt(item map[string]types.AttributeValue, attr string) string {
	m, ok := item[attr].(*types.AttributeValueMemberM)
	if !ok {
		return ""
	}
	w, _ := m.Value["w"].(*types.AttributeValueMemberS)
	if w == nil {
		return ""
	}
	return w.Value
}

// open sets the transaction's open-attempt index entry (its fresh shard)
// so the reconciler looks at it from until on: work a crash could leave
// half done (a notification to queue, a void to ask).
func (u *update) open(id int64, until time.Time) {
	if until.IsZero() {
		return
	}
	u.set("openShard", numberAV(int64(openShard(id)))).set("openUntil", numberAV(until.UnixMilli()))
}

// WriteRefund replaces the service's refund of transaction txID with r
// (r.Rev is written as rev+1) if its stored revision is still rev: the
// acquirer's answers and events about a refund are applied one after
// another. open, when set, opens the transaction for the reconciler from
// then on. Conflict with the current transaction when another write
// came first (the caller reads and decides again).
func (s *Store) WriteRefund(ctx context.Context, txID int64, rev int64, r payment.Refund, open time.Time) (*payment.Transaction, error) {
	r.Rev = rev + 1
	rec := toRefundRecord(&r)
	av, err := attributevalue.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("marshal refund: %w", err)
	}
	token := writeToken()
	av.(*types.AttributeValueMemberM).Value["w"] = strAV(token)
	u := (&update{}).set("refund", av).set("updatedAt", timeAV(time.Now()))
	u.open(txID, open)
	cond := "#refund.#rid = :rid AND "
	if rev == 0 {
		cond += "attribute_not_exists(#refund.#rev)"
	} else {
		cond += "#refund.#rev = :rev"
	}
	in := u.input(s.t.Transactions, txKey(txID))
	in.ExpressionAttributeNames["#rid"], in.ExpressionAttributeNames["#rev"] = "id", "rev"
	in.ConditionExpression = aws.String(cond)
	in.ExpressionAttributeValues[":rid"] = strAV(r.ID)
	if rev != 0 {
		in.ExpressionAttributeValues[":rev"] = numberAV(rev)
	}
	return s.guardedTx(ctx, txID, in, func(cur *payment.Transaction, item map[string]types.AttributeValue) bool {
		return cur.Refund != nil && cur.Refund.Rev == r.Rev && tokenAt(item, "refund") == token
	})
}

// WriteAfter replaces transaction txID's after-first-answer record with a
// (a.Rev is written as rev+1) if its stored revision is still rev; open as
// for WriteRefund. Conflict with the current transaction otherwise.
func (s *Store) WriteAfter(ctx context.Context, txID int64, rev int64, a payment.After, open time.Time) (*payment.Transaction, error) {
	a.Rev = rev + 1
	token := writeToken()
	rec := toAfterRecord(&a)
	rec.W = token
	av, err := attributevalue.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("marshal after record: %w", err)
	}
	u := (&update{}).set("after", av).set("updatedAt", timeAV(time.Now()))
	u.open(txID, open)
	in := u.input(s.t.Transactions, txKey(txID))
	if rev == 0 {
		in.ConditionExpression = aws.String("attribute_exists(id) AND attribute_not_exists(#after)")
	} else {
		in.ConditionExpression = aws.String("#after.#rev = :rev")
		in.ExpressionAttributeNames["#rev"] = "rev"
		in.ExpressionAttributeValues[":rev"] = numberAV(rev)
	}
	return s.guardedTx(ctx, txID, in, func(cur *payment.Transaction, item map[string]types.AttributeValue) bool {
		return cur.After != nil && cur.After.Rev == a.Rev && tokenAt(item, "after") == token
	})
}

// DeferRecovery moves an open attempt's next recovery from prev (as the
// reconciler read it) to next and records that tries recoveries left it
// open; it moves to its back-off shard (BackoffShards). Conflict when
// the attempt changed meanwhile (settled, or moved by another write): that
// change wins. Sent twice, it finds its own write (openUntil = next with
// the same count) and succeeds.
func (s *Store) DeferRecovery(ctx context.Context, txID int64, prev, next time.Time, tries int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.t.Transactions,
		Key:                 txKey(txID),
		UpdateExpression:    aws.String("SET openUntil = :next, recoverTries = :n, openShard = :shard"),
		ConditionExpression: aws.String("attribute_exists(openUntil) AND (openUntil = :prev OR (openUntil = :next AND recoverTries = :n))"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":next": numberAV(next.UnixMilli()), ":prev": numberAV(prev.UnixMilli()), ":n": numberAV(int64(tries)),
			":shard": numberAV(int64(BackoffShards + openShard(txID))),
		},
	})
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("defer recovery of transaction %d: %w", txID, err)
	}
	return nil
}

// CloseOpen takes a final transaction off the reconciler's list once
// nothing is left to do for it, if its recovery time is still prev (a
// write that opened it again since wins). Safe to send twice.
func (s *Store) CloseOpen(ctx context.Context, txID int64, prev time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.t.Transactions,
		Key:                      txKey(txID),
		UpdateExpression:         aws.String("REMOVE openShard, openUntil, recoverTries"),
		ConditionExpression:      aws.String("attribute_not_exists(openUntil) OR (openUntil = :prev AND #status IN (:a, :d))"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":prev": numberAV(prev.UnixMilli()), ":a": numberAV(int64(payment.TxApproved)), ":d": numberAV(int64(payment.TxDeclined)),
		},
	})
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("close open transaction %d: %w", txID, err)
	}
	return nil
}

// ---- the merchant's disputes ------------------------------------------------

const disputeIndexPrefix = "disputes#"

type disputeEntryRecord struct {
	TransactionID    int64      `dynamodbav:"transactionId"`
	PaymentRequestID int64      `dynamodbav:"paymentRequestId"`
	DisputeID        string     `dynamodbav:"disputeId"`
	Status           string     `dynamodbav:"status"`
	Reason           string     `dynamodbav:"reason,omitempty"`
	Amount           number     `dynamodbav:"amount"`
	Unit             string     `dynamodbav:"unit"`
	EvidenceDueBy    *time.Time `dynamodbav:"evidenceDueBy,omitempty"`
	UpdatedAt        time.Time  `dynamodbav:"updatedAt"`
	Rev              int64      `dynamodbav:"rev"`
	Live             bool       `dynamodbav:"live,omitempty"`
}

// PutDisputeEntry keeps merchantID's list of disputes up to date with e
// (one item per disputed transaction, in the operations table), unless a
// later revision is stored already; sending it twice writes the same item.
// A closed dispute is kept 180 days.
func (s *Store) PutDisputeEntry(ctx context.Context, merchantID string, e payment.DisputeEntry) error {
	item, err := attributevalue.MarshalMap(disputeEntryRecord{TransactionID: e.TransactionID, PaymentRequestID: e.PaymentRequestID,
		DisputeID: e.DisputeID, Status: e.Status, Reason: e.Reason, Amount: number(e.Amount), Unit: e.Unit,
		EvidenceDueBy: timePtr(e.EvidenceDueBy), UpdatedAt: e.UpdatedAt.UTC(), Rev: e.Rev, Live: e.Live})
	if err != nil {
		return fmt.Errorf("marshal dispute entry: %w", err)
	}
	item["pk"] = strAV(disputeIndexPrefix + merchantID)
	item["sk"] = strAV(strconv.FormatInt(e.TransactionID, 10))
	if payment.DisputeClosed(e.Status) {
		item["expiresAt"] = numberAV(e.UpdatedAt.Add(180 * 24 * time.Hour).Unix())
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.t.Operations, Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR rev <= :rev"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":rev": numberAV(e.Rev)},
	})
	if isConditionFailed(err) {
		return nil // a later revision is listed already
	}
	if err != nil {
		return fmt.Errorf("put dispute entry of transaction %d: %w", e.TransactionID, err)
	}
	return nil
}

// Disputes lists merchantID's disputes (open and closed within 180 days).
func (s *Store) Disputes(ctx context.Context, merchantID string, now time.Time) ([]payment.DisputeEntry, error) {
	var out []payment.DisputeEntry
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.t.Operations, KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": strAV(disputeIndexPrefix + merchantID)},
			ExclusiveStartKey:         start, ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("list disputes of merchant %s: %w", merchantID, err)
		}
		for _, item := range res.Items {
			if exp, ok := item["expiresAt"].(*types.AttributeValueMemberN); ok {
				if n, _ := strconv.ParseInt(exp.Value, 10, 64); n < now.Unix() {
					continue // TTL deletion is lazy
				}
			}
			var rec disputeEntryRecord
			if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
				return nil, fmt.Errorf("unmarshal dispute entry: %w", err)
			}
			out = append(out, payment.DisputeEntry{TransactionID: rec.TransactionID, PaymentRequestID: rec.PaymentRequestID,
				DisputeID: rec.DisputeID, Status: rec.Status, Reason: rec.Reason, Amount: decimal.Decimal(rec.Amount), Unit: rec.Unit,
				EvidenceDueBy: timeOf(rec.EvidenceDueBy), UpdatedAt: rec.UpdatedAt, Rev: rec.Rev, Live: rec.Live})
		}
		if start = res.LastEvaluatedKey; start == nil {
			return out, nil
		}
	}
}
