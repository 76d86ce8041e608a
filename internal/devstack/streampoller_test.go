package devstack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/testenv"
)

// streamTable creates a fresh table with a stream (pk, sk strings) in the
// test stack's DynamoDB Local and returns a client and the stream's ARN.
func streamTable(t *testing.T) (*dynamodb.Client, *dynamodbstreams.Client, string, string) {
	t.Helper()
	st := testenv.Stack(t)
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	name := fmt.Sprintf("stream-test-%d", time.Now().UnixNano())
	out, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: &name, BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: "S"}, {AttributeName: aws.String("sk"), AttributeType: "S"}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: "HASH"}, {AttributeName: aws.String("sk"), KeyType: "RANGE"}},
		StreamSpecification:  &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(st.Info.Endpoints.DynamoDB) })
	return db, streams, name, aws.ToString(out.TableDescription.LatestStreamArn)
}

func put(t *testing.T, db *dynamodb.Client, table, pk string, n int) {
	t.Helper()
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: map[string]dtypes.AttributeValue{
		"pk": &dtypes.AttributeValueMemberS{Value: pk}, "sk": &dtypes.AttributeValueMemberS{Value: "x"},
		"n": &dtypes.AttributeValueMemberN{Value: strconv.Itoa(n)}}})
	if err != nil {
		t.Fatal(err)
	}
}

// recorder is a function that records what it is handed and answers what
// answer decides.
type recorder struct {
	mu      sync.Mutex
	batches [][]events.DynamoDBEventRecord
	answer  func(batch []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error)
}

func (r *recorder) handler() lambda.Handler {
	return lambda.NewHandler(func(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		r.mu.Lock()
		r.batches = append(r.batches, ev.Records)
		r.mu.Unlock()
		if r.answer != nil {
			return r.answer(ev.Records)
		}
		return events.DynamoDBEventResponse{}, nil
	})
}

func (r *recorder) seen() (n int, batches [][]events.DynamoDBEventRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		n += len(b)
	}
	return n, slices.Clone(r.batches)
}

