package auditwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/payreq/payreq/internal/audit"
	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testenv"
	"github.com/payreq/payreq/internal/wire"
	"github.com/payreq/payreq/internal/wire/auditwire"
)

// volume is set by volume_test.go (build tag volume).
var volume bool

// The stack judges a change 2 s after it (not 5 minutes) and runs its
// schedules every second, so the audit's minutes become seconds.
func TestMain(m *testing.M) {
	testenv.Options.Env = map[string]string{"AUDIT_GRACE": "2s"}
	testenv.Options.ScheduleEvery = time.Second
	if volume {
		// The volume test invokes AuditFunction itself, measuring each run.
		testenv.Options.Untriggered = []string{"AuditFunction"}
	}
	testenv.Main(m)
}

func pay(t *testing.T, api, key, token string) int64 {
	t.Helper()
	r := testenv.Do(t, "POST", api+"/payments/h2h/44", key, `{"amount":"4.20","unit":"EUR","name":"Ann Lee","email":"ann@example.com",
		"phoneNumber":"4915112345678","address":"Main St 1","city":"Berlin","state":"BE","postalCode":"10115","country":"DE","token":"`+token+`"}`)
	if r.Status != 200 {
		t.Fatalf("pay %s: %d %s", token, r.Status, r.Body)
	}
	return int64(r.JSON(t)["paymentRequestId"].(float64))
}

