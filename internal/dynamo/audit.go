package dynamo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/errkind"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/provider"
	"github.com/payreq/payreq/internal/provider/sandbox/ledger"
)

// The invariant audit's records live in the operations table:
//
//	pk "auditdue#<0-7>"     sk "<due, Unix ms, 13 digits>#<subject>"   a check to make (expiresAt: TTL)
//	pk "auditviolation"     sk "<violation key>"                        a violation kept until it holds again
//	pk "audit#heartbeat"    sk "state"                                   the stream heartbeat
//	pk "auditpass"          sk "state"                                   the full pass's checkpoint
//
// Due checks are spread over dueShards partitions so that a burst of
// changes never makes one key hot (a partition takes 1,000 writes a
// second); the scheduled run reads the due ones of each shard oldest first.
const (
	auditDuePrefix     = "auditdue#"
	dueShards          = 8
	auditViolationPK   = "auditviolation"
	AuditHeartbeatPK   = "audit#heartbeat"
	auditPassPK        = "auditpass"
	auditStateSK       = "state"
	dueRetention       = 30 * 24 * time.Hour
	violationRetention = 400 * 24 * time.Hour
)

// AuditStore is the audit's storage: subjects read with point reads, the
// due checks, the kept violations, the stream heartbeat and the full
// pass's checkpoint and scans (the ports of internal/audit).
type AuditStore struct {
	s *Store
}

// Audit returns the store's audit side.
func (s *Store) Audit() *AuditStore { return &AuditStore{s: s} }

var (
	_ audit.Reader    = (*AuditStore)(nil)
	_ audit.Checks    = (*AuditStore)(nil)
	_ audit.Findings  = (*AuditStore)(nil)
	_ audit.Heartbeat = (*AuditStore)(nil)
	_ audit.PassStore = (*AuditStore)(nil)
)

// ---- records as the audit sees them --------------------------------------

// expired reports whether an item's TTL attribute lies before now: TTL
// deletes lazily (days late on AWS, never on DynamoDB Local), and an
// expired item counts as gone.
func expired(item map[string]types.AttributeValue, now time.Time) bool {
	exp, ok := item["expiresAt"].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(exp.Value, 10, 64)
	return err == nil && n < now.Unix()
}