func pollStream(t *testing.T, api devstack.StreamsAPI, q devstack.QueueSender, src devstack.StreamSource, h lambda.Handler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		devstack.PollStream(ctx, api, q, src, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func pk(r events.DynamoDBEventRecord) string { return r.Change.Keys["pk"].String() }

// The records of a stream reach the function in write order, in batches
// of at most BatchSize, in the shape Lambda gives them (event source, ARN,
// name, both images, sequence number), each once when it succeeds.
func TestStreamPollerDeliversInOrderInBatches(t *testing.T) {
	db, streams, table, arn := streamTable(t)
	for i := 0; i < 120; i++ {
		put(t, db, table, "k"+strconv.Itoa(i%40), i) // each key written 3 times: insert, modify, modify
	}
	rec := &recorder{}
	pollStream(t, streams, nil, devstack.StreamSource{FunctionID: "F", StreamARN: arn, StartingPosition: "TRIM_HORIZON", BatchSize: 25,
		MaxRetries: -1, Timeout: 5 * time.Second, PollInterval: 50 * time.Millisecond}, rec.handler())
	wait(t, "120 records", 30*time.Second, func() bool { n, _ := rec.seen(); return n >= 120 })
	time.Sleep(300 * time.Millisecond) // nothing more comes
	n, batches := rec.seen()
	if n != 120 {
		t.Fatalf("%d records delivered, want 120 exactly once", n)
	}
	var all []events.DynamoDBEventRecord
	for _, b := range batches {
		if len(b) > 25 {
			t.Fatalf("batch of %d records, BatchSize 25", len(b))
		}
		all = append(all, b...)
	}
	for i, r := range all {
		if want := strconv.Itoa(i); r.Change.NewImage["n"].Number() != want {
			t.Fatalf("record %d carries n=%s: out of write order", i, r.Change.NewImage["n"].Number())
		}
		if r.EventSource != "aws:dynamodb" || r.EventSourceArn != arn || r.EventVersion != "1.1" || r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" ||
			r.Change.SequenceNumber == "" || r.Change.Keys["pk"].String() == "" {
			t.Fatalf("record %d: %+v", i, r)
		}
		wantName, old := "INSERT", false
		if i >= 40 {
			wantName, old = "MODIFY", true
		}
		if r.EventName != wantName || (r.Change.OldImage != nil) != old {
			t.Fatalf("record %d is %s with old image %v", i, r.EventName, r.Change.OldImage != nil)
		}
	}
	// The JSON is what the golden event holds.
	b, _ := json.Marshal(events.DynamoDBEvent{Records: all[40:41]})
	var back events.DynamoDBEvent
	if err := json.Unmarshal(b, &back); err != nil || back.Records[0].Change.OldImage["n"].Number() != "0" {
		t.Fatalf("event JSON round trip: %v %s", err, b)
	}
}

// A poller started on an empty stream delivers what is written later
// (DynamoDB Local refuses a TRIM_HORIZON iterator taken before the shard's
// first record; the poller takes a new one).
func TestStreamPollerStartsOnAnEmptyStream(t *testing.T) {
	db, streams, table, arn := streamTable(t)
	rec := &recorder{}
	pollStream(t, streams, nil, devstack.StreamSource{FunctionID: "F", StreamARN: arn, StartingPosition: "TRIM_HORIZON", BatchSize: 10,
		MaxRetries: -1, Timeout: 5 * time.Second, PollInterval: 50 * time.Millisecond}, rec.handler())
	time.Sleep(500 * time.Millisecond)
	for i := 0; i < 3; i++ {
		put(t, db, table, "k"+strconv.Itoa(i), i)
	}
	wait(t, "3 records", 30*time.Second, func() bool { n, _ := rec.seen(); return n >= 3 })
}

// FilterCriteria: only records a filter matches reach the function.
func TestStreamPollerFilters(t *testing.T) {
	db, streams, table, arn := streamTable(t)
	for i, k := range []string{"keep#1", "drop#1", "keep#2", "exact", "drop#2"} {
		put(t, db, table, k, i)
	}
	p, err := devstack.ParseEventPattern(`{"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "keep#"}, "exact"]}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	pollStream(t, streams, nil, devstack.StreamSource{FunctionID: "F", StreamARN: arn, StartingPosition: "TRIM_HORIZON", BatchSize: 100,
		MaxRetries: -1, Filters: []devstack.EventPattern{p}, Timeout: 5 * time.Second, PollInterval: 50 * time.Millisecond}, rec.handler())
	wait(t, "3 records", 30*time.Second, func() bool { n, _ := rec.seen(); return n >= 3 })
	time.Sleep(300 * time.Millisecond)
	_, batches := rec.seen()
	var got []string
	for _, b := range batches {
		for _, r := range b {
			got = append(got, pk(r))
		}
	}
	if !slices.Equal(got, []string{"keep#1", "keep#2", "exact"}) {
		t.Fatalf("delivered %v", got)
	}
	if _, err := devstack.ParseEventPattern(`{"dynamodb": {"NewImage": {"n": {"N": [{"numeric": [">", 1]}]}}}}`); err == nil {
		t.Fatal("an operator the local stack does not apply was accepted")
	}
}

// ReportBatchItemFailures: the batch is retried from the lowest failed
// record; the records before it are not handed over again.
func TestStreamPollerRetriesFromTheFirstFailedRecord(t *testing.T) {
	db, streams, table, arn := streamTable(t)
	for i := 0; i < 10; i++ {
		put(t, db, table, "k"+strconv.Itoa(i), i)
	}
	var once sync.Once
	rec := &recorder{}
	rec.answer = func(batch []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, r := range batch {
			if pk(r) == "k4" || pk(r) == "k7" {
				once.Do(func() {
					resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}
				})
			}
		}
		return resp, nil
	}
	pollStream(t, streams, nil, devstack.StreamSource{FunctionID: "F", StreamARN: arn, StartingPosition: "TRIM_HORIZON", BatchSize: 10,
		ReportBatchItemFailures: true, MaxRetries: -1, Timeout: 5 * time.Second, PollInterval: 50 * time.Millisecond}, rec.handler())
	wait(t, "the retry", 30*time.Second, func() bool { _, b := rec.seen(); return len(b) >= 2 })
	time.Sleep(300 * time.Millisecond)
	_, batches := rec.seen()
	if len(batches) != 2 || len(batches[0]) != 10 || pk(batches[1][0]) != "k4" || len(batches[1]) != 6 {
		t.Fatalf("batches %d: first %d records, second starts at %s with %d", len(batches), len(batches[0]), pk(batches[1][0]), len(batches[1]))
	}
}

// A function error splits the batch (BisectBatchOnFunctionError) until the
// failing record is alone; after MaximumRetryAttempts its batch's
// description goes to the OnFailure queue and the shard moves on: every
// other record is delivered.
func TestStreamPollerBisectsAndSendsTheFailureToItsQueue(t *testing.T) {
	db, streams, table, arn := streamTable(t)
	for i := 0; i < 16; i++ {
		put(t, db, table, "k"+strconv.Itoa(i), i)
	}
	put(t, db, table, "after", 16)
	cfg, _ := awsconfig.Load(context.Background())
	sq := sqs.NewFromConfig(cfg)
	q := testQueue(t, sq, 30, 0)
	ok := map[string]int{}
	var mu sync.Mutex
	rec := &recorder{}
	rec.answer = func(batch []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
		for _, r := range batch {
			if pk(r) == "k9" {
				return events.DynamoDBEventResponse{}, errors.New("poison")
			}
		}
		mu.Lock()
		for _, r := range batch {
			ok[pk(r)]++
		}
		mu.Unlock()
		return events.DynamoDBEventResponse{}, nil
	}
	pollStream(t, streams, sq, devstack.StreamSource{FunctionID: "F", StreamARN: arn, StartingPosition: "TRIM_HORIZON", BatchSize: 16,
		Bisect: true, MaxRetries: 2, OnFailure: q, Timeout: 5 * time.Second, PollInterval: 50 * time.Millisecond}, rec.handler())
	wait(t, "the record after the poison", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return ok["after"] > 0 })
	mu.Lock()
	for i := 0; i < 16; i++ {
		if k := "k" + strconv.Itoa(i); (k == "k9") != (ok[k] == 0) || ok[k] > 1 {
			t.Errorf("%s delivered %d times", k, ok[k])
		}
	}
	mu.Unlock()
	out, err := sq.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &q.URL, WaitTimeSeconds: 2})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("OnFailure queue: %v %d messages", err, len(out.Messages))
	}
	var failure struct {
		RequestContext struct{ Condition string } `json:"requestContext"`
		Info           struct {
			BatchSize int    `json:"batchSize"`
			StreamArn string `json:"streamArn"`
		} `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(out.Messages[0].Body)), &failure); err != nil || failure.RequestContext.Condition != "RetryAttemptsExhausted" ||
		failure.Info.BatchSize != 1 || failure.Info.StreamArn != arn {
		t.Fatalf("failure record %v: %s", err, aws.ToString(out.Messages[0].Body))
	}
}

// The template's DynamoDB event sources are read with their settings.
func TestStreamSourcesFromTheTemplate(t *testing.T) {
	s := testenv.Stack(t)
	srcs, err := s.Resources.StreamSources()
	if err != nil {
		t.Fatal(err)
	}
	byEvent := map[string]devstack.StreamSource{}
	for _, src := range srcs {
		byEvent[src.EventName] = src
	}
	for _, name := range []string{"TransactionChanges", "RequestChanges", "OperationChanges"} {
		src, ok := byEvent[name]
		if !ok || src.FunctionID != "AuditFunction" || src.StreamARN == "" || src.BatchSize != 100 || !src.Bisect || src.MaxRetries != 10 ||
			!src.ReportBatchItemFailures || src.OnFailure.URL == "" || src.BatchingWindow != time.Second || src.StartingPosition != "TRIM_HORIZON" {
			t.Errorf("%s: %+v", name, src)
		}
	}
	ops := byEvent["OperationChanges"]
	if len(ops.Filters) != 1 {
		t.Fatalf("operations filter: %+v", ops.Filters)
	}
	rec := func(pk string) []byte {
		b, _ := json.Marshal(events.DynamoDBEventRecord{Change: events.DynamoDBStreamRecord{Keys: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute("x")}}})
		return b
	}
	for pk, want := range map[string]bool{"sbxledger#ptx_1": true, "batch#mer_1": true, "audit#heartbeat": true,
		"batchrow#mer_1#ref#a": false, "auditdue#3": false, "ratelimit#k": false, "dlv#12": false} {
		if got := ops.Filters[0].Match(rec(pk)); got != want {
			t.Errorf("operations filter on %s: %v", pk, got)
		}
	}
}
