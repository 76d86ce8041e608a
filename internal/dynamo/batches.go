package dynamo

import (
	"context"
	"errors"
	"fmt"
	"github.com/payreq/payreq/internal/batch"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Batch files (docs/batch.md) keep two kinds of records in the operations table.
//
// A job is one uploaded object being processed: pk "batch#<merchantId>",
// sk "file#<name>#<sequencer>" (batch.JobID). It holds the progress that lets
// the next invocation continue at an exact byte of the object, the lease that
// lets only one invocation work on it at a time, and the summary counts.
//
// A row record is the dedupe record of one payment of a merchant, keyed by
// what makes two rows the same payment: pk "batchrow#<merchantId>#<key>",
// sk "row", where key is "ref#<Reference ID>" or, for a row without one,
// "fp#<keyed fingerprint of card, amount and unit>" (BatchRowKeyOfReference,
// BatchRowKeyOfFingerprint; the fingerprint record expires after a day).
// Claiming it is one conditional PutItem that names the job and line that
// own the payment and fixes the payment request id it is charged as; its
// result is stored on it. The owning line replays it after a crash or a
// redelivery; any other line (another file, or the same file uploaded
// again) is a duplicate of it.
//
// An open-job marker (pk "batchopen", sk "<merchantId>#<jobId>") exists from
// a job's creation until it is finished and its work files are removed, so
// the recovery of stuck jobs finds them without scanning.

const (
	batchJobPrefix  = "batch#"
	batchRowPrefix  = "batchrow#"
	batchOpenPK     = "batchopen"
	batchRowSK      = "row"
	batchRowRefPfx  = "ref#"
	batchRowFingPfx = "fp#"
)

// BatchRowKeyOfReference is the dedupe key of a row with a Reference ID.
func BatchRowKeyOfReference(ref string) string { return batchRowRefPfx + ref }

// BatchRowKeyOfFingerprint is the dedupe key of a row without one: fp is a
// keyed fingerprint (never card data).
func BatchRowKeyOfFingerprint(fp string) string { return batchRowFingPfx + fp }

func batchJobKey(merchantID, jobID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: batchJobPrefix + merchantID},
		"sk": &types.AttributeValueMemberS{Value: jobID},
	}
}

func unmarshalBatchJob(item map[string]types.AttributeValue) (*batch.Job, error) {
	var j batch.Job
	if err := attributevalue.UnmarshalMap(item, &j); err != nil {
		return nil, fmt.Errorf("unmarshal batch job: %w", err)
	}
	pk, _ := item["pk"].(*types.AttributeValueMemberS)
	sk, _ := item["sk"].(*types.AttributeValueMemberS)
	if pk != nil && len(pk.Value) > len(batchJobPrefix) {
		j.MerchantID = pk.Value[len(batchJobPrefix):]
	}
	if sk != nil {
		j.JobID = sk.Value
	}
	return &j, nil
}

// ErrBatchJobBusy is returned by AcquireBatchJob while another invocation
// holds the job's lease; the job returned with it tells until when.
var ErrBatchJobBusy = errors.New("batch job leased by another invocation")

