package lambdahttp

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("Idempotency-Key")+"|"+r.Header.Get("Accept"))
	})
}

func event() events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RawPath: "/x", Headers: map[string]string{"idempotency-key": "order-1, retry,2", "accept": "a/b, c/d"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "h", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/x"}},
	}
}

func TestCommaInHeaderSurvives(t *testing.T) {
	// The plain adapter loses everything after the first comma...
	plain, _ := httpadapter.NewV2(echo()).ProxyWithContext(context.Background(), event())
	if plain.Body == "order-1, retry,2|a/b, c/d" {
		t.Fatal("adapter no longer splits headers; this wrapper may be unnecessary")
	}
	// ...ours delivers the value exactly as API Gateway sent it.
	resp, err := NewV2(echo()).ProxyWithContext(context.Background(), event())
	if err != nil || resp.Body != "order-1, retry,2|a/b, c/d" {
		t.Fatalf("got %q %v", resp.Body, err)
	}
}