// AuditTransaction is a stored transaction as the audit judges it.
func AuditTransaction(item map[string]types.AttributeValue) (audit.Transaction, error) {
	t, err := unmarshalTransaction(item)
	if err != nil {
		return audit.Transaction{}, err
	}
	at := audit.Transaction{ID: t.ID, PaymentRequestID: t.PaymentRequestID, Status: t.Status, Reference: t.Reference,
		RecoverAfter: t.RecoverAfter, RefundProcessing: t.Refund != nil && t.Refund.Status == payment.RefundProcessing,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if ev, ok := item["notifyEvent"].(*types.AttributeValueMemberM); ok {
		if id, ok := ev.Value["eventId"].(*types.AttributeValueMemberS); ok {
			at.OutboxEventID = id.Value
		}
	}
	return at, nil
}

// AuditRequest is a stored payment request as the audit judges it.
func AuditRequest(item map[string]types.AttributeValue) (audit.Request, error) {
	r, err := unmarshalRequest(item)
	if err != nil {
		return audit.Request{}, err
	}
	return audit.Request{ID: r.ID, Status: r.Status, TransactionID: r.TransactionID, UpdatedAt: r.UpdatedAt}, nil
}

func auditLedger(item map[string]types.AttributeValue) (audit.LedgerEntry, error) {
	e, err := unmarshalLedger(item)
	if err != nil {
		return audit.LedgerEntry{}, err
	}
	return audit.LedgerEntry{Reference: e.Reference, Charge: e.Kind == ledger.KindCharge,
		Approved: e.Status == provider.Approved, Voided: e.Voided, Abandoned: e.Abandoned, UpdatedAt: e.UpdatedAt}, nil
}

func auditJob(item map[string]types.AttributeValue) (audit.BatchJob, error) {
	j, err := unmarshalBatchJob(item)
	if err != nil {
		return audit.BatchJob{}, err
	}
	aj := audit.BatchJob{MerchantID: j.MerchantID, JobID: j.JobID, State: j.State, Finished: j.Finished(), UpdatedAt: j.UpdatedAt}
	if j.LeaseUntil != 0 {
		aj.LeaseUntil = time.UnixMilli(j.LeaseUntil).UTC()
	}
	return aj, nil
}

// StreamChange is one stream record of an audited table, decoded.
type StreamChange struct {
	Change audit.Change
	// Heartbeat is the send time of a heartbeat the consumer has not yet
	// marked seen (zero otherwise).
	Heartbeat time.Time
}

// StreamChange decodes the images of a stream record of table (a physical
// table name) written at `at`. Records of kinds the audit does not judge
// decode to an empty change.
func (a *AuditStore) StreamChange(table string, oldImage, newImage map[string]types.AttributeValue, at time.Time) (StreamChange, error) {
	out := StreamChange{Change: audit.Change{At: at}}
	c := &out.Change
	var err error
	decode := func(img map[string]types.AttributeValue, f func(map[string]types.AttributeValue) error) {
		if len(img) > 0 && err == nil {
			err = f(img)
		}
	}
	switch table {
	case a.s.t.Transactions:
		decode(oldImage, func(m map[string]types.AttributeValue) error { t, e := AuditTransaction(m); c.OldTx = &t; return e })
		decode(newImage, func(m map[string]types.AttributeValue) error { t, e := AuditTransaction(m); c.NewTx = &t; return e })
	case a.s.t.PaymentRequests:
		decode(oldImage, func(m map[string]types.AttributeValue) error { r, e := AuditRequest(m); c.OldRequest = &r; return e })
		decode(newImage, func(m map[string]types.AttributeValue) error { r, e := AuditRequest(m); c.NewRequest = &r; return e })
	case a.s.t.Operations:
		img := newImage
		if len(img) == 0 {
			img = oldImage
		}
		pk, _ := img["pk"].(*types.AttributeValueMemberS)
		switch {
		case pk == nil:
		case strings.HasPrefix(pk.Value, ledgerPrefix):
			decode(oldImage, func(m map[string]types.AttributeValue) error { e, er := auditLedger(m); c.OldCharge = &e; return er })
			decode(newImage, func(m map[string]types.AttributeValue) error { e, er := auditLedger(m); c.NewCharge = &e; return er })
		case strings.HasPrefix(pk.Value, batchJobPrefix):
			decode(oldImage, func(m map[string]types.AttributeValue) error { j, e := auditJob(m); c.OldJob = &j; return e })
			decode(newImage, func(m map[string]types.AttributeValue) error { j, e := auditJob(m); c.NewJob = &j; return e })
		case pk.Value == AuditHeartbeatPK && len(newImage) > 0:
			sent, seen := msAttr(newImage, "sentAt"), msAttr(newImage, "seenAt")
			if !sent.IsZero() && sent.After(seen) {
				out.Heartbeat = sent
			}
		}
	}
	if err != nil {
		return StreamChange{}, fmt.Errorf("stream record of %s: %w", table, err)
	}
	return out, nil
}

// TableKind names a physical table of the store: "transactions",
// "requests", "operations", or "" for another.
func (a *AuditStore) TableKind(table string) string {
	switch table {
	case a.s.t.Transactions:
		return "transactions"
	case a.s.t.PaymentRequests:
		return "requests"
	case a.s.t.Operations:
		return "operations"
	}
	return ""
}

func msAttr(item map[string]types.AttributeValue, name string) time.Time {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil && ms > 0 {
			return time.UnixMilli(ms).UTC()
		}
	}
	return time.Time{}
}

// ---- a subject's records -------------------------------------------------