// AcquireBatchJob creates the job j with owner's lease until `until` (the
// first event of an upload), or else takes the lease of the existing job
// like LeaseBatchJob (a redelivered event): a finished job comes back with a
// nil error (check Finished), another owner's live lease as ErrBatchJobBusy
// with the job.
//
// The job's open marker is written first, so no job exists without one.
func (s *Store) AcquireBatchJob(ctx context.Context, j *batch.Job, owner string, now, until time.Time) (*batch.Job, error) {
	j.Owner, j.LeaseUntil, j.Invocations = owner, until.UnixMilli(), 1
	if err := s.markBatchJobOpen(ctx, j.MerchantID, j.JobID, now); err != nil {
		return nil, err
	}
	item, err := attributevalue.MarshalMap(j)
	if err != nil {
		return nil, fmt.Errorf("marshal batch job: %w", err)
	}
	for k, v := range batchJobKey(j.MerchantID, j.JobID) {
		item[k] = v
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.t.Operations, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if err == nil {
		return j, nil
	}
	if !isConditionFailed(err) {
		return nil, fmt.Errorf("create batch job: %w", err)
	}
	return s.LeaseBatchJob(ctx, j.MerchantID, j.JobID, owner, now, until)
}

// LeaseBatchJob takes the lease of an existing, unfinished job whose lease is
// free, expired or already owner's. A finished job is returned with a nil
// error (check Finished); a live lease of another owner is ErrBatchJobBusy;
// an unknown job ErrNotFound.
func (s *Store) LeaseBatchJob(ctx context.Context, merchantID, jobID, owner string, now, until time.Time) (*batch.Job, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &s.t.Operations,
		Key:              batchJobKey(merchantID, jobID),
		UpdateExpression: aws.String("SET #owner = :owner, leaseUntil = :until, updatedAt = :now ADD invocations :one"),
		ConditionExpression: aws.String("attribute_exists(pk) AND #state <> :done AND #state <> :failed AND " +
			"(attribute_not_exists(leaseUntil) OR leaseUntil < :nowms OR #owner = :owner)"),
		ExpressionAttributeNames: map[string]string{"#owner": "owner", "#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":owner": &types.AttributeValueMemberS{Value: owner}, ":until": numberAV(until.UnixMilli()),
			":nowms": numberAV(now.UnixMilli()), ":one": numberAV(1),
			":now":  &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
			":done": &types.AttributeValueMemberS{Value: batch.JobDone}, ":failed": &types.AttributeValueMemberS{Value: batch.JobFailed},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		cur, gerr := s.BatchJob(ctx, merchantID, jobID)
		if gerr != nil {
			return nil, gerr
		}
		if cur.Finished() {
			return cur, nil
		}
		return cur, ErrBatchJobBusy
	}
	if err != nil {
		return nil, fmt.Errorf("lease batch job: %w", err)
	}
	return unmarshalBatchJob(out.Attributes)
}

// SaveBatchJob writes the job's progress, state and counts and extends the
// lease, if owner still holds it; ErrConflict otherwise (another invocation
// took the job over: this one must stop).
func (s *Store) SaveBatchJob(ctx context.Context, j *batch.Job, now time.Time) error {
	j.UpdatedAt = now.UTC()
	counts, err := attributevalue.Marshal(j.Counts)
	if err != nil {
		return err
	}
	u := &update{}
	u.set("state", sAV(j.State))
	u.set("hashOffset", numberAV(j.HashOffset))
	u.set("offset", numberAV(j.Offset))
	u.set("nextLine", numberAV(int64(j.NextLine)))
	u.set("parts", numberAV(int64(j.Parts)))
	u.set("counts", counts)
	u.set("lines", numberAV(j.Lines))
	u.set("recoveries", numberAV(int64(j.Recoveries)))
	u.set("leaseUntil", numberAV(j.LeaseUntil))
	u.set("updatedAt", sAV(j.UpdatedAt.Format(time.RFC3339Nano)))
	u.setOrRemove("hashState", &types.AttributeValueMemberB{Value: j.HashState}, len(j.HashState) > 0)
	u.setOrRemove("fileHash", sAV(j.FileHash), j.FileHash != "")
	u.setOrRemove("snapshot", sAV(j.Snapshot), j.Snapshot != "")
	u.setOrRemove("error", sAV(j.Error), j.Error != "")
	if j.CompletedAt != nil {
		u.set("completedAt", sAV(j.CompletedAt.UTC().Format(time.RFC3339Nano)))
	}
	cond := u.name("owner") + " = " + u.value(sAV(j.Owner))
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.t.Operations,
		Key:                       batchJobKey(j.MerchantID, j.JobID),
		UpdateExpression:          aws.String(u.expression()),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  u.names,
		ExpressionAttributeValues: u.values,
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("save batch job: %w", err)
	}
	return nil
}

func sAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// ReleaseBatchJob gives up owner's lease so the next invocation (the
// continuation, a retry) can take the job at once; ErrConflict when another
// owner holds or has since released it (this owner lost the job).
//
// The release names its owner (releasedBy), so that the same release
// repeated — the SDK's retry of a call that was applied but whose answer
// was lost (a timeout) — succeeds again instead of failing its condition:
// the caller would otherwise take its own release for a takeover and stop
// without queueing the job's continuation.
func (s *Store) ReleaseBatchJob(ctx context.Context, merchantID, jobID, owner string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &s.t.Operations,
		Key:              batchJobKey(merchantID, jobID),
		UpdateExpression: aws.String("SET releasedBy = :owner REMOVE #owner, leaseUntil"),
		ConditionExpression: aws.String("#owner = :owner OR " +
			"(attribute_not_exists(#owner) AND releasedBy = :owner)"),
		ExpressionAttributeNames:  map[string]string{"#owner": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": &types.AttributeValueMemberS{Value: owner}},
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("release batch job: %w", err)
	}
	return nil
}

// BatchJob loads one job; ErrNotFound when there is none.
func (s *Store) BatchJob(ctx context.Context, merchantID, jobID string) (*batch.Job, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Operations, Key: batchJobKey(merchantID, jobID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get batch job: %w", err)
	}
	if out.Item == nil {
		return nil, ErrNotFound
	}
	return unmarshalBatchJob(out.Item)
}

// BatchJobs lists a merchant's jobs (of one file name when file is not
// empty), every page.
func (s *Store) BatchJobs(ctx context.Context, merchantID, file string) ([]*batch.Job, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.t.Operations,
		KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: batchJobPrefix + merchantID},
		},
	}
	if file != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND begins_with(sk, :file)")
		in.ExpressionAttributeValues[":file"] = &types.AttributeValueMemberS{Value: batch.JobFilePrefix(file)}
	}
	var jobs []*batch.Job
	p := dynamodb.NewQueryPaginator(s.queryAPI(), in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query batch jobs: %w", err)
		}
		for _, item := range out.Items {
			j, err := unmarshalBatchJob(item)
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

type queryOnly struct{ db API }

func (q queryOnly) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return q.db.Query(ctx, in, o...)
}

func (s *Store) queryAPI() dynamodb.QueryAPIClient { return queryOnly{s.db} }

// ---- row idempotency records ----------------------------------------------

func batchRowKey(merchantID, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: batchRowPrefix + merchantID + "#" + key},
		"sk": &types.AttributeValueMemberS{Value: batchRowSK},
	}
}

func unmarshalBatchRow(item map[string]types.AttributeValue, merchantID, key string) (*batch.RowRecord, error) {
	var r batch.RowRecord
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return nil, fmt.Errorf("unmarshal batch row: %w", err)
	}
	r.MerchantID, r.Key = merchantID, key
	return &r, nil
}

// ClaimBatchRow stores r (not done, leased by r.Owner until r.LeaseUntil)
// with one conditional PutItem that succeeds only when the key has no live
// record: of two lines racing on one key, exactly one wins. Otherwise it
// returns the stored record and ErrExists.
func (s *Store) ClaimBatchRow(ctx context.Context, r *batch.RowRecord, now time.Time) (*batch.RowRecord, error) {
	claim, err := s.claimPut(r, now)
	if err != nil {
		return nil, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: claim.TableName, Item: claim.Item, ConditionExpression: claim.ConditionExpression,
		ExpressionAttributeValues:           claim.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		if len(cf.Item) > 0 { // DynamoDB returns the holder with the failure (ALL_OLD)
			if held, uerr := unmarshalBatchRow(cf.Item, r.MerchantID, r.Key); uerr == nil {
				return held, ErrExists
			}
		}
		held, gerr := s.BatchRowRecord(ctx, r.MerchantID, r.Key, now)
		if gerr != nil {
			return nil, gerr
		}
		return held, ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("claim batch row %d: %w", r.Row, err)
	}
	return r, nil
}

