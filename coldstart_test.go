package payreq_test

import (
	"context"
	"github.com/payreq/payreq/internal/testing/motoserver"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	payreq "github.com/payreq/payreq"
	"github.com/payreq/payreq/internal/cfn"
)

// firstEvents is the golden event each function's trigger sends.
var firstEvents = map[string]string{
	"MerchantApiFunction": "http-api.json", "PaymentsFunction": "http-api.json", "CallbacksFunction": "http-api.json",
	"CheckoutFunction": "http-api.json", "NotifierFunction": "sqs.json", "SandboxFunction": "sqs.json",
	"ReconcilerFunction": "eventbridge-schedule.json", "BatchFunction": "s3-object-created.json",
	"SftpAuthFunction": "transfer-identity-provider.json", "DashboardFunction": "http-api.json",
	"AuditFunction": "dynamodb-stream.json",
}

// runtimeAPI is a minimal Lambda Runtime API: it hands out one event and
// records when the function asked for it (end of init) and answered it.
type runtimeAPI struct {
	event              []byte
	mu                 sync.Mutex
	asked, answered    time.Time
	answer             string
	answeredCh, doneCh chan struct{}
}

func (r *runtimeAPI) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == "GET" && strings.HasSuffix(req.URL.Path, "/runtime/invocation/next"):
		r.mu.Lock()
		first := r.asked.IsZero()
		if first {
			r.asked = time.Now()
		}
		r.mu.Unlock()
		if !first { // the process waits for its next event until killed
			<-r.doneCh
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(10*time.Second).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:000000000000:function:f")
		_, _ = w.Write(r.event)
	case req.Method == "POST" && strings.Contains(req.URL.Path, "/runtime/invocation/req-1/"):
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.answered, r.answer = time.Now(), req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]+" "+string(b)
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		close(r.answeredCh)
	default:
		w.WriteHeader(http.StatusAccepted) // init errors
	}
}

// Each built bootstrap, started as Lambda starts it (a Runtime API
// endpoint, its template environment), initialises and answers its golden
// event; with the seal key read from Secrets Manager (moto_server) as on AWS,
// and with the local stack's key parameter. The log lists init times (process
// start to the first /next) and the time to the first answer.
func TestBootstrapsStartUnderTheRuntimeAPI(t *testing.T) {
	moto := motoserver.Start(t)
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
	})
	sm := secretsmanager.NewFromConfig(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(moto), Credentials: creds})
	secret, err := sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
		Name: aws.String("coldstart-seal-key"), SecretString: aws.String(strings.Repeat("s", 64))})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := cfn.Parse(payreq.Template)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	dirs := functionDirs(t)
	type result struct{ init, first [2]time.Duration }
	results := map[string]result{}
	// The flags of the Makefile's build, for this machine's architecture;
	// one go build for all functions (shared work).
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin+"/", "./functions/...")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, f := range functions(t) {
		path := filepath.Join(bin, dirs[f.LogicalID])
		event, err := os.ReadFile(filepath.Join("events", firstEvents[f.LogicalID]))
		if err != nil {
			t.Fatal(err)
		}
		var res result
		for mode, params := range []map[string]string{{}, {"LocalSealKey": strings.Repeat("k", 64)}} {
			r := &cfn.Resolver{T: tmpl, Params: params,
				Pseudo: map[string]string{"AWS::Region": "eu-west-1", "AWS::StackName": "coldstart", "AWS::AccountId": "000000000000",
					"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": ""},
				Ref: func(id string) (string, error) {
					if id == "SealKeySecret" {
						return *secret.ARN, nil
					}
					return moto + "/000000000000/" + id, nil
				},
				GetAtt: func(id, attr string) (string, error) { return "arn:aws:sqs:eu-west-1:000000000000:" + id, nil },
			}
			env, err := f.ResolveEnv(r)
			if err != nil {
				t.Fatal(err)
			}
			// Best of three: the machine is shared, the minimum is the cost.
			for i := range 3 {
				init, first, answer := startBootstrap(t, path, env, moto, event)
				if i == 0 || init < res.init[mode] {
					res.init[mode] = init
				}
				if i == 0 || first < res.first[mode] {
					res.first[mode] = first
				}
				if strings.HasPrefix(answer, "error") && strings.Contains(answer, "seal key") {
					t.Errorf("%s: %s", f.LogicalID, answer)
				}
			}
		}
		results[f.LogicalID] = res
	}
	var ids []string
	for id := range results {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	t.Logf("%-20s %14s %14s %14s %14s", "function", "init secret", "init local", "1st ev secret", "1st ev local")
	for _, id := range ids {
		r := results[id]
		t.Logf("%-20s %14v %14v %14v %14v", id, r.init[0].Round(100*time.Microsecond), r.init[1].Round(100*time.Microsecond),
			r.first[0].Round(100*time.Microsecond), r.first[1].Round(100*time.Microsecond))
	}
}

// startBootstrap runs one cold start: process start → first /next (init)
// → answer posted (first event), then kills the process.
func startBootstrap(t *testing.T, path string, env map[string]string, endpoint string, event []byte) (init, first time.Duration, answer string) {
	t.Helper()
	api := &runtimeAPI{event: event, answeredCh: make(chan struct{}), doneCh: make(chan struct{})}
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer close(api.doneCh)
	cmd := exec.Command(path)
	cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(srv.URL, "http://"), "AWS_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_ENDPOINT_URL=" + endpoint, "AWS_MAX_ATTEMPTS=1",
		"AWS_LAMBDA_FUNCTION_NAME=coldstart", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	select {
	case <-api.answeredCh:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no answer within 15 s\n%s", filepath.Base(path), out.String())
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.asked.Sub(start), api.answered.Sub(start), api.answer
}
