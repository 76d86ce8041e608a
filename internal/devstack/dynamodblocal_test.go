package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/payreq/payreq/internal/testing/needs"
)

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

// DynamoDB Local and fauxqs listen on 127.0.0.1 only (DynamoDB Local's own
// main listens on every interface), and Stop leaves no process behind.
func TestEmulatorsListenOnLoopbackOnlyAndStop(t *testing.T) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emu, err := StartEmulators(ctx, emulatorFiles(t), filepath.Join(t.TempDir(), "logs"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Stop()
	for _, endpoint := range []string{emu.DynamoDB, emu.SQS} {
		var port int
		if _, err := fmt.Sscanf(endpoint, "http://127.0.0.1:%d", &port); err != nil {
			t.Fatalf("endpoint %s: %v", endpoint, err)
		}
		if addrs := listeners(t, port); len(addrs) != 1 || addrs[0] != "127.0.0.1" {
			t.Errorf("%s: listening on %v, want 127.0.0.1 only", endpoint, addrs)
		}
	}
	pids := emu.PIDs()
	emu.Stop()
	for _, pid := range pids {
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still exists after Stop (kill 0: %v)", pid, err)
		}
	}
	if dynamoDBAnswers(emu.DynamoDB) {
		t.Errorf("%s still answers after Stop", emu.DynamoDB)
	}
}

// listeners lists the local addresses with a TCP socket listening on port
// (/proc/net/tcp and tcp6, in the kernel's hex; 0.0.0.0 and :: are every
// interface).
func listeners(t *testing.T, port int) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, p, ok := strings.Cut(fields[1], ":")
			if !ok || p != fmt.Sprintf("%04X", port) {
				continue
			}
			switch addr {
			case "0100007F", "0000000000000000FFFF00000100007F": // IPv4, or IPv4-mapped (Java's sockets)
				out = append(out, "127.0.0.1")
			case "00000000":
				out = append(out, "0.0.0.0")
			case "00000000000000000000000000000000":
				out = append(out, "::")
			default:
				out = append(out, addr)
			}
		}
		fh.Close()
	}
	return out
}

// With PAYREQ_DYNAMODB_LOCAL_DIR, DynamoDB Local keeps its tables in a file
// in that directory: an item written before a stop is read after a start.
func TestDynamoDBLocalKeepsTablesOnDiskWhenAsked(t *testing.T) {
	needs.External(t, "the emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	infra := emulatorFiles(t)
	dir := t.TempDir()
	t.Setenv(DynamoDBLocalDirEnv, dir)
	start := func() (*Emulators, *dynamodb.Client) {
		emu, err := StartEmulators(ctx, infra, filepath.Join(t.TempDir(), "logs"), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(emu.Stop)
		return emu, txClient(ctx, t, emu.DynamoDB)
	}
	emu, db := start()
	table := aws.String("ondisk")
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: table, BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}}}); err != nil {
		t.Fatal(err)
	}
	key := map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: "a"}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key}); err != nil {
		t.Fatal(err)
	}
	emu.Stop()
	if _, err := os.Stat(filepath.Join(dir, "shared-local-instance.db")); err != nil {
		t.Fatalf("no database file in %s: %v", dir, err)
	}
	_, db = start()
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("item not read back after a restart: %v %v", got, err)
	}
}

// The class-data sharing archive the cache records is one the runtime
// maps: with -Xshare:on a JVM that cannot use it refuses to start, where
// the stack's own start (-Xshare:auto) would quietly go without it.
func TestDynamoDBLocalClassArchiveIsUsable(t *testing.T) {
	needs.External(t, "Java")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := prepareDynamoDBLocal(ctx, emulatorFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.archive == "" {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(d.jar), "no-archive.txt"))
		t.Fatalf("no class archive was recorded:\n%s", b)
	}
	// With the client compiler only, as the tests run it, and tiered, as the
	// volume runs do.
	for _, tiered := range []bool{false, true} {
		t.Run(fmt.Sprintf("tiered=%v", tiered), func(t *testing.T) {
			port, err := FreePort()
			if err != nil {
				t.Fatal(err)
			}
			args := d.command(port, "", "", tiered)
			args = append([]string{"-Xshare:on"}, args[1:]...)
			var out strings.Builder
			cmd := exec.Command(d.java, args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited }()
			for !dynamoDBAnswers(fmt.Sprintf("http://127.0.0.1:%d", port)) {
				select {
				case <-exited:
					t.Fatalf("java -Xshare:on ... exited: the archive is not usable:\n%s", out.String())
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
}
