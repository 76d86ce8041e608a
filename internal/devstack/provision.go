package devstack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/s3store"
)

// Local stack identity. Region is the local emulators' region; against an
// external endpoint (LocalStack) the SDK configuration's region is used.
// StackName is the default AWS::StackName: the prefix of every table, queue
// and bucket name, so stacks with different names share emulators without
// sharing a resource.
const (
	Region    = "us-east-1"
	Account   = "000000000000"
	StackName = "paydev"
)

// Queue is a created queue.
type Queue struct{ Name, URL, ARN string }

// Resources are the template's resources as created in the emulators.
type Resources struct {
	Region    string // AWS::Region of the stack
	StackName string // AWS::StackName of the stack
	Template  *cfn.Template
	Tables    map[string]string // logical id → table name
	Queues    map[string]Queue
	Buckets   map[string]string
	// Streams are the tables' stream ARNs (StreamSpecification), by the
	// table's logical id.
	Streams   map[string]string
	Functions []cfn.FunctionSpec
	resolver  *cfn.Resolver
}

// Provision reads the template and creates every table (with its indexes),
// queue (dead-letter queues first) and bucket in the configured endpoints.
// It is idempotent: existing resources are kept (LocalStack re-runs). The
// stack's region is cfg.Region; stackName "" is StackName.
func Provision(ctx context.Context, cfg aws.Config, stackName string, template []byte, params map[string]string, secret string) (*Resources, error) {
	t, err := cfn.Parse(template)
	if err != nil {
		return nil, err
	}
	region := cfg.Region
	if region == "" {
		region = Region
	}
	if stackName == "" {
		stackName = StackName
	}
	res := &Resources{Region: region, StackName: stackName, Template: t, Tables: map[string]string{}, Queues: map[string]Queue{},
		Buckets: map[string]string{}, Streams: map[string]string{}}
	res.resolver = &cfn.Resolver{
		T:      t,
		Params: params,
		Pseudo: map[string]string{"AWS::Region": region, "AWS::StackName": stackName, "AWS::AccountId": Account,
			"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": ""},
		Ref:     res.ref,
		GetAtt:  res.getAtt,
		Dynamic: func(string) (string, error) { return secret, nil },
	}
	tables, err := t.Tables(res.resolver)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	for _, spec := range tables {
		stream, err := createTable(ctx, db, spec)
		if err != nil {
			return nil, err
		}
		res.Tables[spec.LogicalID] = spec.Name
		if stream != "" {
			res.Streams[spec.LogicalID] = stream
		}
	}
	queues, err := t.Queues(res.resolver)
	if err != nil {
		return nil, err
	}
	sq := sqs.NewFromConfig(cfg)
	for _, spec := range queues {
		attrs, err := spec.Attributes(res.resolver)
		if err != nil {
			return nil, err
		}
		q, err := createQueue(ctx, sq, spec.Name, attrs)
		if err != nil {
			return nil, err
		}
		res.Queues[spec.LogicalID] = q
	}
	buckets, err := t.Buckets(res.resolver)
	if err != nil {
		return nil, err
	}
	s3c := s3.NewFromConfig(cfg, s3store.S3Options)
	for _, spec := range buckets {
		if err := createBucket(ctx, s3c, spec.Name, region); err != nil {
			return nil, err
		}
		res.Buckets[spec.LogicalID] = spec.Name
	}
	if res.Functions, err = t.Functions(); err != nil {
		return nil, err
	}
	return res, nil
}

// Env returns the resolved environment of a function.
func (r *Resources) Env(logicalID string) (map[string]string, error) {
	for _, f := range r.Functions {
		if f.LogicalID == logicalID {
			return f.ResolveEnv(r.resolver)
		}
	}
	return nil, fmt.Errorf("function %s is not in the template", logicalID)
}

func (r *Resources) ref(id string) (string, error) {
	if n, ok := r.Tables[id]; ok {
		return n, nil
	}
	if q, ok := r.Queues[id]; ok {
		return q.URL, nil
	}
	if b, ok := r.Buckets[id]; ok {
		return b, nil
	}
	// Resources the emulators do not host (functions, secrets, APIs): a
	// stable local placeholder keeps the environment complete.
	return r.StackName + "-" + id, nil
}

func (r *Resources) getAtt(id, attr string) (string, error) {
	switch {
	case r.Tables[id] != "" && attr == "Arn":
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", r.Region, Account, r.Tables[id]), nil
	case r.Streams[id] != "" && attr == "StreamArn":
		return r.Streams[id], nil
	case r.Queues[id].Name != "" && attr == "Arn":
		return r.Queues[id].ARN, nil
	case r.Queues[id].Name != "" && attr == "QueueName":
		return r.Queues[id].Name, nil
	case r.Queues[id].Name != "" && attr == "QueueUrl":
		return r.Queues[id].URL, nil
	case r.Buckets[id] != "" && attr == "Arn":
		return "arn:aws:s3:::" + r.Buckets[id], nil
	case r.Template.Resources[id].Type == cfn.TypeTable || r.Template.Resources[id].Type == cfn.TypeQueue:
		return "", fmt.Errorf("!GetAtt %s.%s: not created yet or unsupported", id, attr)
	}
	return fmt.Sprintf("arn:aws:local:%s:%s:%s/%s", r.Region, Account, strings.ToLower(attr), id), nil
}