func openViolations(t *testing.T, a *dynamo.AuditStore, requestID int64) []audit.RecordedViolation {
	t.Helper()
	all, err := a.OpenViolations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.RecordedViolation
	for _, v := range all {
		if v.PaymentRequestID == requestID {
			out = append(out, v)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// settled waits until every check a write made up to now asks for is
// due (grace 2 s, rounded up to the due resolution) and has been taken by
// the stack's scheduled run (every second): no check of requests ids is
// left. Requests written before the call share the one wait.
func settled(t *testing.T, a *dynamo.AuditStore, ids ...int64) {
	t.Helper()
	time.Sleep(2*time.Second + audit.DueResolution + 2*time.Second)
	waitFor(t, "the scheduled run to take the due checks", 30*time.Second, func() bool {
		dues, err := a.DueChecks(context.Background(), time.Now(), 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dues {
			for _, id := range ids {
				if d.Subject == audit.RequestSubject(id) {
					return false
				}
			}
		}
		return true
	})
}

// Payments made through the API are judged from the tables' streams and
// found clean; a paid request whose transaction was declined, written
// straight into the table, is reported within seconds of the write (the
// grace, the due checks' 10 s resolution and one run), once however often
// it is judged again, and cleared when repaired.
func TestStreamedChangesAreJudgedAndAViolationReportedOnce(t *testing.T) {
	st := testenv.Stack(t)
	m := testenv.NewMerchant(t)
	a := testenv.PatientStore(t, st).Audit()
	approved := pay(t, st.Info.APIBase, m.APIKey, "tok_success")
	declined := pay(t, st.Info.APIBase, m.APIKey, "tok_declined")
	settled(t, a, approved, declined)
	if v := append(openViolations(t, a, approved), openViolations(t, a, declined)...); len(v) != 0 {
		t.Fatalf("clean payments reported: %+v", v)
	}

	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	setStatus := func(st payment.RequestStatus) {
		t.Helper()
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(testenv.Stack(t).Info.Tables["PaymentRequestsTable"]),
			Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: strconv.FormatInt(declined, 10)}},
			UpdateExpression:          aws.String("SET #s = :s, updatedAt = :now"),
			ExpressionAttributeNames:  map[string]string{"#s": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: strconv.Itoa(int(st))}, ":now": &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setStatus(payment.RequestPaid)
	took := waitFor(t, "the violation", 60*time.Second, func() bool { return len(openViolations(t, a, declined)) > 0 })
	t.Logf("violation reported %v after the write (grace 2s, due resolution %v, schedule 1s)", took.Round(time.Second), audit.DueResolution)
	v := openViolations(t, a, declined)
	if len(v) != 1 || v[0].Invariant != audit.PaidRequestHasApprovedTx || v[0].Subject != audit.RequestSubject(declined).Key() {
		t.Fatalf("violations %+v", v)
	}
	// Written again (the same broken state): judged again, not reported again.
	setStatus(payment.RequestPaid)
	settled(t, a, declined)
	if again := openViolations(t, a, declined); len(again) != 1 || !again[0].FoundAt.Equal(v[0].FoundAt) {
		t.Fatalf("judged again: %+v, first %+v", again, v)
	}
	setStatus(payment.RequestUnpaid)
	waitFor(t, "the repair to clear the violation", 60*time.Second, func() bool { return len(openViolations(t, a, declined)) == 0 })
}

// auditor is AuditFunction as the stack's env.json builds it.
func auditor(t *testing.T) *auditwire.Auditor {
	t.Helper()
	env, err := testenv.Stack(t).FunctionEnv("AuditFunction")
	if err != nil {
		t.Fatal(err)
	}
	a, err := auditwire.New(context.Background(), func(k string) string { return env[k] }, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The same violation found by 30 checks at once is recorded, and reported,
// once.
func TestViolationRecordedOnceUnderConcurrency(t *testing.T) {
	a := testenv.PatientStore(t, testenv.Stack(t)).Audit()
	v := audit.RecordedViolation{Violation: audit.Violation{Invariant: audit.LedgerChargeHasApprovedTx,
		Reference: "ptx_" + strconv.FormatInt(time.Now().UnixNano(), 10), Detail: "test"}, Subject: "chg#x", FoundAt: time.Now()}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		new int
	)
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := a.RecordViolation(context.Background(), v)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				new++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	defer a.ClearViolation(context.Background(), v.Key())
	if new != 1 {
		t.Fatalf("%d of 30 concurrent checks reported the violation, want 1", new)
	}
}

// A record DynamoDB's TTL removed reaches the audit as a REMOVE by the
// service principal and is archived to the archive bucket, one JSON-lines
// object per batch, named so that a retried batch writes it again.
// DynamoDB Local never expires an item (docs/testing.md), so the stream
// record is the one DynamoDB documents for a TTL deletion.
func TestExpiredRecordsAreArchived(t *testing.T) {
	st := testenv.Stack(t)
	a := auditor(t)
	seq := strconv.FormatInt(time.Now().UnixNano(), 10)
	var ev events.DynamoDBEvent
	b, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{
		"eventID": "1", "eventName": "REMOVE", "eventVersion": "1.1", "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
		"eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/" + st.Info.Tables["TransactionsTable"] + "/stream/x",
		"userIdentity":   map[string]string{"type": "Service", "principalId": "dynamodb.amazonaws.com"},
		"dynamodb": map[string]any{"ApproximateCreationDateTime": 1858538400, "SequenceNumber": seq, "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES",
			"Keys":     map[string]any{"id": map[string]string{"N": "42"}},
			"OldImage": map[string]any{"id": map[string]string{"N": "42"}, "paymentRequestId": map[string]string{"N": "7"}, "status": map[string]string{"N": "1"}}},
	}}})
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the batch retried
		if resp, err := a.Stream(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("stream: %+v %v", resp, err)
		}
	}
	cfg, _ := awsconfig.Load(context.Background())
	objs := s3store.New(s3store.NewClient(cfg), st.Info.Buckets["ArchiveBucket"])
	list, err := objs.List(context.Background(), "transactions/2028/11/22/")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, o := range list {
		if strings.Contains(o.Key, seq) {
			found = append(found, o.Key)
		}
	}
	if len(found) != 1 {
		t.Fatalf("archive objects %v", found)
	}
	out, err := s3.NewFromConfig(cfg, s3store.S3Options).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(st.Info.Buckets["ArchiveBucket"]), Key: &found[0]})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(out.Body)
	var line struct {
		Table string                                   `json:"table"`
		Item  map[string]events.DynamoDBAttributeValue `json:"item"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Table != "transactions" || line.Item["paymentRequestId"].Number() != "7" {
		t.Fatalf("archived %v: %s", err, buf.String())
	}
}

// The scheduled run publishes every metric on every run, 0 included, and
// the stream heartbeat comes back through the operations table's stream:
// no unchecked age while the stack's consumer keeps up.
func TestScheduledRunPublishesEveryMetric(t *testing.T) {
	testenv.Stack(t)
	a := auditor(t)
	var got []audit.RunMetrics
	a.Metrics = func(m audit.RunMetrics) error { got = append(got, m); return nil }
	if _, err := a.Scheduled(context.Background()); err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer
	if len(got) != 1 || got[0].Publish(&line) != nil {
		t.Fatalf("metrics %+v", got)
	}
	var values map[string]any
	_ = json.Unmarshal(line.Bytes(), &values)
	for _, name := range audit.ScheduledMetrics {
		if _, ok := values[name]; !ok {
			t.Errorf("metric %s missing from %s", name, line.String())
		}
	}
	// The stack's own scheduled runs send heartbeats each second and its
	// stream consumer reads them: the lag stays near zero.
	time.Sleep(3 * time.Second)
	st, err := a.Scheduled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.StreamLag > 5*time.Second {
		t.Fatalf("stream lag %v with the consumer running", st.StreamLag)
	}
	_ = devstack.Region
}
