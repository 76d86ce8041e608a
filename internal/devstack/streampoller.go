package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/cfn"
)

// StreamSource is one DynamoDB event source mapping of the template.
type StreamSource struct {
	FunctionID, EventName string
	TableID, StreamARN    string
	// StartingPosition is TRIM_HORIZON or LATEST: where the shards that
	// exist when polling starts are read from (a shard found later is
	// read from its start).
	StartingPosition string
	BatchSize        int           // BatchSize (default 100)
	BatchingWindow   time.Duration // MaximumBatchingWindowInSeconds
	// ReportBatchItemFailures: a response naming failed records
	// (batchItemFailures) checkpoints before the lowest one, and the batch
	// is retried from it.
	ReportBatchItemFailures bool
	// Bisect (BisectBatchOnFunctionError): a failed batch is split in two
	// and each half retried on its own.
	Bisect bool
	// MaxRetries (MaximumRetryAttempts): retries of a failing batch before
	// it is sent to OnFailure and skipped; -1 until the records expire.
	MaxRetries int
	// OnFailure is the DestinationConfig.OnFailure queue (Name "" when none).
	OnFailure Queue
	// Filters (FilterCriteria): a record none of them matches never
	// reaches the function; none: every record does.
	Filters []EventPattern
	Timeout time.Duration // the function's template Timeout
	// PollInterval is how long an idle shard waits between reads
	// (0: DefaultStreamPoll).
	PollInterval time.Duration
}

// DefaultStreamPoll is how often the poller reads an idle shard. Lambda
// reads each shard four times a second; locally a little less often,
// since several stacks share one emulator.
const DefaultStreamPoll = 500 * time.Millisecond

// StreamSources lists the template's DynamoDB event sources with their
// streams' ARNs.
func (r *Resources) StreamSources() ([]StreamSource, error) {
	var out []StreamSource
	for _, f := range r.Functions {
		for _, ev := range f.Events {
			if ev.Type != "DynamoDB" {
				continue
			}
			id, attr, ok := cfn.GetAttTarget(cfn.Path(ev.Properties, "Stream"))
			if !ok || attr != "StreamArn" {
				return nil, fmt.Errorf("function %s event %s: Stream must be !GetAtt <Table>.StreamArn", f.LogicalID, ev.Name)
			}
			arn, ok := r.Streams[id]
			if !ok {
				return nil, fmt.Errorf("function %s event %s: table %s has no stream", f.LogicalID, ev.Name, id)
			}
			src := StreamSource{FunctionID: f.LogicalID, EventName: ev.Name, TableID: id, StreamARN: arn, BatchSize: 100,
				StartingPosition: "TRIM_HORIZON", MaxRetries: -1, Timeout: r.functionTimeout(f.LogicalID)}
			scalar := func(keys ...string) string {
				if n := cfn.Path(ev.Properties, keys...); n != nil {
					if r.resolver != nil {
						if v, err := r.resolver.String(n); err == nil {
							return v
						}
					}
					return n.Value
				}
				return ""
			}
			if v := scalar("StartingPosition"); v != "" {
				src.StartingPosition = v
			}
			if n, err := strconv.Atoi(scalar("BatchSize")); err == nil && n > 0 {
				src.BatchSize = n
			}
			if n, err := strconv.Atoi(scalar("MaximumBatchingWindowInSeconds")); err == nil && n >= 0 {
				src.BatchingWindow = time.Duration(n) * time.Second
			}
			if n, err := strconv.Atoi(scalar("MaximumRetryAttempts")); err == nil {
				src.MaxRetries = n
			}
			src.Bisect = scalar("BisectBatchOnFunctionError") == "true"
			if types := cfn.Path(ev.Properties, "FunctionResponseTypes"); types != nil {
				for _, t := range types.Content {
					src.ReportBatchItemFailures = src.ReportBatchItemFailures || t.Value == "ReportBatchItemFailures"
				}
			}
			if dest := cfn.Path(ev.Properties, "DestinationConfig", "OnFailure", "Destination"); dest != nil {
				qid, _, ok := cfn.GetAttTarget(dest)
				q, found := r.Queues[qid]
				if !ok || !found {
					return nil, fmt.Errorf("function %s event %s: OnFailure must be !GetAtt <Queue>.Arn of a queue", f.LogicalID, ev.Name)
				}
				src.OnFailure = q
			}
			if filters := cfn.Path(ev.Properties, "FilterCriteria", "Filters"); filters != nil {
				for _, fl := range filters.Content {
					p, err := ParseEventPattern(cfn.Path(fl, "Pattern").Value)
					if err != nil {
						return nil, fmt.Errorf("function %s event %s: %w", f.LogicalID, ev.Name, err)
					}
					src.Filters = append(src.Filters, p)
				}
			}
			out = append(out, src)
		}
	}
	return out, nil
}

