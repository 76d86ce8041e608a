package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testing/needs"
)

func TestSelectedBackend(t *testing.T) {
	for v, want := range map[string]string{"": BackendDynalite, "dynalite": BackendDynalite, "moto": BackendMoto} {
		t.Setenv(BackendEnv, v)
		if got, err := SelectedBackend(); err != nil || got != want {
			t.Errorf("%s=%q: got %q, %v; want %q", BackendEnv, v, got, err, want)
		}
	}
	t.Setenv(BackendEnv, "localstack")
	if _, err := SelectedBackend(); err == nil {
		t.Error("an unknown backend must be an error, not the default")
	}
}

// A missing moto_server fails the start; it never falls back to dynalite.
func TestMotoMissingIsAnError(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := StartMoto(context.Background(), t.TempDir(), 0); err == nil || !strings.Contains(err.Error(), "moto_server") {
		t.Fatalf("StartMoto without moto_server on PATH: %v", err)
	}
}

// moto_server listens on loopback only, and Stop leaves no process behind.
func TestMotoStartsOnLoopbackAndStops(t *testing.T) {
	needs.External(t, "moto_server")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	emu, err := StartMoto(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Stop()
	if emu.Backend != BackendMoto || !strings.HasPrefix(emu.SQS, "http://127.0.0.1:") || emu.S3 != emu.SQS ||
		!strings.HasPrefix(emu.DynamoDB, "http://127.0.0.1:") {
		t.Fatalf("endpoints: %+v", emu)
	}
	resp, err := http.Get(emu.SQS + "/moto-api/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pids := emu.PIDs()
	emu.Stop()
	for _, pid := range pids {
		// The whole process group (the pyenv shim and Python) is gone.
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still exists after Stop (kill 0: %v)", pid, err)
		}
	}
	for _, u := range []string{emu.SQS + "/moto-api/", emu.DynamoDB} {
		if _, err := http.Get(u); err == nil {
			t.Errorf("%s still answers after Stop", u)
		}
	}
}

// LocalStack mode (AWS_ENDPOINT_URL) in samconfig's region, against moto,
// which like LocalStack and AWS refuses a bucket outside us-east-1 without
// a LocationConstraint. Everything the template provisions is checked.
func TestExternalEndpointInEUWest1(t *testing.T) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emu, err := StartMoto(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Stop()
	t.Setenv("AWS_ENDPOINT_URL", emu.S3)
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(cfg, s3store.S3Options)

	// The emulator behaves as AWS documents: no LocationConstraint outside
	// us-east-1 is refused (so this test would fail without it).
	_, err = s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("no-location-constraint")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "IllegalLocationConstraintException" {
		t.Fatalf("CreateBucket in eu-west-1 without LocationConstraint: %v; want IllegalLocationConstraintException", err)
	}

	stateDir := t.TempDir()
	s, err := Start(ctx, Options{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Info.External || s.Info.Region != "eu-west-1" || s.Info.Endpoints.S3 != emu.S3 {
		t.Fatalf("stack info: external %v region %q endpoints %+v", s.Info.External, s.Info.Region, s.Info.Endpoints)
	}
	info, err := ReadInfo(stateDir)
	if err != nil || info.Region != "eu-west-1" {
		t.Fatalf("stack.json region %q: %v", info.Region, err)
	}
	if len(s.Resources.Buckets) == 0 {
		t.Fatal("the template's buckets were not provisioned")
	}
	for id, name := range s.Resources.Buckets {
		loc, err := s3c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(name)})
		if err != nil || loc.LocationConstraint != s3types.BucketLocationConstraint("eu-west-1") {
			t.Errorf("bucket %s (%s) location %v: %v", id, name, loc, err)
		}
	}
	for id, q := range s.Resources.Queues {
		if !strings.HasPrefix(q.ARN, "arn:aws:sqs:eu-west-1:"+Account+":") {
			t.Errorf("queue %s ARN %s: want eu-west-1 in account %s", id, q.ARN, Account)
		}
	}
	env, err := s.Resources.Env("SandboxFunction")
	if err != nil || !strings.Contains(env["SANDBOX_CALLBACK_BASE_URL"], ".execute-api.eu-west-1.") {
		t.Errorf("AWS::Region in function environment: %v %v", env, err)
	}
	checkProvisioned(ctx, t, cfg, s.Resources)
}

// checkProvisioned compares what the emulator holds with the template:
// every table with its keys, GSIs (and projections) and TTL, every queue
// with its attributes and redrive policy, every bucket.
func checkProvisioned(ctx context.Context, t *testing.T, cfg aws.Config, r *Resources) {
	t.Helper()
	db := dynamodb.NewFromConfig(cfg)
	tables, err := r.Template.Tables(r.resolver)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range tables {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec.Name)})
		if err != nil {
			t.Errorf("table %s: %v", spec.LogicalID, err)
			continue
		}
		if len(out.Table.KeySchema) != len(spec.Keys) || aws.ToString(out.Table.KeySchema[0].AttributeName) != spec.Keys[0].Name {
			t.Errorf("table %s key schema %v, template %v", spec.LogicalID, out.Table.KeySchema, spec.Keys)
		}
		var want, got []string
		for _, ix := range spec.Indexes {
			want = append(want, ix.Name+"/"+ix.Projection.Type+"/"+strings.Join(ix.Projection.NonKeyAttributes, ","))
		}
		for _, ix := range out.Table.GlobalSecondaryIndexes {
			got = append(got, aws.ToString(ix.IndexName)+"/"+string(ix.Projection.ProjectionType)+"/"+strings.Join(ix.Projection.NonKeyAttributes, ","))
		}
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(want, " ") != strings.Join(got, " ") {
			t.Errorf("table %s indexes %v, template %v", spec.LogicalID, got, want)
		}
		if spec.TTL != "" {
			ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(spec.Name)})
			if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != dtypes.TimeToLiveStatusEnabled ||
				aws.ToString(ttl.TimeToLiveDescription.AttributeName) != spec.TTL {
				t.Errorf("table %s TTL on %s: %+v %v", spec.LogicalID, spec.TTL, ttl, err)
			}
		}
	}
	sq := sqs.NewFromConfig(cfg)
	queues, err := r.Template.Queues(r.resolver)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range queues {
		q := r.Queues[spec.LogicalID]
		attrs, err := spec.Attributes(r.resolver)
		if err != nil {
			t.Fatal(err)
		}
		out, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Errorf("queue %s: %v", spec.LogicalID, err)
			continue
		}
		for k, v := range attrs {
			if k == "RedrivePolicy" {
				var a, b map[string]any
				_ = json.Unmarshal([]byte(v), &a)
				_ = json.Unmarshal([]byte(out.Attributes[k]), &b)
				if a["deadLetterTargetArn"] != b["deadLetterTargetArn"] || a["deadLetterTargetArn"] != r.Queues[spec.DeadLetterQueueID].ARN {
					t.Errorf("queue %s redrive policy %s, template %s", spec.LogicalID, out.Attributes[k], v)
				}
				continue
			}
			if out.Attributes[k] != v {
				t.Errorf("queue %s %s = %q, template %q", spec.LogicalID, k, out.Attributes[k], v)
			}
		}
	}
	s3c := s3.NewFromConfig(cfg, s3store.S3Options)
	for id, name := range r.Buckets {
		if _, err := s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Errorf("bucket %s: %v", id, err)
		}
	}
}

