package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/shopspring/decimal"

	"github.com/payreq/payreq/internal/card"
	"github.com/payreq/payreq/internal/codes"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
)

// Indexes of the transactions table (template.yaml, TransactionsTable).
const (
	TransactionsByRequestIndex = "byPaymentRequest"
	TransactionsByNumberIndex  = "byTransactionNumber"
	// OpenAttemptsIndex is sparse: only transactions still waiting or
	// pending, or with a refund in processing, carry openShard and openUntil
	// (when the reconciler may step in), so the reconciler finds every
	// attempt a crash left mid-way with one query per shard.
	OpenAttemptsIndex = "byOpenAttempt"
)

// The stored forms of a transaction's parts (payment.Transaction is the
// entity; these carry the attribute names and the exact decimal encoding).

type txPayerRecord struct {
	Name    string `dynamodbav:"name,omitempty"`
	Email   string `dynamodbav:"email,omitempty"`
	Phone   string `dynamodbav:"phone,omitempty"`
	Country string `dynamodbav:"country,omitempty"`
}

type txNextActionRecord struct {
	Type      string `dynamodbav:"type"`
	QRPayload string `dynamodbav:"qrPayload,omitempty"`
	Reference string `dynamodbav:"reference,omitempty"`
}

type limitHoldRecord struct {
	Month  string `dynamodbav:"month"`
	Day    string `dynamodbav:"day"`
	Unit   string `dynamodbav:"unit"`
	Amount number `dynamodbav:"amount"`
}

type refundRecord struct {
	ID          string     `dynamodbav:"id"`
	Status      string     `dynamodbav:"status"`
	Amount      number     `dynamodbav:"amount"`
	Unit        string     `dynamodbav:"unit"`
	ProviderRef string     `dynamodbav:"providerRef,omitempty"`
	Code        string     `dynamodbav:"code,omitempty"`
	CreatedAt   time.Time  `dynamodbav:"createdAt"`
	CompletedAt *time.Time `dynamodbav:"completedAt,omitempty"`
	// After the first answer (after.go).
	Origin         string `dynamodbav:"origin,omitempty"`
	AcquirerStatus string `dynamodbav:"acquirerStatus,omitempty"`
	FailureReason  string `dynamodbav:"failureReason,omitempty"`
	Notified       string `dynamodbav:"notified,omitempty"`
	Rev            int64  `dynamodbav:"rev,omitempty"`
}

func toRefundRecord(r *payment.Refund) *refundRecord {
	if r == nil {
		return nil
	}
	return &refundRecord{ID: r.ID, Status: r.Status, Amount: number(r.Amount), Unit: r.Unit, ProviderRef: r.ProviderRef,
		Code: r.Code, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt,
		Origin: r.Origin, AcquirerStatus: r.AcquirerStatus, FailureReason: r.FailureReason, Notified: r.Notified, Rev: r.Rev}
}

func (r *refundRecord) refund() *payment.Refund {
	if r == nil {
		return nil
	}
	return &payment.Refund{ID: r.ID, Status: r.Status, Amount: decimal.Decimal(r.Amount), Unit: r.Unit, ProviderRef: r.ProviderRef,
		Code: r.Code, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt,
		Origin: r.Origin, AcquirerStatus: r.AcquirerStatus, FailureReason: r.FailureReason, Notified: r.Notified, Rev: r.Rev}
}