// SubjectData reads s's records with point reads, in the payment path's
// write order backwards, so that a state seen implies the writes before
// it: for a payment request its transactions (the byPaymentRequest index,
// which may lag the table by a moment: an older state, never a newer one),
// then the request (consistent; and the transaction it names, when the
// index did not show it yet), then the ledger entries of its transactions
// (withLedger), then its delivery records; for a ledger charge the
// transaction its reference names, then the entry; for a batch job the
// job. Expired items (TTL deletes lazily) count as gone.
func (a *AuditStore) SubjectData(ctx context.Context, s audit.Subject, withLedger bool) (audit.Data, error) {
	now := time.Now()
	var d audit.Data
	switch s.Kind {
	case audit.SubjectRequest:
		if err := a.requestTransactions(ctx, s.RequestID, now, &d); err != nil {
			return d, err
		}
		item, err := a.get(ctx, a.s.t.PaymentRequests, map[string]types.AttributeValue{"id": numberAV(s.RequestID)}, now)
		if err != nil {
			return d, err
		}
		if item != nil {
			r, err := AuditRequest(item)
			if err != nil {
				return d, err
			}
			d.Requests = append(d.Requests, r)
			if r.TransactionID != 0 && !hasTx(d.Transactions, r.TransactionID) {
				if err := a.addTx(ctx, r.TransactionID, now, &d); err != nil {
					return d, err
				}
			}
		}
		if withLedger && len(d.Transactions) > 0 {
			var keys []batchKey
			for _, t := range d.Transactions {
				if t.PaymentRequestID != s.RequestID {
					continue // another request's: judged with its own request
				}
				ref := t.Reference
				if ref == "" {
					ref = payment.ChargeReference(t.ID)
				}
				keys = append(keys, batchKey{table: a.s.t.Operations, key: ledgerKey(ref)})
			}
			err := a.s.batchGet(ctx, keys, func(_ string, item map[string]types.AttributeValue) error {
				e, err := auditLedger(item)
				d.Ledger = append(d.Ledger, e)
				return err
			})
			if err != nil {
				return d, fmt.Errorf("ledger entries of request %d: %w", s.RequestID, err)
			}
		}
		dl, err := a.s.Deliveries(ctx, s.RequestID, now)
		if err != nil {
			return d, err
		}
		for _, x := range dl {
			d.Deliveries = append(d.Deliveries, audit.Delivery{RequestID: x.RequestID, EventID: x.EventID})
		}
	case audit.SubjectCharge:
		if id, ok := strings.CutPrefix(s.Reference, "ptx_"); ok {
			if n, err := strconv.ParseInt(id, 10, 64); err == nil {
				if err := a.addTx(ctx, n, now, &d); err != nil {
					return d, err
				}
			}
		}
		item, err := a.get(ctx, a.s.t.Operations, ledgerKey(s.Reference), now)
		if err != nil || item == nil {
			return d, err
		}
		e, err := auditLedger(item)
		if err != nil {
			return d, err
		}
		d.Ledger = append(d.Ledger, e)
	case audit.SubjectBatchJob:
		item, err := a.get(ctx, a.s.t.Operations, batchJobKey(s.MerchantID, s.JobID), now)
		if err != nil || item == nil {
			return d, err
		}
		j, err := auditJob(item)
		if err != nil {
			return d, err
		}
		d.BatchJobs = append(d.BatchJobs, j)
	default:
		return d, fmt.Errorf("audit: unknown subject %q", s.Key())
	}
	return d, nil
}

func hasTx(txs []audit.Transaction, id int64) bool {
	for _, t := range txs {
		if t.ID == id {
			return true
		}
	}
	return false
}

// get reads one item consistently; nil when absent or expired.
func (a *AuditStore) get(ctx context.Context, table string, key map[string]types.AttributeValue, now time.Time) (map[string]types.AttributeValue, error) {
	out, err := a.s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("audit: get from %s: %w", table, err)
	}
	if out.Item == nil || expired(out.Item, now) {
		return nil, nil
	}
	return out.Item, nil
}

