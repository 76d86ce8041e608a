package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/s3store"
	"github.com/payreq/payreq/internal/testing/motoserver"
	"github.com/payreq/payreq/internal/testing/needs"
)

// LocalStack mode (AWS_ENDPOINT_URL) in samconfig's region, against moto:
// one endpoint for every service as LocalStack is, and like LocalStack and
// AWS it refuses a bucket outside us-east-1 without a LocationConstraint
// (the local emulators serve each service on its own port and accept it).
// Everything the template provisions is checked.
func TestExternalEndpointInEUWest1(t *testing.T) {
	needs.External(t, "moto_server")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	endpoint := motoserver.Start(t)
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
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
	if !s.Info.External || s.Info.Region != "eu-west-1" || s.Info.Endpoints.S3 != endpoint {
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