type transactionRecord struct {
	ID               int64               `dynamodbav:"id"`
	Number           string              `dynamodbav:"transactionNumber"`
	PaymentRequestID int64               `dynamodbav:"paymentRequestId"`
	MerchantID       string              `dynamodbav:"merchantId"`
	Status           int                 `dynamodbav:"status"`
	Code             string              `dynamodbav:"code,omitempty"`
	Message          string              `dynamodbav:"message,omitempty"`
	Method           string              `dynamodbav:"method"`
	Selector         int                 `dynamodbav:"selector,omitempty"`
	Channel          string              `dynamodbav:"channel,omitempty"`
	Amount           number              `dynamodbav:"amount"`
	Unit             string              `dynamodbav:"unit"`
	Card             *card.Masked        `dynamodbav:"card,omitempty"`
	Payer            *txPayerRecord      `dynamodbav:"payer,omitempty"`
	UPIID            string              `dynamodbav:"upiId,omitempty"`
	ProviderRef      string              `dynamodbav:"providerRef,omitempty"`
	Connector        string              `dynamodbav:"connector,omitempty"` // absent: the stage's legacy connector
	FailedOver       []string            `dynamodbav:"failedOver,omitempty"`
	Reference        string              `dynamodbav:"chargeRef,omitempty"`
	OpenShard        *int                `dynamodbav:"openShard,omitempty"`
	OpenUntil        int64               `dynamodbav:"openUntil,omitempty"` // unix ms
	NextAction       *txNextActionRecord `dynamodbav:"nextAction,omitempty"`
	ThreeDS          string              `dynamodbav:"threeDS,omitempty"`
	PendingUntil     int64               `dynamodbav:"pendingUntil,omitempty"` // unix ms
	Limits           *limitHoldRecord    `dynamodbav:"limits,omitempty"`
	Refund           *refundRecord       `dynamodbav:"refund,omitempty"`
	RecoverTries     int                 `dynamodbav:"recoverTries,omitempty"`
	After            *afterRecord        `dynamodbav:"after,omitempty"`
	CreatedAt        time.Time           `dynamodbav:"createdAt"`
	UpdatedAt        time.Time           `dynamodbav:"updatedAt"`
	SettledAt        *time.Time          `dynamodbav:"settledAt,omitempty"`
	ExpiresAt        int64               `dynamodbav:"expiresAt,omitempty"` // TTL: RecordRetention after creation
}

func toTransactionRecord(t *payment.Transaction) transactionRecord {
	rec := transactionRecord{
		ID: t.ID, Number: t.Number, PaymentRequestID: t.PaymentRequestID, MerchantID: t.MerchantID,
		Status: int(t.Status), Code: string(t.Code), Message: t.Message, Method: t.Method, Selector: t.Selector,
		Channel: string(t.Channel), Amount: number(t.Amount), Unit: t.Unit, Card: t.Card, UPIID: t.UPIID,
		ProviderRef: t.ProviderRef, Connector: t.Connector, FailedOver: t.FailedOver, Reference: t.Reference, ThreeDS: t.ThreeDS, Refund: toRefundRecord(t.Refund),
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(), SettledAt: t.SettledAt,
		RecoverTries: t.RecoverTries, After: toAfterRecord(t.After),
	}
	if !t.CreatedAt.IsZero() {
		rec.ExpiresAt = transactionExpiresAt(t.CreatedAt)
	}
	if p := t.Payer; p != nil {
		rec.Payer = &txPayerRecord{Name: p.Name, Email: p.Email, Phone: p.Phone, Country: p.Country}
	}
	if na := t.NextAction; na != nil {
		rec.NextAction = &txNextActionRecord{Type: na.Type, QRPayload: na.QRPayload, Reference: na.Reference}
	}
	if h := t.Limits; h != nil {
		rec.Limits = &limitHoldRecord{Month: h.Month, Day: h.Day, Unit: h.Unit, Amount: number(h.Amount)}
	}
	if !t.PendingUntil.IsZero() {
		rec.PendingUntil = t.PendingUntil.UnixMilli()
	}
	if !t.RecoverAfter.IsZero() && !t.Status.Final() {
		shard := openShard(t.ID)
		rec.OpenShard, rec.OpenUntil = &shard, t.RecoverAfter.UnixMilli()
	}
	return rec
}