func (a *AuditStore) addTx(ctx context.Context, id int64, now time.Time, d *audit.Data) error {
	item, err := a.get(ctx, a.s.t.Transactions, txKey(id), now)
	if err != nil || item == nil {
		return err
	}
	t, err := AuditTransaction(item)
	if err != nil {
		return err
	}
	d.Transactions = append(d.Transactions, t)
	return nil
}

func (a *AuditStore) requestTransactions(ctx context.Context, requestID int64, now time.Time, d *audit.Data) error {
	var start map[string]types.AttributeValue
	for {
		out, err := a.s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &a.s.t.Transactions, IndexName: aws.String(TransactionsByRequestIndex),
			KeyConditionExpression:    aws.String("paymentRequestId = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": numberAV(requestID)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return fmt.Errorf("audit: transactions of request %d: %w", requestID, err)
		}
		for _, item := range out.Items {
			if expired(item, now) {
				continue
			}
			t, err := AuditTransaction(item)
			if err != nil {
				return err
			}
			d.Transactions = append(d.Transactions, t)
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return nil
		}
	}
}

// ---- due checks ------------------------------------------------------------

func dueShard(subject string) int {
	h := fnv.New32a()
	h.Write([]byte(subject))
	return int(h.Sum32() % dueShards)
}

func dueSK(at time.Time, subject string) string {
	return fmt.Sprintf("%013d#%s", at.UnixMilli(), subject)
}

func dueKey(d audit.Due) map[string]types.AttributeValue {
	k := d.Subject.Key()
	return map[string]types.AttributeValue{"pk": strAV(auditDuePrefix + strconv.Itoa(dueShard(k))), "sk": strAV(dueSK(d.At, k))}
}

// ScheduleChecks queues dues, 25 puts per BatchWriteItem: a repeated due
// (same subject, same time) overwrites itself.
func (a *AuditStore) ScheduleChecks(ctx context.Context, dues []audit.Due) error {
	reqs := make([]types.WriteRequest, 0, len(dues))
	seen := map[string]bool{}
	for _, d := range dues {
		item := dueKey(d)
		if k := item["pk"].(*types.AttributeValueMemberS).Value + item["sk"].(*types.AttributeValueMemberS).Value; seen[k] {
			continue // BatchWriteItem refuses one key twice in a call
		} else {
			seen[k] = true
		}
		item["expiresAt"] = numberAV(d.At.Add(dueRetention).Unix())
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	return a.batchWrite(ctx, reqs, "schedule audit checks")
}

// DoneChecks removes due entries (a removed one is gone already: fine).
func (a *AuditStore) DoneChecks(ctx context.Context, dues []audit.Due) error {
	reqs := make([]types.WriteRequest, 0, len(dues))
	seen := map[string]bool{}
	for _, d := range dues {
		key := dueKey(d)
		if k := key["pk"].(*types.AttributeValueMemberS).Value + key["sk"].(*types.AttributeValueMemberS).Value; seen[k] {
			continue
		} else {
			seen[k] = true
		}
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key}})
	}
	return a.batchWrite(ctx, reqs, "remove audit checks")
}

// batchWrite sends reqs to the operations table 25 at a time, retrying
// unprocessed ones (throttling) with back-off; each request is a plain put
// or delete, safe to send twice. Without BatchWriteItem (a test client) it
// sends them one by one.
func (a *AuditStore) batchWrite(ctx context.Context, reqs []types.WriteRequest, what string) error {
	bw, ok := a.s.db.(batchWriter)
	for len(reqs) > 0 {
		n := min(len(reqs), 25)
		chunk := reqs[:n]
		reqs = reqs[n:]
		if !ok {
			for _, r := range chunk {
				var err error
				if r.PutRequest != nil {
					_, err = a.s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &a.s.t.Operations, Item: r.PutRequest.Item})
				} else {
					_, err = a.s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &a.s.t.Operations, Key: r.DeleteRequest.Key})
				}
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
			continue
		}
		for attempt := 0; len(chunk) > 0; attempt++ {
			if attempt > 0 {
				if attempt > 8 {
					return fmt.Errorf("%s: items left unprocessed", what)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(attempt*attempt) * 20 * time.Millisecond):
				}
			}
			out, err := bw.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{a.s.t.Operations: chunk}})
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			chunk = out.UnprocessedItems[a.s.t.Operations]
		}
	}
	return nil
}

