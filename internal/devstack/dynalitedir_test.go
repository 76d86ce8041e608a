package devstack

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	ctx, dir, db, table := onDiskDynalite(t)
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

// Each read stream closes its LevelDB iterator: dynalite 4.0 ends an
// iterator with a method abstract-level lacks, so every Query and Scan left
// one open, pinning LevelDB's memtables (the on-disk emulator reached 2.2 GB
// after 46,000 batch lines, and slowed). The wrapper's fix
// (infra/local/dynalite-streams.cjs) is measured against dynalite's own
// streams, 3,000 reads with a write after each, in a node process: the heap
// still used after a full collection. The unfixed run must show the leak,
// or the measurement proves nothing (and a dynalite that fixed it would let
// the wrapper's fix go).
func TestDynaliteReadsLeaveNoIteratorOpen(t *testing.T) {
	needs.External(t, "node")
	infra := emulatorFiles(t)
	script, err := filepath.Abs(filepath.Join("testdata", "dynalite-reads.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	heapAfter := func(variant string) int64 {
		cmd := exec.Command("node", "--expose-gc", script, t.TempDir(), "3000", variant)
		cmd.Dir = infra
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v %s", variant, err, out)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	leaky, fixed := heapAfter("dynalite"), heapAfter("fixed")
	t.Logf("heap after 3,000 reads: %d MB with dynalite's streams, %d MB with the wrapper's", leaky>>20, fixed>>20)
	if fixed > 20<<20 {
		t.Errorf("the wrapper's streams leave %d MB after 3,000 reads: iterators stay open", fixed>>20)
	}
	if leaky < 3*fixed || leaky < 30<<20 {
		t.Errorf("dynalite's own streams leave %d MB, the wrapper's %d MB: the measurement no longer shows the leak", leaky>>20, fixed>>20)
	}
}

// onDiskDynalite starts the emulators with dynalite's tables in a temporary
// directory and creates one ACTIVE table keyed by pk.
func onDiskDynalite(t *testing.T) (context.Context, string, *dynamodb.Client, *string) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
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
	return ctx, dir, db, table
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
