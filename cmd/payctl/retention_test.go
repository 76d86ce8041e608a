package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/dynamo"
	"github.com/payreq/payreq/internal/testenv"
)

// A transaction stored before its table had TTL gets its expiresAt from
// `payctl retention backfill`; run again, the command sets nothing.
func TestRetentionBackfillThroughTheStack(t *testing.T) {
	ctx := context.Background()
	e, err := connect(ctx, globals{local: true, stateDir: testenv.StateDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(e.cfg)
	table := testenv.Stack(t).Info.Tables["TransactionsTable"]
	id := strconv.FormatInt(time.Now().UnixNano(), 10)
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberN{Value: id}}
	item := map[string]types.AttributeValue{"id": key["id"], "status": &types.AttributeValueMemberN{Value: "1"},
		"createdAt": &types.AttributeValueMemberS{Value: created.Format(time.RFC3339Nano)},
		"updatedAt": &types.AttributeValueMemberS{Value: created.Format(time.RFC3339Nano)}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	defer db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key})

	backfill := func() dynamo.BackfillCounts {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"--local", "--state-dir", testenv.StateDir(t), "retention", "backfill", "--segments", "2"}, &stdout, &stderr); code != 0 {
			t.Fatalf("retention backfill: exit %d: %s", code, stderr.String())
		}
		var c dynamo.BackfillCounts
		if err := json.Unmarshal(stdout.Bytes(), &c); err != nil {
			t.Fatalf("stdout %q: %v", stdout.String(), err)
		}
		return c
	}
	if c := backfill(); c.Set < 1 {
		t.Fatalf("first run: %+v, want the legacy transaction set", c)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(created.Add(dynamo.RecordRetention).Unix(), 10)
	if got, _ := out.Item["expiresAt"].(*types.AttributeValueMemberN); got == nil || got.Value != want {
		t.Fatalf("expiresAt %v, want %s", out.Item["expiresAt"], want)
	}
	if c := backfill(); c.Set != 0 {
		t.Fatalf("second run: %+v, want nothing set", c)
	}
}