// dueBefore is the key condition of a shard's entries due at now.
func dueQuery(table string, shard int, now time.Time, limit int32) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:              &table,
		KeyConditionExpression: aws.String("pk = :p AND sk < :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p":  strAV(auditDuePrefix + strconv.Itoa(shard)),
			":hi": strAV(fmt.Sprintf("%013d", now.UnixMilli()+1)), // "<due>#..." sorts below it for every due ≤ now
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(limit),
	}
}

func parseDue(item map[string]types.AttributeValue) (audit.Due, error) {
	sk, _ := item["sk"].(*types.AttributeValueMemberS)
	if sk == nil {
		return audit.Due{}, errors.New("audit check without sk")
	}
	ms, subject, ok := strings.Cut(sk.Value, "#")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return audit.Due{}, fmt.Errorf("audit check %q", sk.Value)
	}
	s, err := audit.ParseSubject(subject)
	if err != nil {
		return audit.Due{}, err
	}
	return audit.Due{Subject: s, At: time.UnixMilli(n).UTC()}, nil
}

// DueChecks returns up to limit entries due at now, oldest first within
// each shard, the shards in turn.
func (a *AuditStore) DueChecks(ctx context.Context, now time.Time, limit int) ([]audit.Due, error) {
	var out []audit.Due
	per := int32(max(1, (limit+dueShards-1)/dueShards))
	for shard := 0; shard < dueShards && len(out) < limit; shard++ {
		res, err := a.s.db.Query(ctx, dueQuery(a.s.t.Operations, shard, now, per))
		if err != nil {
			return out, fmt.Errorf("due audit checks: %w", err)
		}
		for _, item := range res.Items {
			d, err := parseDue(item)
			if err != nil {
				return out, err
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// OldestDue is the due time of the oldest entry due at now.
func (a *AuditStore) OldestDue(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var oldest time.Time
	for shard := 0; shard < dueShards; shard++ {
		res, err := a.s.db.Query(ctx, dueQuery(a.s.t.Operations, shard, now, 1))
		if err != nil {
			return time.Time{}, false, fmt.Errorf("oldest audit check: %w", err)
		}
		if len(res.Items) == 0 {
			continue
		}
		d, err := parseDue(res.Items[0])
		if err != nil {
			return time.Time{}, false, err
		}
		if oldest.IsZero() || d.At.Before(oldest) {
			oldest = d.At
		}
	}
	return oldest, !oldest.IsZero(), nil
}

// ---- violations ----------------------------------------------------------

type violationItem struct {
	PK               string    `dynamodbav:"pk"`
	SK               string    `dynamodbav:"sk"`
	Invariant        string    `dynamodbav:"invariant"`
	PaymentRequestID int64     `dynamodbav:"paymentRequestId,omitempty"`
	TransactionID    int64     `dynamodbav:"transactionId,omitempty"`
	Reference        string    `dynamodbav:"reference,omitempty"`
	BatchJob         string    `dynamodbav:"batchJob,omitempty"`
	Detail           string    `dynamodbav:"detail"`
	Subject          string    `dynamodbav:"subject"`
	FoundAt          time.Time `dynamodbav:"foundAt"`
	ExpiresAt        int64     `dynamodbav:"expiresAt"`
}

// RecordViolation keeps v unless its key is kept already (conditional
// create: of two checks that find it, one reports it; a lost answer's
// retry is recognised as this call's own write, docs/lost-answers.md).
func (a *AuditStore) RecordViolation(ctx context.Context, v audit.RecordedViolation) (bool, error) {
	item, err := attributevalue.MarshalMap(violationItem{PK: auditViolationPK, SK: v.Key(), Invariant: v.Invariant,
		PaymentRequestID: v.PaymentRequestID, TransactionID: v.TransactionID, Reference: v.Reference, BatchJob: v.BatchJob,
		Detail: v.Detail, Subject: v.Subject, FoundAt: v.FoundAt.UTC(), ExpiresAt: v.FoundAt.Add(violationRetention).Unix()})
	if err != nil {
		return false, fmt.Errorf("marshal audit violation: %w", err)
	}
	switch err := a.s.putIfAbsent(ctx, a.s.t.Operations, "pk", item, "audit violation"); {
	case errkind.Is(err, errkind.Exists):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// ClearViolation forgets a kept violation.
func (a *AuditStore) ClearViolation(ctx context.Context, key string) error {
	_, err := a.s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &a.s.t.Operations,
		Key: map[string]types.AttributeValue{"pk": strAV(auditViolationPK), "sk": strAV(key)}})
	if err != nil {
		return fmt.Errorf("clear audit violation: %w", err)
	}
	return nil
}

// OpenViolations lists the kept violations.
func (a *AuditStore) OpenViolations(ctx context.Context) ([]audit.RecordedViolation, error) {
	var out []audit.RecordedViolation
	p := dynamodb.NewQueryPaginator(a.s.queryAPI(), &dynamodb.QueryInput{
		TableName: &a.s.t.Operations, KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": strAV(auditViolationPK)}, ConsistentRead: aws.Bool(true),
	})
	now := time.Now()
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("open audit violations: %w", err)
		}
		for _, item := range page.Items {
			if expired(item, now) {
				continue
			}
			var v violationItem
			if err := attributevalue.UnmarshalMap(item, &v); err != nil {
				return nil, fmt.Errorf("unmarshal audit violation: %w", err)
			}
			out = append(out, audit.RecordedViolation{Violation: audit.Violation{Invariant: v.Invariant,
				PaymentRequestID: v.PaymentRequestID, TransactionID: v.TransactionID, Reference: v.Reference,
				BatchJob: v.BatchJob, Detail: v.Detail}, Subject: v.Subject, FoundAt: v.FoundAt})
		}
	}
	return out, nil
}

// ---- the stream heartbeat ------------------------------------------------

func heartbeatKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": strAV(AuditHeartbeatPK), "sk": strAV(auditStateSK)}
}

// Beat reads the heartbeat (sentAt: the last one sent; seenAt: the last
// one the consumer read; pendingSince: the oldest one sent since seenAt),
// returns how long the consumer has left heartbeats unread, and sends a
// new one.
func (a *AuditStore) Beat(ctx context.Context, now time.Time) (time.Duration, error) {
	item, err := a.get(ctx, a.s.t.Operations, heartbeatKey(), now)
	if err != nil {
		return 0, err
	}
	sent, seen, pending := msAttr(item, "sentAt"), msAttr(item, "seenAt"), msAttr(item, "pendingSince")
	var lag time.Duration
	if !sent.IsZero() && seen.Before(sent) {
		if pending.IsZero() {
			pending = sent
		}
		lag = max(0, now.Sub(pending))
	} else {
		pending = now // every earlier heartbeat was read: the new one is the oldest unread
	}
	_, err = a.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &a.s.t.Operations, Key: heartbeatKey(),
		UpdateExpression:          aws.String("SET sentAt = :now, pendingSince = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": numberAV(now.UnixMilli()), ":p": numberAV(pending.UnixMilli())},
	})
	if err != nil {
		return lag, fmt.Errorf("send audit heartbeat: %w", err)
	}
	return lag, nil
}

// Seen marks the heartbeat sent at sentAt read (never moving back).
func (a *AuditStore) Seen(ctx context.Context, sentAt time.Time) error {
	_, err := a.s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &a.s.t.Operations, Key: heartbeatKey(),
		UpdateExpression:          aws.String("SET seenAt = :s"),
		ConditionExpression:       aws.String("attribute_not_exists(seenAt) OR seenAt < :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": numberAV(sentAt.UnixMilli())},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark audit heartbeat seen: %w", err)
	}
	return nil
}
