package awsconfig

import (
	"context"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// The SDK client keeps enough idle connections per endpoint that a shared
// client under concurrent use reuses them instead of opening new ones, and
// every call keeps its timeout.
func TestLoadKeepsConnectionsAndTimeout(t *testing.T) {
	cfg, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("HTTP client is %T, want *awshttp.BuildableClient", cfg.HTTPClient)
	}
	tr := c.GetTransport()
	if tr.MaxIdleConnsPerHost != MaxIdleConnsPerHost || tr.MaxIdleConns < MaxIdleConnsPerHost {
		t.Errorf("idle connections: %d per host, %d in all; want %d per host", tr.MaxIdleConnsPerHost, tr.MaxIdleConns, MaxIdleConnsPerHost)
	}
	if got := c.GetTimeout(); got != CallTimeout {
		t.Errorf("call timeout %s, want %s", got, CallTimeout)
	}
}