// StreamsAPI is the DynamoDB Streams subset the poller uses.
type StreamsAPI interface {
	DescribeStream(context.Context, *dynamodbstreams.DescribeStreamInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(context.Context, *dynamodbstreams.GetRecordsInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// QueueSender sends the on-failure records (*sqs.Client).
type QueueSender interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// PollStream does what Lambda's event source mapping for a DynamoDB stream
// does, until ctx ends:
//
//   - it finds the stream's shards (again every few seconds: shards close
//     and split) and reads each one in order with its own poller, a child
//     shard only once its parent is finished, so the records of one item
//     reach the function in the order they were written;
//   - it gathers up to BatchSize records, or what came within the
//     batching window, drops those no filter matches, and invokes the
//     function with the JSON of an events.DynamoDBEvent within its Timeout;
//   - a batch is checkpointed (the shard moves past it) only when the
//     invocation succeeds. With ReportBatchItemFailures, a response naming
//     failed records checkpoints before the lowest of them and retries
//     from there (an unknown identifier retries the whole batch). A
//     function error retries the batch, split in two when Bisect is set;
//     after MaxRetries retries the batch's description goes to the
//     OnFailure queue and the shard moves on, as on AWS.
//
// The checkpoints live in this process: a restarted stack reads its
// streams again from StartingPosition (every function handles a record
// twice safely, as it must on AWS).
func PollStream(ctx context.Context, api StreamsAPI, queue QueueSender, src StreamSource, h lambda.Handler, log *slog.Logger) {
	if src.PollInterval <= 0 {
		src.PollInterval = DefaultStreamPoll
	}
	p := &streamPoller{api: api, queue: queue, src: src, h: h, log: log.With("function", src.FunctionID, "source", src.EventName),
		shards: map[string]*shardState{}}
	first := true
	for ctx.Err() == nil {
		if err := p.discover(ctx, first); err != nil && ctx.Err() == nil {
			p.log.Warn("describe stream failed", "error", err.Error())
		}
		first = false
		sleep(ctx, 2*time.Second)
	}
	p.wg.Wait()
}

type shardState struct {
	parent  string
	start   stypes.ShardIteratorType
	started bool
	done    chan struct{}
}

type streamPoller struct {
	api    StreamsAPI
	queue  QueueSender
	src    StreamSource
	h      lambda.Handler
	log    *slog.Logger
	mu     sync.Mutex
	shards map[string]*shardState
	wg     sync.WaitGroup
}

// discover lists the stream's shards and starts a reader for each new one
// whose parent (if the stream still has it) is finished.
func (p *streamPoller) discover(ctx context.Context, first bool) error {
	var last *string
	for {
		out, err := p.api.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &p.src.StreamARN, ExclusiveStartShardId: last})
		if err != nil {
			return err
		}
		p.mu.Lock()
		for _, sh := range out.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if _, ok := p.shards[id]; ok {
				continue
			}
			st := &shardState{parent: aws.ToString(sh.ParentShardId), start: stypes.ShardIteratorTypeTrimHorizon, done: make(chan struct{})}
			if first && p.src.StartingPosition == "LATEST" {
				st.start = stypes.ShardIteratorTypeLatest
			}
			p.shards[id] = st
		}
		p.mu.Unlock()
		if last = out.StreamDescription.LastEvaluatedShardId; last == nil {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, st := range p.shards {
		if st.started {
			continue
		}
		var wait <-chan struct{}
		if parent, ok := p.shards[st.parent]; ok {
			wait = parent.done
		}
		st.started = true
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(st.done)
			if wait != nil {
				select {
				case <-wait:
				case <-ctx.Done():
					return
				}
			}
			p.readShard(ctx, id, st.start)
		}()
	}
	return nil
}

// readShard reads one shard to its end (a closed shard) or until ctx ends.
func (p *streamPoller) readShard(ctx context.Context, shard string, start stypes.ShardIteratorType) {
	src := p.src
	var (
		iter    *string
		lastSeq string // the last record delivered: where a new iterator starts
		buf     []stypes.Record
		since   time.Time // when the first buffered record arrived
	)
	newIterator := func() bool {
		in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &src.StreamARN, ShardId: &shard, ShardIteratorType: start}
		if lastSeq != "" {
			in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, &lastSeq
		}
		for ctx.Err() == nil {
			out, err := p.api.GetShardIterator(ctx, in)
			if err == nil {
				iter = out.ShardIterator
				return true
			}
			var (
				gone    *stypes.ResourceNotFoundException
				trimmed *stypes.TrimmedDataAccessException
			)
			if errors.As(err, &gone) {
				return false // the shard was trimmed away
			}
			if errors.As(err, &trimmed) && in.SequenceNumber != nil {
				// The records after the checkpoint are gone (older than the
				// stream keeps): on from the oldest left, as Lambda does.
				p.log.Error("stream records lost past the checkpoint", "shard", shard, "after", lastSeq)
				in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeTrimHorizon, nil
				continue
			}
			p.log.Warn("get shard iterator failed", "shard", shard, "error", err.Error())
			sleep(ctx, src.PollInterval)
		}
		return false
	}
	if !newIterator() {
		return
	}
	for ctx.Err() == nil {
		closed := iter == nil
		if !closed {
			out, err := p.api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(min(1000, src.BatchSize-len(buf))))})
			var (
				expired *stypes.ExpiredIteratorException
				trimmed *stypes.TrimmedDataAccessException
			)
			switch {
			case errors.As(err, &expired):
				if !newIterator() {
					return
				}
				continue
			case errors.As(err, &trimmed):
				// The iterator points before the shard's oldest record. AWS
				// answers so for records trimmed away; DynamoDB Local for
				// a TRIM_HORIZON iterator taken while the shard was still
				// empty. Either way a new one starts at what is there.
				sleep(ctx, src.PollInterval)
				if !newIterator() {
					return
				}
				continue
			case err != nil:
				if ctx.Err() == nil {
					p.log.Warn("get records failed", "shard", shard, "error", err.Error())
					sleep(ctx, src.PollInterval)
				}
				continue
			}
			if len(out.Records) > 0 && len(buf) == 0 {
				since = time.Now()
			}
			buf = append(buf, out.Records...)
			iter = out.NextShardIterator
			closed = iter == nil
		}
		full := len(buf) >= src.BatchSize
		if len(buf) > 0 && (full || closed || time.Since(since) >= src.BatchingWindow) {
			if !p.deliver(ctx, shard, buf) {
				return // stopped mid-batch: nothing after it is checkpointed
			}
			lastSeq = aws.ToString(buf[len(buf)-1].Dynamodb.SequenceNumber)
			buf = nil
			continue
		}
		if closed {
			return
		}
		if !full {
			sleep(ctx, src.PollInterval)
		}
	}
}

