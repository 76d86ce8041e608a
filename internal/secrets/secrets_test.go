package secrets_test

import (
	"context"
	"github.com/payreq/payreq/internal/testing/motoserver"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/payreq/payreq/internal/secrets"
)

type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// The seal key is read through the Secrets Manager API once per process:
// later reads come from memory.
func TestStringReadsOnceThroughSecretsManager(t *testing.T) {
	url := motoserver.Start(t)
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
