package devstack

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/payreq/payreq/internal/lambdahttp"

	"github.com/payreq/payreq/internal/cfn"
)

// maxPayload is API Gateway's request payload limit.
const maxPayload = 10 << 20

// Gateway is a local stand-in for the HTTP API: it matches the template's
// routes and invokes each function's handler through the same api-proxy
// adapter Lambda uses, with an APIGatewayV2HTTPRequest built the way API
// Gateway builds it, so local behaviour is Lambda's behaviour.
type Gateway struct {
	mux *http.ServeMux
}

// NewGateway mounts handlers[functionLogicalID] on that function's routes.
func NewGateway(functions []cfn.FunctionSpec, handlers map[string]http.Handler) *Gateway {
	g := &Gateway{mux: http.NewServeMux()}
	for _, f := range functions {
		h, ok := handlers[f.LogicalID]
		if !ok {
			continue
		}
		adapter := lambdahttp.NewV2(h)
		for _, rt := range f.Routes {
			routeKey := rt.Method + " " + rt.Path
			g.mux.Handle(rt.Pattern(), invoke(adapter, routeKey))
		}
	}
	return g
}

// Handle mounts a plain handler (local-only pages such as /demo).
func (g *Gateway) Handle(pattern string, h http.Handler) { g.mux.Handle(pattern, h) }

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := g.mux.Handler(r); pattern == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
		return
	}
	g.mux.ServeHTTP(w, r)
}

func invoke(adapter *lambdahttp.Adapter, routeKey string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
		if err != nil || len(body) > maxPayload {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = io.WriteString(w, `{"message":"Request Entity Too Large"}`)
			return
		}
		ev := toEvent(r, routeKey, body)
		// Lambda gives each invocation a deadline; mirror a 30 s one.
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"message":"Internal Server Error"}`)
			return
		}
		writeResponse(w, resp)
	})
}

func toEvent(r *http.Request, routeKey string, body []byte) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					cookies = append(cookies, strings.TrimSpace(c))
				}
			}
			continue
		}
		headers[lk] = strings.Join(vs, ",")
	}
	ip, port, _ := net.SplitHostPort(r.RemoteAddr)
	headers["host"] = r.Host
	headers["x-forwarded-for"] = ip
	headers["x-forwarded-proto"] = "http"
	headers["x-forwarded-port"] = port
	query := map[string]string{}
	for k, vs := range r.URL.Query() {
		query[k] = strings.Join(vs, ",")
	}
	now := time.Now()
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:   routeKey,
			AccountID:  "000000000000",
			Stage:      "$default",
			RequestID:  newRequestID(),
			APIID:      "local",
			DomainName: r.Host,
			Time:       now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:  now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		ev.Body = base64.StdEncoding.EncodeToString(body)
		ev.IsBase64Encoded = true
	}
	return ev
}

func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = b
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}