func (rec transactionRecord) transaction() *payment.Transaction {
	t := &payment.Transaction{
		ID: rec.ID, Number: rec.Number, PaymentRequestID: rec.PaymentRequestID, MerchantID: rec.MerchantID,
		Status: payment.TransactionStatus(rec.Status), Code: codes.Code(rec.Code), Message: rec.Message,
		Method: rec.Method, Selector: rec.Selector, Channel: payment.Channel(rec.Channel), Amount: decimal.Decimal(rec.Amount), Unit: rec.Unit,
		Card: rec.Card, UPIID: rec.UPIID, ProviderRef: rec.ProviderRef, Connector: rec.Connector, FailedOver: rec.FailedOver, Reference: rec.Reference,
		ThreeDS: rec.ThreeDS, Refund: rec.Refund.refund(),
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, SettledAt: rec.SettledAt,
		RecoverTries: rec.RecoverTries, After: rec.After.after(),
	}
	if p := rec.Payer; p != nil {
		t.Payer = &payment.TxPayer{Name: p.Name, Email: p.Email, Phone: p.Phone, Country: p.Country}
	}
	if na := rec.NextAction; na != nil {
		t.NextAction = &payment.TxNextAction{Type: na.Type, QRPayload: na.QRPayload, Reference: na.Reference}
	}
	if h := rec.Limits; h != nil {
		t.Limits = &payment.LimitHold{Month: h.Month, Day: h.Day, Unit: h.Unit, Amount: decimal.Decimal(h.Amount)}
	}
	if rec.PendingUntil != 0 {
		t.PendingUntil = time.UnixMilli(rec.PendingUntil).UTC()
	}
	if rec.OpenUntil != 0 {
		t.RecoverAfter = time.UnixMilli(rec.OpenUntil).UTC()
	}
	return t
}

func openShard(id int64) int { return int(uint64(id) % payment.OpenShards) }

func unmarshalTransaction(item map[string]types.AttributeValue) (*payment.Transaction, error) {
	var rec transactionRecord
	if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
		return nil, fmt.Errorf("unmarshal transaction: %w", err)
	}
	return rec.transaction(), nil
}

func timeAV(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberS{Value: t.UTC().Format(time.RFC3339Nano)}
}

func strAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func txKey(id int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": numberAV(id)}
}

// CreateTransaction stores a new transaction; Exists when the id is taken
// (the caller draws another id: a transaction is never shared). The payment
// path writes it ahead of the provider call, status waiting, with its
// Reference and RecoverAfter.
func (s *Store) CreateTransaction(ctx context.Context, t *payment.Transaction) error {
	item, err := attributevalue.MarshalMap(toTransactionRecord(t))
	if err != nil {
		return fmt.Errorf("marshal transaction %d: %w", t.ID, err)
	}
	return s.putIfAbsent(ctx, s.t.Transactions, "id", item, fmt.Sprintf("transaction %d", t.ID))
}

// Transaction loads a transaction by id (strongly consistent).
func (s *Store) Transaction(ctx context.Context, id int64) (*payment.Transaction, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Transactions, Key: txKey(id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get transaction %d: %w", id, err)
	}
	if out.Item == nil {
		return nil, notFound()
	}
	return unmarshalTransaction(out.Item)
}

// TransactionByNumber finds a transaction by its public number (GSI query,
// eventually consistent: a transaction created a moment ago may be missing).
func (s *Store) TransactionByNumber(ctx context.Context, num string) (*payment.Transaction, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.t.Transactions,
		IndexName:                 aws.String(TransactionsByNumberIndex),
		KeyConditionExpression:    aws.String("transactionNumber = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": strAV(num)},
		Limit:                     aws.Int32(2),
	})
	if err != nil {
		return nil, fmt.Errorf("query transaction by number: %w", err)
	}
	if len(out.Items) != 1 {
		return nil, notFound()
	}
	return unmarshalTransaction(out.Items[0])
}

// TransactionsOfRequest lists a payment request's transactions, oldest first.
func (s *Store) TransactionsOfRequest(ctx context.Context, requestID int64) ([]*payment.Transaction, error) {
	var txs []*payment.Transaction
	var start map[string]types.AttributeValue
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &s.t.Transactions,
			IndexName:                 aws.String(TransactionsByRequestIndex),
			KeyConditionExpression:    aws.String("paymentRequestId = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": numberAV(requestID)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("query transactions of request %d: %w", requestID, err)
		}
		for _, it := range out.Items {
			t, err := unmarshalTransaction(it)
			if err != nil {
				return nil, err
			}
			txs = append(txs, t)
		}
		if len(out.LastEvaluatedKey) == 0 {
			// Ids are random: order by creation time.
			sort.SliceStable(txs, func(i, j int) bool { return txs[i].CreatedAt.Before(txs[j].CreatedAt) })
			return txs, nil
		}
		start = out.LastEvaluatedKey
	}
}