// deliver hands recs to the function until it has taken them (or they are
// sent to OnFailure); false when ctx ended first.
func (p *streamPoller) deliver(ctx context.Context, shard string, recs []stypes.Record) bool {
	var kept []events.DynamoDBEventRecord
	for _, r := range recs {
		ev := p.eventRecord(r)
		if len(p.src.Filters) > 0 {
			b, _ := json.Marshal(ev)
			match := false
			for _, f := range p.src.Filters {
				match = match || f.Match(b)
			}
			if !match {
				continue
			}
		}
		kept = append(kept, ev)
	}
	if len(kept) == 0 {
		return true
	}
	return p.invoke(ctx, shard, kept, 0)
}

// invoke delivers one batch with retries left from `retries` made.
func (p *streamPoller) invoke(ctx context.Context, shard string, batch []events.DynamoDBEventRecord, retries int) bool {
	src := p.src
	for ctx.Err() == nil {
		var resp events.DynamoDBEventResponse
		err := Invoke(ctx, p.h, src.FunctionID, src.Timeout, events.DynamoDBEvent{Records: batch}, &resp)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			if !src.ReportBatchItemFailures || len(resp.BatchItemFailures) == 0 {
				return true
			}
			from := len(batch)
			for _, f := range resp.BatchItemFailures {
				i := indexOfSeq(batch, f.ItemIdentifier)
				if i < 0 {
					from = 0 // an unknown identifier fails the whole batch
					break
				}
				from = min(from, i)
			}
			batch = batch[from:]
			err = fmt.Errorf("the function reported %d failed record(s)", len(resp.BatchItemFailures))
		} else if src.Bisect && len(batch) > 1 {
			p.log.Warn("stream batch failed; split in two", "shard", shard, "records", len(batch), "error", err.Error())
			half := len(batch) / 2
			return p.invoke(ctx, shard, batch[:half], retries+1) && p.invoke(ctx, shard, batch[half:], retries+1)
		}
		retries++
		if src.MaxRetries >= 0 && retries > src.MaxRetries {
			p.failed(ctx, shard, batch, retries, err)
			return true
		}
		p.log.Warn("stream batch failed; retrying", "shard", shard, "records", len(batch), "retry", retries, "error", err.Error())
		sleep(ctx, min(time.Duration(retries)*200*time.Millisecond, 2*time.Second))
	}
	return false
}

