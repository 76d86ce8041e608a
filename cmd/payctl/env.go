package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/seal"
)

// env is what commands need: the store, the sealer and the stage.
type env struct {
	store   *dynamo.Store
	sealer  *seal.Sealer
	sandbox bool
	cfg     aws.Config
	apiBase string // the public API (trigger)

	notificationsQueue, notificationsDLQ string
	// Batch rows' notifications have their own queue and DLQ.
	batchNotificationsQueue, batchNotificationsDLQ string
}

func connect(ctx context.Context, g globals) (*env, error) {
	if g.local {
		return connectLocal(ctx, g)
	}
	var opts []func(*config.LoadOptions) error
	if g.region != "" {
		opts = append(opts, config.WithRegion(g.region))
	}
	cfg, err := awsconfig.Load(ctx, opts...)
	if err != nil {
		return nil, err
	}
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: &g.stack})
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", g.stack, err)
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("stack %s not found", g.stack)
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	sec, err := secretsmanager.NewFromConfig(cfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(outputs["SealKeySecretArn"])})
	if err != nil {
		return nil, fmt.Errorf("read seal key secret: %w", err)
	}
	sealer, err := seal.New(aws.ToString(sec.SecretString))
	if err != nil {
		return nil, err
	}
	tables := dynamo.Tables{Merchants: outputs["MerchantsTableName"], PaymentRequests: outputs["PaymentRequestsTableName"],
		Operations: outputs["OperationsTableName"], Transactions: outputs["TransactionsTableName"]}
	return &env{store: dynamo.New(dynamodb.NewFromConfig(cfg), tables), sealer: sealer, sandbox: outputs["Stage"] != "production", cfg: cfg,
		apiBase: outputs["ApiUrl"], notificationsQueue: outputs["NotificationsQueueUrl"], notificationsDLQ: outputs["NotificationsDLQUrl"],
		batchNotificationsQueue: outputs["BatchNotificationsQueueUrl"], batchNotificationsDLQ: outputs["BatchNotificationsDLQUrl"]}, nil
}

func connectLocal(ctx context.Context, g globals) (*env, error) {
	info, err := devstack.ReadInfo(g.stateDir)
	if err != nil {
		return nil, err
	}
	key, err := devstack.SealKey(g.stateDir)
	if err != nil {
		return nil, fmt.Errorf("read local seal key: %w", err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	// stack.json's endpoints and region, also for an external endpoint
	// (LocalStack): a local command must never reach real AWS, whatever
	// this shell's AWS variables say.
	devstack.UseEndpoints(info.Endpoints)
	// Any other service goes to the stack too, never to AWS.
	os.Setenv("AWS_ENDPOINT_URL", info.Endpoints.DynamoDB)
	region := info.Region
	if region == "" {
		region = devstack.Region
	}
	cfg, err := awsconfig.Load(ctx, config.WithRegion(region))
	if err != nil {
		return nil, err
	}
	tables := dynamo.Tables{Merchants: info.Tables["MerchantsTable"], PaymentRequests: info.Tables["PaymentRequestsTable"],
		Operations: info.Tables["OperationsTable"], Transactions: info.Tables["TransactionsTable"]}
	return &env{store: dynamo.New(dynamodb.NewFromConfig(cfg), tables), sealer: sealer, sandbox: true, cfg: cfg,
		apiBase: info.APIBase, notificationsQueue: info.Queues["NotificationsQueue"], notificationsDLQ: info.Queues["NotificationsDLQ"],
		batchNotificationsQueue: info.Queues["BatchNotificationsQueue"], batchNotificationsDLQ: info.Queues["BatchNotificationsDLQ"]}, nil
}