// MarkPending applies p if the transaction is still waiting. Conflict
// (with the current transaction) otherwise.
func (s *Store) MarkPending(ctx context.Context, p payment.Pending) (*payment.Transaction, error) {
	u := (&update{}).set("status", numberAV(int64(payment.TxPending))).set("message", strAV(p.Message)).
		set("updatedAt", timeAV(p.Now)).set("pendingUntil", numberAV(p.PendingUntil.UnixMilli())).
		set("openUntil", numberAV(p.RecoverAfter.UnixMilli()))
	if p.ProviderRef != "" {
		u.setOnce("providerRef", strAV(p.ProviderRef))
	}
	if p.ThreeDS != "" {
		u.set("threeDS", strAV(p.ThreeDS))
	}
	if na := p.NextAction; na != nil {
		av, err := attributevalue.Marshal(txNextActionRecord{Type: na.Type, QRPayload: na.QRPayload, Reference: na.Reference})
		if err != nil {
			return nil, fmt.Errorf("marshal next action: %w", err)
		}
		u.set("nextAction", av)
	}
	return s.updateTx(ctx, p.TransactionID, u, "#status = :waiting",
		map[string]types.AttributeValue{":waiting": numberAV(int64(payment.TxWaiting))})
}

// FailOver moves a waiting transaction from connector f.From to f.To.
// Conflict with the stored transaction when it is no longer waiting on
// f.From (finished meanwhile, or moved by an earlier try whose answer was
// lost: the caller reads which).
func (s *Store) FailOver(ctx context.Context, f payment.Failover) (*payment.Transaction, error) {
	list, err := attributevalue.Marshal(f.FailedOver)
	if err != nil {
		return nil, fmt.Errorf("marshal failover list: %w", err)
	}
	u := (&update{}).set("connector", strAV(f.To)).set("failedOver", list).set("updatedAt", timeAV(f.Now))
	cond, vals := "#status = :waiting AND attribute_not_exists(#connector)", map[string]types.AttributeValue{":waiting": numberAV(int64(payment.TxWaiting))}
	if f.From != "" {
		cond, vals[":from"] = "#status = :waiting AND #connector = :from", strAV(f.From)
	}
	return s.updateTx(ctx, f.TransactionID, u, cond, vals)
}

// SettleTransaction applies st if the transaction is still waiting or
// pending and returns the updated transaction. A transaction that is already
// final yields Conflict with the stored transaction: a late, repeated or
// reordered result never changes a final state. NotFound when missing.
func (s *Store) SettleTransaction(ctx context.Context, st payment.Settlement) (*payment.Transaction, error) {
	in, err := s.settleInput(st)
	if err != nil {
		return nil, err
	}
	return s.updateTxInput(ctx, st.TransactionID, in)
}

// settleInput is the guarded UpdateItem of SettleTransaction.
func (s *Store) settleInput(st payment.Settlement) (*dynamodb.UpdateItemInput, error) {
	u := (&update{}).set("status", numberAV(int64(st.Status))).set("message", strAV(st.Message)).
		set("updatedAt", timeAV(st.Now)).set("settledAt", timeAV(st.Now)).
		remove("nextAction", "pendingUntil", "openShard", "openUntil")
	if st.Code != "" {
		u.set("code", strAV(string(st.Code)))
	}
	if st.ProviderRef != "" {
		u.setOnce("providerRef", strAV(st.ProviderRef))
	}
	if st.ThreeDS != "" {
		u.set("threeDS", strAV(st.ThreeDS))
	}
	if st.Event.EventID != "" {
		if err := u.outbox(st.Event, st.Now); err != nil {
			return nil, err
		}
	}
	return s.txInput(st.TransactionID, u, "#status IN (:waiting, :pending)", map[string]types.AttributeValue{
		":waiting": numberAV(int64(payment.TxWaiting)), ":pending": numberAV(int64(payment.TxPending))}), nil
}

