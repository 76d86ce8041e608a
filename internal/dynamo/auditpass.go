package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/payment"
)

// The full pass's checkpoint is one item (pk "auditpass", sk "state"): the
// pass's id and times, and one attribute per cursor ("c0", "c1", …) that
// each invocation moves with a conditional update of that attribute alone.

type cursorItem struct {
	Table   string `dynamodbav:"t"`
	Segment int    `dynamodbav:"s"`
	Key     string `dynamodbav:"k"`
	Done    bool   `dynamodbav:"d"`
	Scanned int64  `dynamodbav:"n"`
}

type passItem struct {
	PK             string `dynamodbav:"pk"`
	SK             string `dynamodbav:"sk"`
	ID             int64  `dynamodbav:"id"`
	StartedAt      int64  `dynamodbav:"startedAt,omitempty"`
	Running        bool   `dynamodbav:"running"`
	Segments       int    `dynamodbav:"segments"`
	Estimate       int64  `dynamodbav:"estimate"`
	Since          int64  `dynamodbav:"since,omitempty"`
	Cursors        int    `dynamodbav:"cursors"`
	LastStartedAt  int64  `dynamodbav:"lastStartedAt,omitempty"`
	LastFinishedAt int64  `dynamodbav:"lastFinishedAt,omitempty"`
	LastScanned    int64  `dynamodbav:"lastScanned,omitempty"`
}

func passKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": strAV(auditPassPK), "sk": strAV(auditStateSK)}
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func timeMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// LoadPass reads the checkpoint (consistent).
func (a *AuditStore) LoadPass(ctx context.Context) (audit.Pass, error) {
	item, err := a.get(ctx, a.s.t.Operations, passKey(), time.Now())
	if err != nil || item == nil {
		return audit.Pass{}, err
	}
	var p passItem
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return audit.Pass{}, fmt.Errorf("unmarshal audit pass: %w", err)
	}
	out := audit.Pass{ID: p.ID, StartedAt: msTime(p.StartedAt), Running: p.Running, Segments: p.Segments, Estimate: p.Estimate, Since: msTime(p.Since),
		LastStartedAt: msTime(p.LastStartedAt), LastFinishedAt: msTime(p.LastFinishedAt), LastScanned: p.LastScanned}
	for i := 0; i < p.Cursors; i++ {
		var c cursorItem
		av, ok := item["c"+strconv.Itoa(i)]
		if !ok {
			return audit.Pass{}, fmt.Errorf("audit pass %d lacks cursor %d", p.ID, i)
		}
		if err := attributevalue.Unmarshal(av, &c); err != nil {
			return audit.Pass{}, fmt.Errorf("unmarshal audit pass cursor: %w", err)
		}
		out.Cursors = append(out.Cursors, audit.Cursor{Table: c.Table, Segment: c.Segment, Key: c.Key, Done: c.Done, Scanned: c.Scanned})
	}
	return out, nil
}

// SavePass replaces the checkpoint prev with next, on condition that it is
// still prev (its id and whether it runs): ErrPassMoved otherwise.
func (a *AuditStore) SavePass(ctx context.Context, prev, next audit.Pass) error {
	item, err := attributevalue.MarshalMap(passItem{PK: auditPassPK, SK: auditStateSK, ID: next.ID, StartedAt: timeMs(next.StartedAt),
		Running: next.Running, Segments: next.Segments, Estimate: next.Estimate, Since: timeMs(next.Since), Cursors: len(next.Cursors),
		LastStartedAt: timeMs(next.LastStartedAt), LastFinishedAt: timeMs(next.LastFinishedAt), LastScanned: next.LastScanned})
	if err != nil {
		return fmt.Errorf("marshal audit pass: %w", err)
	}
	for i, c := range next.Cursors {
		if item["c"+strconv.Itoa(i)], err = attributevalue.Marshal(cursorItem(c)); err != nil {
			return fmt.Errorf("marshal audit pass cursor: %w", err)
		}
	}
	in := &dynamodb.PutItemInput{TableName: &a.s.t.Operations, Item: item}
	if prev.ID == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	} else {
		in.ConditionExpression = aws.String("id = :id AND running = :r")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":id": numberAV(prev.ID), ":r": &types.AttributeValueMemberBOOL{Value: prev.Running}}
	}
	_, err = a.s.db.PutItem(ctx, in)
	if isConditionFailed(err) {
		return audit.ErrPassMoved
	}
	if err != nil {
		return fmt.Errorf("save audit pass: %w", err)
	}
	return nil
}

