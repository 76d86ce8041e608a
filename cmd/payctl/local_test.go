package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/payreq/payreq/internal/devstack"
	"github.com/payreq/payreq/internal/seal"
	"github.com/payreq/payreq/internal/testing/needs"
)

// `payctl --local` talks to the endpoints and region of stack.json, also
// when they are an external endpoint (LocalStack), and never to AWS — even
// from a shell whose AWS variables point elsewhere.
func TestLocalUsesStackJSONEndpointsAndRegion(t *testing.T) {
	needs.External(t, "payctl built and run as a process")
	var mu sync.Mutex
	var auths []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"fake"}`))
	}))
	defer fake.Close()

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	info := devstack.Info{APIBase: "http://127.0.0.1:1", Region: "eu-west-1", External: true,
		Endpoints: devstack.Endpoints{DynamoDB: fake.URL, SQS: fake.URL, S3: fake.URL},
		Tables:    map[string]string{"MerchantsTable": "m", "PaymentRequestsTable": "p", "OperationsTable": "o"}}
	b, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(state, "stack.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "seal.key"), []byte(seal.NewKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildPayctl(t)
	cmd := exec.Command(bin, "--local", "--state-dir", state, "merchant", "show", "--id", "m_1")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_") {
			env = append(env, e)
		}
	}
	// A shell set up for real AWS: none of it may matter.
	cmd.Env = append(env, "AWS_REGION=us-west-2", "AWS_ACCESS_KEY_ID=AKIAREAL", "AWS_SECRET_ACCESS_KEY=real",
		"AWS_ENDPOINT_URL_DYNAMODB=", "AWS_EC2_METADATA_DISABLED=true")
	out, _ := cmd.CombinedOutput()
	mu.Lock()
	defer mu.Unlock()
	if len(auths) == 0 {
		t.Fatalf("payctl never called stack.json's endpoint:\n%s", out)
	}
	for _, a := range auths {
		if !strings.Contains(a, "/eu-west-1/dynamodb/") {
			t.Errorf("request signed for another region: %s", a)
		}
	}
}