// updateTx applies u to transaction id under cond. On a failed condition it
// returns the current transaction with conflict(err), or notFound().
func (s *Store) updateTx(ctx context.Context, id int64, u *update, cond string, condVals map[string]types.AttributeValue) (*payment.Transaction, error) {
	return s.updateTxInput(ctx, id, s.txInput(id, u, cond, condVals))
}

// txInput is the UpdateItem of u on transaction id under cond.
func (s *Store) txInput(id int64, u *update, cond string, condVals map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	in := u.input(s.t.Transactions, txKey(id))
	in.ConditionExpression = aws.String("attribute_exists(id) AND " + cond)
	for k, v := range condVals {
		in.ExpressionAttributeValues[k] = v
	}
	in.ExpressionAttributeNames["#status"] = "status" // every caller's condition names it
	return in
}

func (s *Store) updateTxInput(ctx context.Context, id int64, in *dynamodb.UpdateItemInput) (*payment.Transaction, error) {
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.db.UpdateItem(ctx, in)
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		if len(cf.Item) == 0 {
			cur, gerr := s.Transaction(ctx, id)
			if gerr != nil {
				return nil, gerr
			}
			return cur, conflict(err)
		}
		cur, uerr := unmarshalTransaction(cf.Item)
		if uerr != nil {
			return nil, uerr
		}
		return cur, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("update transaction %d: %w", id, err)
	}
	return unmarshalTransaction(out.Attributes)
}

// OpenAttempts lists transactions of one shard whose RecoverAfter is before
// cutoff (OpenAttemptsIndex).
func (s *Store) OpenAttempts(ctx context.Context, shard int, cutoff time.Time, limit int32) ([]*payment.Transaction, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.t.Transactions, IndexName: aws.String(OpenAttemptsIndex),
		KeyConditionExpression: aws.String("openShard = :s AND openUntil < :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": numberAV(int64(shard)), ":c": numberAV(cutoff.UnixMilli()),
		},
		Limit: aws.Int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("query open attempts shard %d: %w", shard, err)
	}
	txs := make([]*payment.Transaction, 0, len(out.Items))
	for _, it := range out.Items {
		// The index projects keys only where the template says so; read the item.
		id, ok := it["id"].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(id.Value, 10, 64)
		tx, err := s.Transaction(ctx, n)
		if errkind.Is(err, errkind.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		txs = append(txs, tx)
	}
	return txs, nil
}

// BeginRefund records a refund in progress on an approved transaction of
// merchantID that has none yet. Conflict when the transaction is not
// approved, belongs to another merchant or already has a refund.
//
// recoverAfter opens the transaction (OpenAttemptsIndex) until the refund
// completes, so a refund left in processing by a crash is finished by the
// reconciler.
func (s *Store) BeginRefund(ctx context.Context, txID int64, merchantID string, r payment.Refund, recoverAfter time.Time) (*payment.Transaction, error) {
	rv, err := attributevalue.Marshal(toRefundRecord(&r))
	if err != nil {
		return nil, fmt.Errorf("marshal refund: %w", err)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.t.Transactions,
		Key:                      txKey(txID),
		UpdateExpression:         aws.String("SET refund = :r, updatedAt = :now, openShard = :shard, openUntil = :open"),
		ConditionExpression:      aws.String("#status = :approved AND merchantId = :m AND attribute_not_exists(refund)"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":r": rv, ":now": timeAV(r.CreatedAt), ":approved": numberAV(int64(payment.TxApproved)), ":m": strAV(merchantID),
			":shard": numberAV(int64(openShard(txID))), ":open": numberAV(recoverAfter.UnixMilli()),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return nil, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("begin refund of transaction %d: %w", txID, err)
	}
	return unmarshalTransaction(out.Attributes)
}

// CompleteRefund moves the transaction's processing refund refundID to its
// final status. Conflict when that refund is no longer processing.
func (s *Store) CompleteRefund(ctx context.Context, txID int64, refundID, status, providerRef string, code codes.Code, now time.Time) (*payment.Transaction, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.t.Transactions,
		Key:                      txKey(txID),
		UpdateExpression:         aws.String("SET refund.#status = :st, refund.providerRef = :ref, refund.code = :code, refund.completedAt = :now, updatedAt = :now REMOVE openShard, openUntil"),
		ConditionExpression:      aws.String("refund.id = :rid AND refund.#status = :processing"),
		ExpressionAttributeNames: map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":st": strAV(status), ":ref": strAV(providerRef), ":code": strAV(string(code)), ":now": timeAV(now),
			":rid": strAV(refundID), ":processing": strAV(payment.RefundProcessing),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return nil, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("complete refund of transaction %d: %w", txID, err)
	}
	return unmarshalTransaction(out.Attributes)
}