func indexOfSeq(batch []events.DynamoDBEventRecord, seq string) int {
	for i, r := range batch {
		if seq != "" && r.Change.SequenceNumber == seq {
			return i
		}
	}
	return -1
}

// failed sends a batch that exhausted its retries to the OnFailure queue:
// the description Lambda sends (DDBStreamBatchInfo), not the records.
func (p *streamPoller) failed(ctx context.Context, shard string, batch []events.DynamoDBEventRecord, retries int, cause error) {
	src := p.src
	p.log.Error("stream batch dropped after its retries", "shard", shard, "records", len(batch), "retries", retries-1, "error", cause.Error())
	if src.OnFailure.URL == "" {
		return
	}
	first, last := batch[0], batch[len(batch)-1]
	msg := map[string]any{
		"requestContext": map[string]any{"requestId": newRequestID(), "condition": "RetryAttemptsExhausted", "approximateInvokeCount": retries,
			"functionArn": fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s-%s", Region, Account, StackName, src.FunctionID)},
		"responseContext": map[string]any{"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
		"version":         "1.0", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"DDBStreamBatchInfo": map[string]any{"shardId": shard, "streamArn": src.StreamARN, "batchSize": len(batch),
			"startSequenceNumber": first.Change.SequenceNumber, "endSequenceNumber": last.Change.SequenceNumber,
			"approximateArrivalOfFirstRecord": first.Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339),
			"approximateArrivalOfLastRecord":  last.Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339)},
	}
	b, _ := json.Marshal(msg)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if _, err := p.queue.SendMessage(sctx, &sqs.SendMessageInput{QueueUrl: &src.OnFailure.URL, MessageBody: aws.String(string(b))}); err != nil {
		p.log.Error("stream batch's failure record not sent", "queue", src.OnFailure.Name, "error", err.Error())
	}
}

// eventRecord is a stream record as Lambda hands it to the function.
func (p *streamPoller) eventRecord(r stypes.Record) events.DynamoDBEventRecord {
	d := r.Dynamodb
	ev := events.DynamoDBEventRecord{
		AWSRegion: arnRegion(p.src.StreamARN), EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: "aws:dynamodb", EventVersion: aws.ToString(r.EventVersion), EventSourceArn: p.src.StreamARN,
	}
	if ev.EventVersion == "" {
		ev.EventVersion = "1.1"
	}
	if d != nil {
		ev.Change = events.DynamoDBStreamRecord{Keys: lambdaImage(d.Keys), NewImage: lambdaImage(d.NewImage), OldImage: lambdaImage(d.OldImage),
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes), StreamViewType: string(d.StreamViewType)}
		if d.ApproximateCreationDateTime != nil {
			ev.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
	}
	if u := r.UserIdentity; u != nil {
		ev.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(u.Type), PrincipalID: aws.ToString(u.PrincipalId)}
	}
	return ev
}

func lambdaImage(m map[string]stypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = lambdaValue(v)
	}
	return out
}

func lambdaValue(v stypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *stypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *stypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *stypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *stypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *stypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *stypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *stypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value)
	case *stypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = lambdaValue(x)
		}
		return events.NewListAttribute(l)
	case *stypes.AttributeValueMemberM:
		return events.NewMapAttribute(lambdaImage(v.Value))
	}
	return events.NewNullAttribute()
}
