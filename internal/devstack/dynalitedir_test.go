package devstack

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/testing/needs"
)

// With PAYREQ_DYNALITE_DIR, dynalite keeps its tables in LevelDB files in
// that directory (the million-row run's tables outgrow memory), and an item
// written is read back through the SDK.
func TestDynaliteKeepsTablesOnDiskWhenAsked(t *testing.T) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infra := emulatorFiles(t)
	dir := t.TempDir()
	t.Setenv(DynaliteDirEnv, dir)
	emu, err := StartEmulators(ctx, infra, filepath.Join(t.TempDir(), "logs"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	db := txClient(ctx, t, emu.DynamoDB)
	table := aws.String("ondisk")
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: table, BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}}}); err != nil {
		t.Fatal(err)
	}
	// A table is usable once ACTIVE (CreateTable answers CREATING).
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: table}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	key := map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: "a"}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key}); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("item not read back: %v %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatalf("no LevelDB store in %s: %v", dir, err)
	}
}

// emulatorFiles is infra/local with its pinned node modules installed, for
// the tests that start emulators themselves.
func emulatorFiles(t *testing.T) string {
	t.Helper()
	infra, err := InfraDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureNodeModules(infra, io.Discard); err != nil {
		t.Fatal(err)
	}
	return infra
}