// ---- Payment request side of an attempt ----------------------------------

// LeasePaymentRequest takes the attempt lease with one conditional write and
// returns the request: it must belong to the merchant, be unpaid, match the
// expected amount and unit, and no attempt may hold it. An expired lease is
// not taken over here: its attempt may have charged, so the service first
// drives it to a final state (which releases the lease). Any condition
// failing yields Conflict; PaymentRequestLease tells which.
func (s *Store) LeasePaymentRequest(ctx context.Context, l payment.Lease) (*payment.Request, error) {
	cond := "merchantId = :m AND #status = :unpaid AND attribute_not_exists(attemptTx)"
	vals := map[string]types.AttributeValue{
		":m": strAV(l.MerchantID), ":unpaid": numberAV(int64(payment.RequestUnpaid)),
		":tx": numberAV(l.TransactionID), ":until": numberAV(l.Until.UnixMilli()), ":now": timeAV(l.Now), ":one": numberAV(1),
	}
	if l.Amount != nil {
		cond += " AND amount = :amt"
		vals[":amt"] = &types.AttributeValueMemberN{Value: l.Amount.String()}
	}
	if l.Unit != "" {
		cond += " AND #unit = :unit"
		vals[":unit"] = strAV(l.Unit)
	}
	names := map[string]string{"#status": "status"}
	if l.Unit != "" {
		names["#unit"] = "unit"
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.t.PaymentRequests,
		Key:                       map[string]types.AttributeValue{"id": numberAV(l.RequestID)},
		UpdateExpression:          aws.String("SET attemptTx = :tx, leaseUntil = :until, updatedAt = :now ADD version :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return nil, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("lease payment request %d: %w", l.RequestID, err)
	}
	return unmarshalRequest(out.Attributes)
}

// CreateLeasedPaymentRequest stores a new request whose attempt lease is
// already held by txID (POST /payments/h2h/{n} creating its own request):
// one write instead of a create and a lease.
func (s *Store) CreateLeasedPaymentRequest(ctx context.Context, r *payment.Request, txID int64, until time.Time) error {
	r.Version = 1
	item, err := attributevalue.MarshalMap(toRequestRecord(r))
	if err != nil {
		return fmt.Errorf("marshal payment request %d: %w", r.ID, err)
	}
	item["attemptTx"] = numberAV(txID)
	item["leaseUntil"] = numberAV(until.UnixMilli())
	return s.putIfAbsent(ctx, s.t.PaymentRequests, "id", item, fmt.Sprintf("payment request %d", r.ID))
}

// PaymentRequestLease loads a request together with its attempt lease.
func (s *Store) PaymentRequestLease(ctx context.Context, id int64) (*payment.Request, payment.AttemptLease, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.PaymentRequests, Key: map[string]types.AttributeValue{"id": numberAV(id)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, payment.AttemptLease{}, fmt.Errorf("get payment request %d: %w", id, err)
	}
	if out.Item == nil {
		return nil, payment.AttemptLease{}, notFound()
	}
	r, err := unmarshalRequest(out.Item)
	if err != nil {
		return nil, payment.AttemptLease{}, err
	}
	var l payment.AttemptLease
	if err := attributevalue.UnmarshalMap(out.Item, &l); err != nil {
		return nil, payment.AttemptLease{}, fmt.Errorf("unmarshal lease of payment request %d: %w", id, err)
	}
	return r, l, nil
}

func unmarshalRequest(item map[string]types.AttributeValue) (*payment.Request, error) {
	var rec requestRecord
	if err := attributevalue.UnmarshalMap(item, &rec); err != nil {
		return nil, fmt.Errorf("unmarshal payment request: %w", err)
	}
	return rec.request(), nil
}

// CommitAttempt is the state transition of a payment request for one
// attempt, in one conditional write guarded by "#status = unpaid AND
// attemptTx = the attempt's transaction":
//
//   - approved (1): the request becomes paid (1), exactly once;
//   - declined (2): the request stays unpaid and can be paid again;
//   - pending (3): the lease is extended until the attempt settles.
//
// It sets transactionId, transactionNumber, transactionStatusId and lastLog,
// and for a final status releases the lease. The notification goes into the
// transaction's outbox when the transaction settles, not here: one entry per
// transaction. Cancellation (status 3 guarded by status 2 and no attempt)
// and this write exclude each other. Conflict when the guard fails.
func (s *Store) CommitAttempt(ctx context.Context, c payment.AttemptCommit) (*payment.Request, error) {
	in, err := s.commitInput(c)
	if err != nil {
		return nil, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.db.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return nil, conflict(err)
	}
	if err != nil {
		return nil, fmt.Errorf("commit attempt %d on payment request %d: %w", c.TransactionID, c.RequestID, err)
	}
	return unmarshalRequest(out.Attributes)
}

// commitInput is the guarded UpdateItem of CommitAttempt.
func (s *Store) commitInput(c payment.AttemptCommit) (*dynamodb.UpdateItemInput, error) {
	ll, err := attributevalue.Marshal(lastLogRecord{TransactionStatus: int(c.Status), Message: c.Message, Code: string(c.Code)})
	if err != nil {
		return nil, fmt.Errorf("marshal lastLog: %w", err)
	}
	set := "SET transactionId = :tx, transactionStatusId = :ts, lastLog = :ll, updatedAt = :now"
	vals := map[string]types.AttributeValue{
		":tx": numberAV(c.TransactionID), ":ts": numberAV(int64(c.Status)),
		":ll": ll, ":now": timeAV(c.Now), ":unpaid": numberAV(int64(payment.RequestUnpaid)), ":one": numberAV(1),
	}
	if c.TransactionNumber != "" { // a callback may not know it; the pending commit wrote it
		set += ", transactionNumber = :num"
		vals[":num"] = strAV(c.TransactionNumber)
	}
	expr := ""
	switch c.Status {
	case payment.TxApproved, payment.TxDeclined:
		if c.Status == payment.TxApproved {
			set += ", #status = :paid, expiresAt = :exp"
			vals[":paid"] = numberAV(int64(payment.RequestPaid))
			vals[":exp"] = numberAV(requestExpiresAt(time.Time{}, c.Now))
		}
		expr = set + " REMOVE attemptTx, leaseUntil ADD version :one"
	case payment.TxPending:
		set += ", leaseUntil = :until"
		vals[":until"] = numberAV(c.LeaseUntil.UnixMilli())
		expr = set + " ADD version :one"
	default:
		return nil, fmt.Errorf("commit attempt: status %d is not 1, 2 or 3", c.Status)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 &s.t.PaymentRequests,
		Key:                       map[string]types.AttributeValue{"id": numberAV(c.RequestID)},
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#status = :unpaid AND attemptTx = :tx"),
		ExpressionAttributeNames:  map[string]string{"#status": "status"},
		ExpressionAttributeValues: vals,
	}, nil
}

// CommitAndSettle is CommitAttempt and SettleTransaction of a final
// outcome in one TransactWriteItems, each under its own guard: the request
// commit and the transaction's settle (with its outbox entry) happen
// together or not at all. A synchronous outcome knows both at the same
// moment, so the attempt costs one write instead of two. Conflict when
// either guard fails: nothing was written, and the caller takes the
// step-by-step path (CommitAttempt, then SettleTransaction), which tells
// the cases apart.
func (s *Store) CommitAndSettle(ctx context.Context, c payment.AttemptCommit, st payment.Settlement) error {
	if !c.Status.Final() || c.Status != st.Status || c.TransactionID != st.TransactionID {
		return fmt.Errorf("commit and settle: transaction %d status %d/%d is not one final outcome", c.TransactionID, c.Status, st.Status)
	}
	commit, err := s.commitInput(c)
	if err != nil {
		return err
	}
	settle, err := s.settleInput(st)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: transactUpdate(commit)}, {Update: transactUpdate(settle)},
	}})
	if failed, ok := cancelled(err); ok && slices.Contains(failed, true) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("commit and settle transaction %d on payment request %d: %w", c.TransactionID, c.RequestID, err)
	}
	return nil
}

