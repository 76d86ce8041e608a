// Package lambdahttp runs an http.Handler behind API Gateway HTTP API (payload
// v2) with the awslabs api-proxy adapter, fixing one adapter behaviour: it
// splits every non-singleton header value on commas ("Idempotency-Key: a,b"
// becomes two values "a" and "b", and r.Header.Get returns "a"). API Gateway
// delivers each header as one string, so handlers here see exactly that
// string again.
package lambdahttp

import (
	"context"
	"net/http"
	"net/textproto"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

type rawHeadersKey struct{}

// Adapter is httpadapter.HandlerAdapterV2 with faithful header values.
type Adapter struct{ inner *httpadapter.HandlerAdapterV2 }

// NewV2 wraps h for API Gateway HTTP API events.
func NewV2(h http.Handler) *Adapter {
	return &Adapter{inner: httpadapter.NewV2(restoreHeaders(h))}
}

// ProxyWithContext is the Lambda handler: lambda.Start(a.ProxyWithContext).
func (a *Adapter) ProxyWithContext(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return a.inner.ProxyWithContext(context.WithValue(ctx, rawHeadersKey{}, ev.Headers), ev)
}

func restoreHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if raw, ok := r.Context().Value(rawHeadersKey{}).(map[string]string); ok {
			for k, v := range raw {
				if textproto.CanonicalMIMEHeaderKey(k) == "Cookie" {
					continue // the adapter rebuilds cookies from the event's cookie list
				}
				r.Header[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Lambda wraps a function's router for lambda.Start, passing a build error
// through: the HTTP functions' builders end in
// `return lambdahttp.Lambda(Handler(ctx, getenv, opts))`.
func Lambda(h http.Handler, err error) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	if err != nil {
		return nil, err
	}
	return NewV2(h).ProxyWithContext, nil
}