// AdvanceCursor moves cursor i of pass id from old to next, on condition
// that the pass still runs and the cursor is still at old.
func (a *AuditStore) AdvanceCursor(ctx context.Context, id int64, i int, old, next audit.Cursor) error {
	av, err := attributevalue.Marshal(cursorItem(next))
	if err != nil {
		return fmt.Errorf("marshal audit pass cursor: %w", err)
	}
	_, err = a.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &a.s.t.Operations, Key: passKey(),
		UpdateExpression:         aws.String("SET #c = :next"),
		ConditionExpression:      aws.String("id = :id AND running = :true AND #c.k = :k AND #c.n = :n AND #c.d = :false"),
		ExpressionAttributeNames: map[string]string{"#c": "c" + strconv.Itoa(i)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": av, ":id": numberAV(id), ":k": strAV(old.Key),
			":n": numberAV(old.Scanned), ":true": &types.AttributeValueMemberBOOL{Value: true}, ":false": &types.AttributeValueMemberBOOL{Value: false}},
	})
	if isConditionFailed(err) {
		return audit.ErrPassMoved
	}
	if err != nil {
		return fmt.Errorf("advance audit pass cursor: %w", err)
	}
	return nil
}

// scanTables maps the audit's tables to the stack's.
func (a *AuditStore) scanTable(t string) (string, error) {
	switch t {
	case audit.TableTransactions:
		return a.s.t.Transactions, nil
	case audit.TableRequests:
		return a.s.t.PaymentRequests, nil
	case audit.TableLedger:
		return a.s.t.Operations, nil
	}
	return "", fmt.Errorf("audit: no table %q", t)
}

// A scan position (LastEvaluatedKey) as a cursor's Key: the key's
// attributes, each a string or a number.
type scanKeyAttr struct {
	S string `json:"S,omitempty"`
	N string `json:"N,omitempty"`
}

func encodeScanKey(k map[string]types.AttributeValue) (string, error) {
	m := map[string]scanKeyAttr{}
	for name, v := range k {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			m[name] = scanKeyAttr{S: v.Value}
		case *types.AttributeValueMemberN:
			m[name] = scanKeyAttr{N: v.Value}
		default:
			return "", fmt.Errorf("scan key attribute %s is %T", name, v)
		}
	}
	b, err := json.Marshal(m)
	return string(b), err
}

func decodeScanKey(s string) (map[string]types.AttributeValue, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]scanKeyAttr
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("audit pass cursor key %q: %w", s, err)
	}
	out := map[string]types.AttributeValue{}
	for name, v := range m {
		if v.N != "" {
			out[name] = &types.AttributeValueMemberN{Value: v.N}
		} else {
			out[name] = strAV(v.S)
		}
	}
	return out, nil
}