// ClaimBatchRows claims rows as ClaimBatchRow does, all in one
// TransactWriteItems (at most 100 rows, each key once): every row is
// claimed, or none is. When keys are held, it returns their indexes with
// ErrExists and writes nothing; the caller claims the others again.
func (s *Store) ClaimBatchRows(ctx context.Context, rows []*batch.RowRecord, now time.Time) ([]int, error) {
	items := make([]types.TransactWriteItem, len(rows))
	for i, r := range rows {
		claim, err := s.claimPut(r, now)
		if err != nil {
			return nil, err
		}
		items[i] = types.TransactWriteItem{Put: claim}
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if failed, ok := cancelled(err); ok {
		var held []int
		for i, f := range failed {
			if f {
				held = append(held, i)
			}
		}
		if len(held) == 0 { // cancelled for another reason (a conflicting transaction)
			return nil, fmt.Errorf("claim %d batch rows: %w", len(rows), err)
		}
		return held, ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("claim %d batch rows: %w", len(rows), err)
	}
	return nil, nil
}

// claimPut is the conditional put that claims row record r: it succeeds
// only when the key has no live record.
func (s *Store) claimPut(r *batch.RowRecord, now time.Time) (*types.Put, error) {
	item, err := attributevalue.MarshalMap(r)
	if err != nil {
		return nil, fmt.Errorf("marshal batch row: %w", err)
	}
	for k, v := range batchRowKey(r.MerchantID, r.Key) {
		item[k] = v
	}
	return &types.Put{TableName: &s.t.Operations, Item: item,
		// An expired record counts as absent (TTL deletes lazily; DynamoDB Local never).
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR expiresAt <= :nows"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":nows": numberAV(now.Unix())}}, nil
}

// BatchRowRecord reads a row record (strongly consistent); ErrNotFound
// also for an expired one.
func (s *Store) BatchRowRecord(ctx context.Context, merchantID, key string, now time.Time) (*batch.RowRecord, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Operations, Key: batchRowKey(merchantID, key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get batch row: %w", err)
	}
	if out.Item == nil {
		return nil, ErrNotFound
	}
	r, err := unmarshalBatchRow(out.Item, merchantID, key)
	if err == nil && r.ExpiresAt <= now.Unix() {
		return nil, ErrNotFound
	}
	return r, err
}

// TakeOverBatchRow moves an unfinished row whose holder's lease ran out from
// prevOwner to r.Owner and r's line (JobID, File, Row); ErrConflict when
// somebody else was faster or the row got done meanwhile. The payment
// request id stays.
func (s *Store) TakeOverBatchRow(ctx context.Context, r *batch.RowRecord, prevOwner string) error {
	u := &update{}
	u.set("owner", sAV(r.Owner))
	u.set("leaseUntil", numberAV(r.LeaseUntil))
	u.set("jobId", sAV(r.JobID))
	u.set("file", sAV(r.File))
	u.set("line", numberAV(int64(r.Row)))
	cond := u.name("owner") + " = " + u.value(sAV(prevOwner)) + " AND " + u.name("done") + " = " +
		u.value(&types.AttributeValueMemberBOOL{Value: false})
	return s.updateBatchRow(ctx, r, u, cond, "take over")
}

// CompleteBatchRow stores the row's result and marks it done, if r.Owner
// still holds it; ErrConflict otherwise (a successor charges the same
// payment request and stores the same outcome).
func (s *Store) CompleteBatchRow(ctx context.Context, r *batch.RowRecord) error {
	u := &update{}
	u.set("done", &types.AttributeValueMemberBOOL{Value: true})
	u.set("status", sAV(r.Status))
	u.setOrRemove("transactionId", sAV(r.TransactionID), r.TransactionID != "")
	u.setOrRemove("code", sAV(r.Code), r.Code != "")
	u.setOrRemove("message", sAV(r.Message), r.Message != "")
	u.removes = append(u.removes, u.name("leaseUntil"))
	cond := u.name("owner") + " = " + u.value(sAV(r.Owner))
	if err := s.updateBatchRow(ctx, r, u, cond, "complete"); err != nil {
		return err
	}
	r.Done, r.LeaseUntil = true, 0
	return nil
}

// ReleaseBatchRow ends r.Owner's lease on an unfinished row whose charge
// failed, so a retry can take it over at once; the payment request id stays.
func (s *Store) ReleaseBatchRow(ctx context.Context, r *batch.RowRecord) error {
	u := &update{}
	u.set("leaseUntil", numberAV(0))
	cond := u.name("owner") + " = " + u.value(sAV(r.Owner)) + " AND " + u.name("done") + " = " +
		u.value(&types.AttributeValueMemberBOOL{Value: false})
	return s.updateBatchRow(ctx, r, u, cond, "release")
}

// ForgetBatchRow deletes the record of an unfinished row still held by
// r.Owner (its payment request was never created: an abandoned job reports
// the line as not charged, and the line may be uploaded again);
// ErrConflict otherwise.
func (s *Store) ForgetBatchRow(ctx context.Context, r *batch.RowRecord) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.t.Operations,
		Key:                       batchRowKey(r.MerchantID, r.Key),
		ConditionExpression:       aws.String("#owner = :owner AND #done = :false"),
		ExpressionAttributeNames:  map[string]string{"#owner": "owner", "#done": "done"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": sAV(r.Owner), ":false": &types.AttributeValueMemberBOOL{Value: false}},
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("forget batch row %d: %w", r.Row, err)
	}
	return nil
}

// ReassignBatchRow gives r's row a new payment request id (the old one
// turned out to belong to another payment request), if r.Owner still holds
// the unfinished row with the old id; ErrConflict otherwise.
func (s *Store) ReassignBatchRow(ctx context.Context, r *batch.RowRecord, newID int64) error {
	u := &update{}
	u.set("paymentRequestId", numberAV(newID))
	cond := u.name("owner") + " = " + u.value(sAV(r.Owner)) + " AND " + u.name("paymentRequestId") + " = " +
		u.value(numberAV(r.PaymentRequestID)) + " AND " + u.name("done") + " = " + u.value(&types.AttributeValueMemberBOOL{Value: false})
	if err := s.updateBatchRow(ctx, r, u, cond, "reassign"); err != nil {
		return err
	}
	r.PaymentRequestID = newID
	return nil
}

// updateBatchRow applies u to r's row if cond holds; ErrConflict otherwise.
func (s *Store) updateBatchRow(ctx context.Context, r *batch.RowRecord, u *update, cond, what string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.t.Operations,
		Key:                       batchRowKey(r.MerchantID, r.Key),
		UpdateExpression:          aws.String(u.expression()),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  u.names,
		ExpressionAttributeValues: u.values,
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s batch row %d: %w", what, r.Row, err)
	}
	return nil
}

