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
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/cfn"
)

// Local stack identity.
const (
	Region    = "us-east-1"
	Account   = "000000000000"
	StackName = "paydev"
)

// Queue is a created queue.
type Queue struct{ Name, URL, ARN string }

// Resources are the template's resources as created in the emulators.
type Resources struct {
	Template  *cfn.Template
	Tables    map[string]string // logical id → table name
	Queues    map[string]Queue
	Buckets   map[string]string
	Functions []cfn.FunctionSpec
	resolver  *cfn.Resolver
}

// Provision reads the template and creates every table (with its indexes),
// queue (dead-letter queues first) and bucket in the configured endpoints.
// It is idempotent: existing resources are kept (LocalStack re-runs).
func Provision(ctx context.Context, cfg aws.Config, template []byte, params map[string]string, secret string) (*Resources, error) {
	t, err := cfn.Parse(template)
	if err != nil {
		return nil, err
	}
	res := &Resources{Template: t, Tables: map[string]string{}, Queues: map[string]Queue{}, Buckets: map[string]string{}}
	res.resolver = &cfn.Resolver{
		T:      t,
		Params: params,
		Pseudo: map[string]string{"AWS::Region": Region, "AWS::StackName": StackName, "AWS::AccountId": Account,
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
		if err := createTable(ctx, db, spec); err != nil {
			return nil, err
		}
		res.Tables[spec.LogicalID] = spec.Name
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
	s3c := s3.NewFromConfig(cfg, awsconfig.S3Options)
	for _, spec := range buckets {
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &spec.Name}); err != nil && !alreadyExists(err) {
			return nil, fmt.Errorf("create bucket %s: %w", spec.Name, err)
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
	return StackName + "-" + id, nil
}

func (r *Resources) getAtt(id, attr string) (string, error) {
	switch {
	case r.Tables[id] != "" && attr == "Arn":
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", Region, Account, r.Tables[id]), nil
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
	return fmt.Sprintf("arn:aws:local:%s:%s:%s/%s", Region, Account, strings.ToLower(attr), id), nil
}

func createTable(ctx context.Context, db *dynamodb.Client, spec cfn.TableSpec) error {
	if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &spec.Name}); err == nil {
		return nil
	}
	in := &dynamodb.CreateTableInput{TableName: aws.String(spec.Name), BillingMode: dtypes.BillingModePayPerRequest}
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
		return fmt.Errorf("create table %s: %w", spec.Name, err)
	}
	// dynalite has no UpdateTimeToLive; code checks expiry itself (DESIGN §2).
	waiter := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20e6, 200e6
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &spec.Name}, 30e9); err != nil {
		return fmt.Errorf("wait for table %s: %w", spec.Name, err)
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
