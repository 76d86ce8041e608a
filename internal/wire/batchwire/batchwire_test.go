package batchwire

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/payreq/payreq/internal/batchproc"
	"github.com/payreq/payreq/internal/wire"
)

// secretsOnly answers every AWS call as Secrets Manager's GetSecretValue
// would: building the batch function makes no other call.
type secretsOnly struct {
	secret string
	calls  []string
}

func (s *secretsOnly) Do(r *http.Request) (*http.Response, error) {
	s.calls = append(s.calls, r.Header.Get("X-Amz-Target"))
	body := `{"ARN":"arn:aws:secretsmanager:us-east-1:000000000000:secret:seal","Name":"seal","SecretString":"` + s.secret + `"}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body: io.NopCloser(bytes.NewBufferString(body)), Request: r}, nil
}

// On AWS the seal key is not in the environment but in its secret. The
// batch function keys the fingerprints of rows without a Reference ID
// (card number, amount, currency) with it, so it reads the secret like
// every other function: keyed with an empty secret, anyone could test a
// guessed card number against a stored fingerprint.
func TestBatchKeysRowFingerprintsWithTheSealSecret(t *testing.T) {
	secret := strings.Repeat("s", 64)
	env := map[string]string{"STAGE": "sandbox", "MERCHANTS_TABLE": "m", "PAYMENT_REQUESTS_TABLE": "pr", "OPERATIONS_TABLE": "op",
		"TRANSACTIONS_TABLE": "tx", "SEAL_KEY_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:000000000000:secret:seal",
		"BATCH_BUCKET": "b", "BATCH_CONTINUE_QUEUE_URL": "http://127.0.0.1:1/q", "SANDBOX_QUEUE_URL": "http://127.0.0.1:1/s"}
	fake := &secretsOnly{secret: secret}
	cfg := aws.Config{Region: "us-east-1", HTTPClient: fake,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	p, err := Batch(context.Background(), func(k string) string { return env[k] }, wire.Options{AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.FingerprintKey, batchproc.FingerprintKeyFrom(secret)) {
		t.Fatalf("row fingerprints are not keyed with the seal secret (keyed with the empty secret: %v)",
			bytes.Equal(p.FingerprintKey, batchproc.FingerprintKeyFrom("")))
	}
	if len(fake.calls) != 1 || fake.calls[0] != "secretsmanager.GetSecretValue" {
		t.Fatalf("AWS calls at build: %q, want one GetSecretValue", fake.calls)
	}
}