type batchWriter interface {
	BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// CompleteBatchRows stores the results of charged rows and marks them done,
// 25 rows per BatchWriteItem call. The writes are unconditional: a row is
// completed only by a holder that charged its payment request, and every
// holder of a row charges the same request and finds the same outcome. A
// client without BatchWriteItem falls back to CompleteBatchRow per row.
func (s *Store) CompleteBatchRows(ctx context.Context, rows []*batch.RowRecord) error {
	bw, ok := s.db.(batchWriter)
	if !ok {
		for _, r := range rows {
			if err := s.CompleteBatchRow(ctx, r); err != nil && !errors.Is(err, ErrConflict) {
				return err
			}
		}
		return nil
	}
	for len(rows) > 0 {
		n := min(len(rows), 25)
		reqs := make([]types.WriteRequest, 0, n)
		for _, r := range rows[:n] {
			done := *r
			done.Done, done.LeaseUntil = true, 0
			item, err := attributevalue.MarshalMap(&done)
			if err != nil {
				return fmt.Errorf("marshal batch row: %w", err)
			}
			for k, v := range batchRowKey(r.MerchantID, r.Key) {
				item[k] = v
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		for attempt := 0; len(reqs) > 0; attempt++ {
			if attempt > 0 {
				if attempt > 8 {
					return errors.New("complete batch rows: items left unprocessed")
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(attempt*attempt) * 20 * time.Millisecond):
				}
			}
			out, err := bw.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.t.Operations: reqs}})
			if err != nil {
				return fmt.Errorf("complete batch rows: %w", err)
			}
			reqs = out.UnprocessedItems[s.t.Operations]
		}
		for _, r := range rows[:n] {
			r.Done, r.LeaseUntil = true, 0
		}
		rows = rows[n:]
	}
	return nil
}