// The stack chosen by PAYREQ_BACKEND=moto provisions the whole template.
func TestMotoBackendProvisionsTemplate(t *testing.T) {
	needs.External(t, "moto_server")
	t.Setenv(BackendEnv, BackendMoto)
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_REGION"} {
		t.Setenv(k, "") // restored after the test; Start sets the emulator's
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	s, err := Start(ctx, Options{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Info.Backend != BackendMoto || s.Info.External || s.Info.Region != Region {
		t.Fatalf("stack info: %+v", s.Info)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "logs", "moto.log")); err != nil {
		t.Fatal(err)
	}
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkProvisioned(ctx, t, cfg, s.Resources)
	resp, err := http.Get(s.Info.APIBase + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Conditional writes on moto are atomic, as DynamoDB documents. moto_server
// alone lets concurrent guarded increments overshoot or lose updates; the
// serialising proxy in front of its DynamoDB API fixes it.
func TestMotoConditionalWritesAreAtomic(t *testing.T) {
	needs.External(t, "moto_server")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, table := motoTable(ctx, t, "atomic")
	// Per round, 8 concurrent increments of one counter guarded by a limit
	// of 4 (a payment limit counter): exactly 4 succeed and it ends at 4.
	for round := 0; round < 20; round++ {
		key := map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: fmt.Sprint("k", round)}}
		var wg sync.WaitGroup
		var wins atomic.Int32
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key,
					UpdateExpression:          aws.String("SET n = if_not_exists(n, :zero) + :one"),
					ConditionExpression:       aws.String("attribute_not_exists(n) OR n < :max"),
					ExpressionAttributeValues: map[string]dtypes.AttributeValue{":zero": &dtypes.AttributeValueMemberN{Value: "0"}, ":one": &dtypes.AttributeValueMemberN{Value: "1"}, ":max": &dtypes.AttributeValueMemberN{Value: "4"}}})
				var cf *dtypes.ConditionalCheckFailedException
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.As(err, &cf):
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		n := out.Item["n"].(*dtypes.AttributeValueMemberN).Value
		if wins.Load() != 4 || n != "4" {
			t.Fatalf("round %d: %d guarded increments succeeded and the counter is %s, want 4 and 4", round, wins.Load(), n)
		}
	}
}

