package secrets_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/payreq/payreq/internal/secrets"
)

// motoServer starts AWS's reference emulator (moto_server, installed with
// cfn-lint on every machine) on a free port; it fails when it is missing.
func motoServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH (pip install 'moto[server]'): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get(url + "/moto-api/"); err == nil {
			r.Body.Close()
			return url
		}
	}
	t.Fatal("moto_server did not start within 30 s")
	return ""
}

type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// The seal key is read through the Secrets Manager API once per process:
// later reads come from memory.
func TestStringReadsOnceThroughSecretsManager(t *testing.T) {
	url := motoServer(t)
	counter := &countingTransport{}
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(url), HTTPClient: &http.Client{Transport: counter}}
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
	})
	ctx := context.Background()
	out, err := secretsmanager.NewFromConfig(cfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("seal-key"), SecretString: aws.String("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	counter.n.Store(0)
	start := time.Now()
	v, err := secrets.String(ctx, cfg, *out.ARN)
	first := time.Since(start)
	if err != nil || v != "0123456789abcdef" {
		t.Fatalf("String = %q, %v", v, err)
	}
	for range 3 {
		if v, err := secrets.String(ctx, cfg, *out.ARN); err != nil || v != "0123456789abcdef" {
			t.Fatalf("cached String = %q, %v", v, err)
		}
	}
	if n := counter.n.Load(); n != 1 {
		t.Errorf("%d GetSecretValue calls, want 1", n)
	}
	t.Logf("first read %v (moto_server, new connection)", first)

	// An unanswering endpoint fails within the timeout, not at Lambda's.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // accepts nothing: the request hangs
	cfg.BaseEndpoint = aws.String("http://" + l.Addr().String())
	start = time.Now()
	if _, err := secrets.String(ctx, cfg, "other"); err == nil {
		t.Fatal("read from a dead endpoint succeeded")
	}
	if d := time.Since(start); d > secrets.Timeout+time.Second {
		t.Errorf("dead endpoint took %v, want at most %v", d, secrets.Timeout)
	}
}