// ---- open-job markers -----------------------------------------------------

func batchOpenKey(merchantID, jobID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: batchOpenPK},
		"sk": &types.AttributeValueMemberS{Value: merchantID + "#" + jobID},
	}
}

func (s *Store) markBatchJobOpen(ctx context.Context, merchantID, jobID string, now time.Time) error {
	item := batchOpenKey(merchantID, jobID)
	item["since"] = numberAV(now.UnixMilli())
	// Written once: a redelivered upload event keeps the job's place in its
	// merchant's upload order (OpenBatchJobsOf).
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.t.Operations, Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark batch job open: %w", err)
	}
	return nil
}

// CloseBatchJob removes a job's open marker, once it is finished and its
// work files are gone.
func (s *Store) CloseBatchJob(ctx context.Context, merchantID, jobID string) error {
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.t.Operations, Key: batchOpenKey(merchantID, jobID)}); err != nil {
		return fmt.Errorf("close batch job: %w", err)
	}
	return nil
}

// OpenBatchJobs lists the open-job markers, every page.
func (s *Store) OpenBatchJobs(ctx context.Context) ([]batch.OpenJob, error) {
	return s.openBatchJobs(ctx, "")
}

// OpenBatchJobsOf lists merchantID's open-job markers (strongly
// consistent), so a job can wait for the merchant's older files: a
// merchant's files are charged in upload order.
func (s *Store) OpenBatchJobsOf(ctx context.Context, merchantID string) ([]batch.OpenJob, error) {
	return s.openBatchJobs(ctx, merchantID)
}

// openBatchJobs queries the open-job markers, all of them or, with a
// merchantID, that merchant's (sk "<merchant>#<job>").
func (s *Store) openBatchJobs(ctx context.Context, merchantID string) ([]batch.OpenJob, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.t.Operations,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: batchOpenPK}},
		ConsistentRead:            aws.Bool(true),
	}
	if merchantID != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND begins_with(sk, :m)")
		in.ExpressionAttributeValues[":m"] = &types.AttributeValueMemberS{Value: merchantID + "#"}
	}
	var open []batch.OpenJob
	p := dynamodb.NewQueryPaginator(s.queryAPI(), in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query open batch jobs %s: %w", merchantID, err)
		}
		for _, item := range out.Items {
			sk, _ := item["sk"].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			// Merchant ids have no "#"; the job id may.
			m, job, ok := strings.Cut(sk.Value, "#")
			if !ok {
				continue
			}
			o := batch.OpenJob{MerchantID: m, JobID: job}
			if n, ok := item["since"].(*types.AttributeValueMemberN); ok {
				if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
					o.Since = time.UnixMilli(ms)
				}
			}
			open = append(open, o)
		}
	}
	return open, nil
}