// ScanPage reads one page of c's segment (eventually consistent: each
// subject found is judged on its own consistent reads) and turns it into
// the subjects worth judging, of the records written since `since` (zero:
// all):
//
//   - transactions: each names its request (once per page); an open one
//     whenever it was written (a deadline breaks it without a write);
//   - requests: a paid request whose named transaction is its own is
//     judged through that transaction already; the others (naming none, a
//     missing one, another request's) are subjects;
//   - ledger (the operations table, filtered to the sandbox ledger): each
//     charge that took money.
func (a *AuditStore) ScanPage(ctx context.Context, c audit.Cursor, segments, limit int, since time.Time) (audit.Page, error) {
	table, err := a.scanTable(c.Table)
	if err != nil {
		return audit.Page{}, err
	}
	start, err := decodeScanKey(c.Key)
	if err != nil {
		return audit.Page{}, err
	}
	in := &dynamodb.ScanInput{TableName: &table, Segment: aws.Int32(int32(c.Segment)), TotalSegments: aws.Int32(int32(segments)),
		Limit: aws.Int32(int32(limit)), ExclusiveStartKey: start}
	switch c.Table {
	case audit.TableTransactions:
		in.ProjectionExpression = aws.String("id, paymentRequestId, #s, refund.#s, updatedAt")
		in.ExpressionAttributeNames = map[string]string{"#s": "status"}
	case audit.TableRequests:
		in.ProjectionExpression = aws.String("id, #s, transactionId, expiresAt, updatedAt")
		in.ExpressionAttributeNames = map[string]string{"#s": "status"}
	case audit.TableLedger:
		in.FilterExpression = aws.String("begins_with(pk, :l)")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":l": strAV(ledgerPrefix)}
	}
	out, err := a.s.db.Scan(ctx, in)
	if err != nil {
		return audit.Page{}, fmt.Errorf("audit pass: scan %s segment %d: %w", table, c.Segment, err)
	}
	page := audit.Page{Scanned: int(out.ScannedCount), Done: len(out.LastEvaluatedKey) == 0}
	if !page.Done {
		if page.Next, err = encodeScanKey(out.LastEvaluatedKey); err != nil {
			return audit.Page{}, err
		}
	}
	seen := map[int64]bool{}
	now := time.Now()
	switch c.Table {
	case audit.TableTransactions:
		for _, item := range out.Items {
			var t struct {
				RequestID int64 `dynamodbav:"paymentRequestId"`
				Status    int   `dynamodbav:"status"`
				Refund    *struct {
					Status string `dynamodbav:"status"`
				} `dynamodbav:"refund"`
				UpdatedAt time.Time `dynamodbav:"updatedAt"`
			}
			if err := attributevalue.UnmarshalMap(item, &t); err != nil {
				return audit.Page{}, fmt.Errorf("audit pass: transaction: %w", err)
			}
			open := !payment.TransactionStatus(t.Status).Final() || (t.Refund != nil && t.Refund.Status == payment.RefundProcessing)
			if !open && t.UpdatedAt.Before(since) {
				continue
			}
			if t.RequestID != 0 && !seen[t.RequestID] {
				seen[t.RequestID] = true
				page.Subjects = append(page.Subjects, audit.RequestSubject(t.RequestID))
			}
		}
	case audit.TableRequests:
		named := map[int64]int64{} // transaction → the paid request naming it
		var keys []batchKey
		for _, item := range out.Items {
			if expired(item, now) {
				continue
			}
			var r struct {
				ID        int64     `dynamodbav:"id"`
				Status    int       `dynamodbav:"status"`
				TxID      int64     `dynamodbav:"transactionId"`
				UpdatedAt time.Time `dynamodbav:"updatedAt"`
			}
			if err := attributevalue.UnmarshalMap(item, &r); err != nil {
				return audit.Page{}, fmt.Errorf("audit pass: request: %w", err)
			}
			if payment.RequestStatus(r.Status) != payment.RequestPaid || r.UpdatedAt.Before(since) {
				continue
			}
			if r.TxID == 0 {
				page.Subjects = append(page.Subjects, audit.RequestSubject(r.ID))
				continue
			}
			named[r.TxID] = r.ID
			keys = append(keys, batchKey{table: a.s.t.Transactions, key: txKey(r.TxID)})
		}
		own := map[int64]bool{}
		err := a.s.batchGet(ctx, keys, func(_ string, item map[string]types.AttributeValue) error {
			var t struct {
				ID        int64 `dynamodbav:"id"`
				RequestID int64 `dynamodbav:"paymentRequestId"`
			}
			if err := attributevalue.UnmarshalMap(item, &t); err != nil {
				return err
			}
			if named[t.ID] == t.RequestID && !expired(item, now) {
				own[t.ID] = true
			}
			return nil
		})
		if err != nil {
			return audit.Page{}, fmt.Errorf("audit pass: transactions named by paid requests: %w", err)
		}
		for tx, req := range named {
			if !own[tx] {
				page.Subjects = append(page.Subjects, audit.RequestSubject(req))
			}
		}
	case audit.TableLedger:
		for _, item := range out.Items {
			e, err := auditLedger(item)
			if err != nil {
				return audit.Page{}, err
			}
			if e.Taken() && !expired(item, now) && !e.UpdatedAt.Before(since) {
				page.Subjects = append(page.Subjects, audit.ChargeSubject(e.Reference))
			}
		}
	}
	return page, nil
}

// UnfinishedBatchJobs are the jobs with an open marker.
func (a *AuditStore) UnfinishedBatchJobs(ctx context.Context) ([]audit.Subject, error) {
	open, err := a.s.OpenBatchJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]audit.Subject, 0, len(open))
	for _, o := range open {
		out = append(out, audit.JobSubject(o.MerchantID, o.JobID))
	}
	return out, nil
}

// tableDescriber is the client's DescribeTable (the SDK client has it;
// the store's wrappers keep the client it came from).
type tableDescriber interface {
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// EstimateItems sums the tables' item counts (DynamoDB refreshes them about
// every six hours): 0 when the client cannot tell.
func (a *AuditStore) EstimateItems(ctx context.Context, tables []string) (int64, error) {
	if a.s.describe == nil {
		return 0, nil
	}
	var n int64
	for _, t := range tables {
		name, err := a.scanTable(t)
		if err != nil {
			return 0, err
		}
		out, err := a.s.describe.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
		if err != nil {
			var nf *types.ResourceNotFoundException
			if errors.As(err, &nf) {
				return 0, err
			}
			return 0, fmt.Errorf("describe %s: %w", name, err)
		}
		n += aws.ToInt64(out.Table.ItemCount)
	}
	return n, nil
}

// Judge is the audit's judge over this store's records.
func (a *AuditStore) Judge(grace time.Duration, sandbox bool) *audit.Judge {
	return &audit.Judge{Reader: a, Grace: grace, Sandbox: sandbox, LedgerRetention: ledgerRetention,
		DeliveryRetention: DeliveryRetention, RecordRetention: RecordRetention}
}

// Sweep is payctl audit: every table read in segments (workers at a time,
// 500 items a page) and every payment found judged at now, nothing
// written. progress follows each page.
func (a *AuditStore) Sweep(ctx context.Context, sandbox bool, now time.Time, grace time.Duration, segments, workers int,
	progress func(audit.SweepProgress)) (audit.Report, error) {
	return audit.Sweep(ctx, a, a.Judge(grace, sandbox), audit.PassTables(sandbox), segments, workers, 500, now, progress)
}