// CreateLeasedRequestWithTransaction stores a new payment request whose
// attempt lease is held by t, and t's write-ahead record, in one
// TransactWriteItems: both exist or neither. Exists when the request id
// is taken (nothing written); Conflict when only t's id is
// (an id collision: the caller draws another).
func (s *Store) CreateLeasedRequestWithTransaction(ctx context.Context, r *payment.Request, t *payment.Transaction, until time.Time) error {
	r.Version = 1
	ritem, err := attributevalue.MarshalMap(toRequestRecord(r))
	if err != nil {
		return fmt.Errorf("marshal payment request %d: %w", r.ID, err)
	}
	ritem["attemptTx"] = numberAV(t.ID)
	ritem["leaseUntil"] = numberAV(until.UnixMilli())
	titem, err := attributevalue.MarshalMap(toTransactionRecord(t))
	if err != nil {
		return fmt.Errorf("marshal transaction %d: %w", t.ID, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.t.PaymentRequests, Item: ritem, ConditionExpression: aws.String("attribute_not_exists(id)")}},
		{Put: &types.Put{TableName: &s.t.Transactions, Item: titem, ConditionExpression: aws.String("attribute_not_exists(id)")}},
	}})
	if failed, ok := cancelled(err); ok && (failed[0] || failed[1]) {
		if failed[0] {
			return exists(err)
		}
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("create payment request %d with transaction %d: %w", r.ID, t.ID, err)
	}
	return nil
}

