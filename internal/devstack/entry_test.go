package devstack_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/awsconfig"
	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/sftpauth"
	"github.com/payreq/payreq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// readEnvFile is .paydev/env.json of the running test stack.
func readEnvFile(t *testing.T) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.StateDir(t), devstack.EnvFile))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("env.json is not {\"<LogicalId>\": {\"VAR\": \"value\"}}: %v", err)
	}
	return all
}

// env.json holds every function's environment as the template resolves it
// on the local stack, in `sam local --env-vars` format: the local seal key
// instead of the secret, local mode, and the emulators' endpoints.
func TestEnvFileHasEveryFunctionsResolvedEnvironment(t *testing.T) {
	s := testenv.Stack(t)
	all := readEnvFile(t)
	if len(all) != len(s.Resources.Functions) {
		t.Errorf("env.json has %d functions, the template %d", len(all), len(s.Resources.Functions))
	}
	for _, f := range s.Resources.Functions {
		env, ok := all[f.LogicalID]
		if !ok {
			t.Errorf("env.json lacks %s", f.LogicalID)
			continue
		}
		want, err := s.Resources.Env(f.LogicalID)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if _, overridden := testenv.Options.Env[k]; !overridden && env[k] != v {
				t.Errorf("%s %s = %q, template resolves %q", f.LogicalID, k, env[k], v)
			}
		}
		if len(env) != len(want) {
			t.Errorf("%s: env.json has %d variables, the template %d", f.LogicalID, len(env), len(want))
		}
		if env["SEAL_KEY"] == "" || env["SEAL_KEY_SECRET_ARN"] != "" || env["PAYREQ_LOCAL"] != "1" ||
			env["AWS_ENDPOINT_URL_DYNAMODB"] != s.Info.Endpoints.DynamoDB || env["PUBLIC_BASE_URL"] != s.Info.APIBase {
			t.Errorf("%s: local values missing: %v", f.LogicalID, env)
		}
	}
}

// Each golden event of events/ drives its function's Lambda entry point,
// invoked as the runtime does (JSON bytes through lambda.NewHandler) with
// the environment of env.json: what `sam local invoke -e` does.
func TestGoldenEventsDriveTheEntryPoints(t *testing.T) {
	testenv.Stack(t)
	all := readEnvFile(t)
	cfg, err := awsconfig.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(t *testing.T, function, file string) []byte {
		t.Helper()
		ev, err := os.ReadFile(filepath.Join("..", "..", "events", file))
		if err != nil {
			t.Fatal(err)
		}
		env := all[function]
		h, err := devstack.Functions[function].Build(context.Background(), func(k string) string { return env[k] }, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		out, err := lambda.NewHandler(h).Invoke(context.Background(), ev)
		if err != nil {
			t.Fatalf("%s with events/%s: %v", function, file, err)
		}
		return out
	}
	t.Run("http-api", func(t *testing.T) {
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(invoke(t, "CallbacksFunction", "http-api.json"), &resp); err != nil {
			t.Fatal(err)
		}
		var echo struct {
			Query map[string][]string `json:"query"`
			Body  map[string]any      `json:"body"`
		}
		_ = json.Unmarshal([]byte(resp.Body), &echo)
		if resp.StatusCode != 200 || echo.Body["amount"] != "12.50" || strings.Join(echo.Query["tag"], "|") != "a|b" {
			t.Fatalf("response %d %s", resp.StatusCode, resp.Body)
		}
	})
	t.Run("sqs", func(t *testing.T) {
		var resp events.SQSEventResponse
		if err := json.Unmarshal(invoke(t, "NotifierFunction", "sqs.json"), &resp); err != nil {
			t.Fatalf("not an SQS batch response: %v", err)
		}
	})
	t.Run("s3-object-created", func(t *testing.T) {
		// S3 sends keys URL-encoded with spaces as "+": the fixture's key
		// is "incoming/no-such-merchant/payments 2026-11+1.csv".
		var ev events.S3Event
		b, _ := os.ReadFile(filepath.Join("..", "..", "events", "s3-object-created.json"))
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if key, _ := url.QueryUnescape(ev.Records[0].S3.Object.Key); key != "incoming/no-such-merchant/payments 2026-11+1.csv" {
			t.Fatalf("fixture key decodes to %q", key)
		}
		invoke(t, "BatchFunction", "s3-object-created.json")
	})
	t.Run("eventbridge-schedule", func(t *testing.T) {
		invoke(t, "ReconcilerFunction", "eventbridge-schedule.json")
		invoke(t, "AuditFunction", "eventbridge-schedule.json")
	})
	t.Run("dynamodb-stream", func(t *testing.T) {
		var resp events.DynamoDBEventResponse
		if err := json.Unmarshal(invoke(t, "AuditFunction", "dynamodb-stream.json"), &resp); err != nil {
			t.Fatalf("not a stream batch response: %v", err)
		}
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("the golden transaction change was refused: %+v", resp)
		}
	})
	t.Run("transfer-identity-provider", func(t *testing.T) {
		var resp sftpauth.Response
		if err := json.Unmarshal(invoke(t, "SftpAuthFunction", "transfer-identity-provider.json"), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Allowed() {
			t.Fatalf("unknown user allowed: %+v", resp)
		}
	})
}