// A transaction on moto costs about the same on a table of 5,000 items as
// on an empty one, and a refused one still leaves nothing written. moto
// 5.2.1 deep-copies the tables a transaction names (once per item) to roll
// back; infra/local/moto-server.py keeps a copy of the named items instead,
// so a 25-row claim stays fast however full the tables are.
func TestMotoTransactionCostIsIndependentOfTableSize(t *testing.T) {
	needs.External(t, "moto_server")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, table := motoTable(ctx, t, "copies")
	item := func(k string) map[string]dtypes.AttributeValue {
		it := map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: k}}
		for i := 0; i < 10; i++ {
			it[fmt.Sprint("a", i)] = &dtypes.AttributeValueMemberS{Value: strings.Repeat("x", 40)}
		}
		return it
	}
	puts := func(prefix string, n int) []dtypes.TransactWriteItem {
		var ws []dtypes.TransactWriteItem
		for i := 0; i < n; i++ {
			ws = append(ws, dtypes.TransactWriteItem{Put: &dtypes.Put{TableName: table, Item: item(fmt.Sprint(prefix, i)),
				ConditionExpression: aws.String("attribute_not_exists(pk)")}})
		}
		return ws
	}
	timed := func(prefix string, n int) time.Duration {
		start := time.Now()
		if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(prefix, n)}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	// 25-item transactions on the empty table, then on 5,000 items.
	var empty, full time.Duration
	for r := 0; r < 3; r++ {
		empty += timed(fmt.Sprint("empty-", r, "-"), 25)
	}
	for b := 0; b < 200; b++ { // 5,000 items
		var reqs []dtypes.WriteRequest
		for i := 0; i < 25; i++ {
			reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: item(fmt.Sprint("fill-", b, "-", i))}})
		}
		if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{*table: reqs}}); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < 3; r++ {
		full += timed(fmt.Sprint("full-", r, "-"), 25)
	}
	t.Logf("25-item TransactWriteItems, 3 calls: %s on an empty table, %s on 5,000 items", empty, full)
	if full > 4*empty+300*time.Millisecond {
		t.Errorf("on 5,000 items a transaction took %.1f times as long as on an empty table: the table is copied", float64(full)/float64(empty))
	}
	// Refused (the last item exists): nothing of it is written.
	refused := append(puts("refused-", 24), dtypes.TransactWriteItem{Put: &dtypes.Put{TableName: table, Item: item("fill-0-0"),
		ConditionExpression: aws.String("attribute_not_exists(pk)")}})
	var tc *dtypes.TransactionCanceledException
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: refused}); !errors.As(err, &tc) {
		t.Fatalf("a transaction over an existing item: %v, want TransactionCanceledException", err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, ConsistentRead: aws.Bool(true),
		Key: map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: "refused-0"}}})
	if err != nil || out.Item != nil {
		t.Fatalf("an item of the refused transaction was written: %v %v", out.Item, err)
	}
}

// motoTable starts moto (stopped when the test ends) and creates a table
// keyed by the string pk in it.
func motoTable(ctx context.Context, t *testing.T, name string) (*dynamodb.Client, *string) {
	t.Helper()
	emu, err := StartMoto(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	cfg, err := awsconfig.Load(ctx, func(o *config.LoadOptions) error {
		o.Region = Region
		o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		o.BaseEndpoint = emu.DynamoDB
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	table := aws.String(name)
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: table, BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}}}); err != nil {
		t.Fatal(err)
	}
	return db, table
}

// Two stacks with different names on the same emulators (the crash tests
// run several at once) share no table, queue or bucket: a batch
// continuation one stack queues cannot be taken by the other's poller.
func TestStacksWithDifferentNamesShareNoResource(t *testing.T) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	infra, err := InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	emu, err := StartEmulators(ctx, infra, t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Stop()
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", emu.DynamoDB)
	t.Setenv("AWS_ENDPOINT_URL_SQS", emu.SQS)
	t.Setenv("AWS_ENDPOINT_URL_S3", emu.S3)

	if _, err := Start(ctx, Options{StateDir: t.TempDir(), APIPort: 0, StackName: "Not_A_Bucket_Prefix"}); err == nil {
		t.Fatal("a stack name that cannot begin a bucket name was accepted")
	}
	names := map[string]string{} // resource name → stack
	for _, stack := range []string{"alpha", "beta"} {
		s, err := Start(ctx, Options{StateDir: t.TempDir(), APIPort: 0, StackName: stack})
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, n := range s.Resources.Tables {
			all = append(all, n)
		}
		for _, q := range s.Resources.Queues {
			all = append(all, q.Name)
		}
		for _, n := range s.Resources.Buckets {
			all = append(all, n)
		}
		s.Close()
		if len(all) == 0 {
			t.Fatalf("stack %s provisioned nothing", stack)
		}
		for _, n := range all {
			if !strings.HasPrefix(n, stack+"-") {
				t.Errorf("stack %s has resource %s outside its name", stack, n)
			}
			if other, ok := names[n]; ok {
				t.Errorf("resource %s belongs to stacks %s and %s", n, other, stack)
			}
			names[n] = stack
		}
	}
}