// cancelled reports whether err is a cancelled TransactWriteItems, and
// which of its items failed their condition.
func cancelled(err error) ([]bool, bool) {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil, false
	}
	failed := make([]bool, 2)
	for i, r := range tc.CancellationReasons {
		if i >= len(failed) {
			failed = append(failed, false)
		}
		failed[i] = aws.ToString(r.Code) == "ConditionalCheckFailed"
	}
	return failed, true
}

// transactUpdate is UpdateItem in as an item of a TransactWriteItems.
func transactUpdate(in *dynamodb.UpdateItemInput) *types.Update {
	return &types.Update{TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues}
}

// ReleaseLease gives up txID's lease without recording an attempt (the
// attempt was refused before anything was charged). Conflict when txID
// does not hold the lease.
func (s *Store) ReleaseLease(ctx context.Context, requestID, txID int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.t.PaymentRequests,
		Key:                       map[string]types.AttributeValue{"id": numberAV(requestID)},
		UpdateExpression:          aws.String("REMOVE attemptTx, leaseUntil"),
		ConditionExpression:       aws.String("attemptTx = :tx"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":tx": numberAV(txID)},
	})
	if isConditionFailed(err) {
		return conflict(err)
	}
	if err != nil {
		return fmt.Errorf("release lease of payment request %d: %w", requestID, err)
	}
	return nil
}

// ---- Provider callback de-duplication -------------------------------------

const callbackEventPrefix = "cbevt#"

// MarkCallbackEvent records a provider event id after it was processed (for
// the operator: which deliveries arrived); Exists when it was recorded
// before. Processing never depends on it: a callback is an idempotent state
// transition, so a record left by a crash cannot hide an unprocessed event.
// The record expires (TTL) after ttl.
func (s *Store) MarkCallbackEvent(ctx context.Context, eventID string, now time.Time, ttl time.Duration) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.t.Operations,
		Item: map[string]types.AttributeValue{
			"pk": strAV(callbackEventPrefix + eventID), "sk": strAV("event"),
			"receivedAt": timeAV(now), "expiresAt": numberAV(now.Add(ttl).Unix()),
		},
		ConditionExpression: aws.String("attribute_not_exists(pk) OR expiresAt < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": numberAV(now.Unix()),
		},
	})
	if isConditionFailed(err) {
		return exists(err)
	}
	if err != nil {
		return fmt.Errorf("record callback event: %w", err)
	}
	return nil
}