// createTable creates a table of the template, or finds it there (a
// restart on a kept database, LocalStack), waits until it is ACTIVE and
// returns its stream's ARN ("" without StreamSpecification).
func createTable(ctx context.Context, db *dynamodb.Client, spec cfn.TableSpec) (string, error) {
	in := &dynamodb.CreateTableInput{TableName: aws.String(spec.Name), BillingMode: dtypes.BillingModePayPerRequest}
	if spec.StreamViewType != "" {
		in.StreamSpecification = &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewType(spec.StreamViewType)}
	}
	for _, a := range spec.Attributes {
		in.AttributeDefinitions = append(in.AttributeDefinitions, dtypes.AttributeDefinition{
			AttributeName: aws.String(a.Name), AttributeType: dtypes.ScalarAttributeType(a.Type)})
	}
	in.KeySchema = keySchema(spec.Keys)
	for _, ix := range spec.Indexes {
		gsi := dtypes.GlobalSecondaryIndex{IndexName: aws.String(ix.Name), KeySchema: keySchema(ix.Keys),
			Projection: &dtypes.Projection{ProjectionType: dtypes.ProjectionType(ix.Projection.Type)}}
		if len(ix.Projection.NonKeyAttributes) > 0 {
			gsi.Projection.NonKeyAttributes = ix.Projection.NonKeyAttributes
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gsi)
	}
	if _, err := db.CreateTable(ctx, in); err != nil && !alreadyExists(err) {
		return "", fmt.Errorf("create table %s: %w", spec.Name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20e6, 200e6
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &spec.Name}, 30e9); err != nil {
		return "", fmt.Errorf("wait for table %s: %w", spec.Name, err)
	}
	if err := enableTTL(ctx, db, spec); err != nil {
		return "", err
	}
	return enableStream(ctx, db, spec)
}

// enableStream returns the table's stream ARN, turning on the template's
// stream first on a table that was created without it (a kept database
// from before the template had one).
func enableStream(ctx context.Context, db *dynamodb.Client, spec cfn.TableSpec) (string, error) {
	if spec.StreamViewType == "" {
		return "", nil
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &spec.Name})
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", spec.Name, err)
	}
	if ss := out.Table.StreamSpecification; ss == nil || !aws.ToBool(ss.StreamEnabled) {
		up, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: &spec.Name, StreamSpecification: &dtypes.StreamSpecification{
			StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewType(spec.StreamViewType)}})
		if err != nil {
			return "", fmt.Errorf("enable the stream of %s: %w", spec.Name, err)
		}
		return aws.ToString(up.TableDescription.LatestStreamArn), nil
	}
	return aws.ToString(out.Table.LatestStreamArn), nil
}

// enableTTL turns on the template's TimeToLiveSpecification. The code never
// relies on TTL deletion (reads check expiry themselves): TTL only removes
// old items, up to days late on AWS, and never on DynamoDB Local.
func enableTTL(ctx context.Context, db *dynamodb.Client, spec cfn.TableSpec) error {
	if spec.TTL == "" {
		return nil
	}
	_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &spec.Name,
		TimeToLiveSpecification: &dtypes.TimeToLiveSpecification{AttributeName: &spec.TTL, Enabled: aws.Bool(true)}})
	var apiErr smithy.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException" && strings.Contains(apiErr.ErrorMessage(), "already enabled"):
		return nil // a re-run against LocalStack
	}
	return fmt.Errorf("enable TTL on %s: %w", spec.Name, err)
}

// createBucket creates a bucket in region. Outside us-east-1, S3 requires
// the region as LocationConstraint (AWS answers IllegalLocationConstraint
// otherwise, and so do LocalStack and moto); in us-east-1 it must be absent.
func createBucket(ctx context.Context, s3c *s3.Client, name, region string) error {
	in := &s3.CreateBucketInput{Bucket: &name}
	if region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	if _, err := s3c.CreateBucket(ctx, in); err != nil && !alreadyExists(err) {
		return fmt.Errorf("create bucket %s in %s: %w", name, region, err)
	}
	return nil
}

func keySchema(keys []cfn.Key) []dtypes.KeySchemaElement {
	var out []dtypes.KeySchemaElement
	for _, k := range keys {
		out = append(out, dtypes.KeySchemaElement{AttributeName: aws.String(k.Name), KeyType: dtypes.KeyType(k.Type)})
	}
	return out
}

func createQueue(ctx context.Context, sq *sqs.Client, name string, attrs map[string]string) (Queue, error) {
	out, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		return Queue{}, fmt.Errorf("create queue %s: %w", name, err)
	}
	got, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return Queue{}, fmt.Errorf("queue %s attributes: %w", name, err)
	}
	return Queue{Name: name, URL: *out.QueueUrl, ARN: got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]}, nil
}

func alreadyExists(err error) bool {
	var inUse *dtypes.ResourceInUseException
	if errors.As(err, &inUse) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "BucketAlreadyOwnedByYou") || strings.Contains(s, "BucketAlreadyExists") || strings.Contains(s, "already exists")
}
