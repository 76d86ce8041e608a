package devstack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/payreq/payreq/internal/cfn"
	"github.com/payreq/payreq/internal/lambdahttp"
)

// The local gateway behaves like API Gateway + Lambda: route matching from the
// template, path parameters, raw header values, binary-safe bodies, and a
// problem for undeclared routes.
func TestGatewayInvokesThroughTheLambdaAdapter(t *testing.T) {
	// Like every function, the handler routes itself (its own ServeMux).
	echo := http.NewServeMux()
	echo.HandleFunc("POST /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got-Key", r.Header.Get("Idempotency-Key"))
		w.Header().Add("Set-Cookie", "a=1")
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" id="+r.PathValue("id")+" q="+r.URL.Query().Get("q")+" body="+string(body))
	})
	fns := []cfn.FunctionSpec{{LogicalID: "Fn", Routes: []cfn.Route{{Method: "POST", Path: "/things/{id}"}}}}
	h := lambda.NewHandler(lambdahttp.NewV2(echo).ProxyWithContext)
	srv := httptest.NewServer(NewGateway(fns, map[string]HTTPTarget{"Fn": {Handler: h, Timeout: 10 * time.Second}}))
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/things/7?q=x%20y", strings.NewReader("\x00\xffbinary"))
	req.Header.Set("Idempotency-Key", "k1, k2,k3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := string(b); got != "POST /things/7 id=7 q=x y body=\x00\xffbinary" {
		t.Fatalf("body %q", got)
	}
	if resp.Header.Get("X-Got-Key") != "k1, k2,k3" || resp.Header.Get("Set-Cookie") != "a=1" {
		t.Fatalf("headers %v", resp.Header)
	}
	for _, u := range []string{"/things", "/other"} {
		r, _ := http.Get(srv.URL + u)
		var p map[string]any
		_ = json.NewDecoder(r.Body).Decode(&p)
		r.Body.Close()
		if r.StatusCode != 404 || r.Header.Get("Content-Type") != "application/problem+json" || p["status"] != float64(404) {
			t.Fatalf("%s: %d %s %v", u, r.StatusCode, r.Header.Get("Content-Type"), p)
		}
	}
	if r, _ := http.Get(srv.URL + "/things/7"); r.StatusCode != 405 && r.StatusCode != 404 {
		t.Fatalf("wrong method: %d", r.StatusCode)
	}
}

// The event is the one API Gateway sends (payload format 2.0): text bodies
// plain, binary bodies base64, path parameters, route key, request context,
// cookies, repeated headers joined with commas; the deadline is the
// function's Timeout; events over Lambda's 6 MB limit never reach it.
func TestGatewayEventIsAPIGatewaysEvent(t *testing.T) {
	var got events.APIGatewayV2HTTPRequest
	var deadline time.Duration
	capture := lambda.NewHandler(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		got = ev
		if d, ok := ctx.Deadline(); ok {
			deadline = time.Until(d)
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "ok"}, nil
	})
	fns := []cfn.FunctionSpec{{LogicalID: "Fn", Routes: []cfn.Route{{Method: "POST", Path: "/pay/{method}/{id}"}}}}
	srv := httptest.NewServer(NewGateway(fns, map[string]HTTPTarget{"Fn": {Handler: capture, Timeout: 7 * time.Second}}))
	defer srv.Close()

	post := func(contentType, body string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/pay/qr/42?a=1&a=2", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	post("application/json; charset=utf-8", `{"a":1}`, "X-Multi", "one", "X-Multi", "two", "Cookie", "s=1; t=2")
	if got.IsBase64Encoded || got.Body != `{"a":1}` {
		t.Errorf("JSON body: base64=%v body=%q", got.IsBase64Encoded, got.Body)
	}
	if got.RouteKey != "POST /pay/{method}/{id}" || got.RequestContext.RouteKey != got.RouteKey {
		t.Errorf("routeKey %q / %q", got.RouteKey, got.RequestContext.RouteKey)
	}
	if got.PathParameters["method"] != "qr" || got.PathParameters["id"] != "42" {
		t.Errorf("pathParameters %v", got.PathParameters)
	}
	if got.Headers["x-multi"] != "one,two" || got.QueryStringParameters["a"] != "1,2" || got.RawQueryString != "a=1&a=2" {
		t.Errorf("headers %v query %v", got.Headers, got.QueryStringParameters)
	}
	if len(got.Cookies) != 2 || got.Cookies[0] != "s=1" || got.Cookies[1] != "t=2" || got.Headers["cookie"] != "" {
		t.Errorf("cookies %v", got.Cookies)
	}
	rc := got.RequestContext
	if got.Version != "2.0" || rc.Stage != "$default" || rc.RequestID == "" || rc.HTTP.Method != "POST" ||
		rc.HTTP.Path != "/pay/qr/42" || rc.HTTP.SourceIP != "127.0.0.1" || rc.TimeEpoch == 0 || rc.DomainName == "" {
		t.Errorf("requestContext %+v", rc)
	}
	if deadline <= 6*time.Second || deadline > 7*time.Second {
		t.Errorf("deadline %v, want the function's 7 s Timeout", deadline)
	}
	post("application/x-www-form-urlencoded", "a=1&b=2")
	if !got.IsBase64Encoded || got.Body != "YT0xJmI9Mg==" {
		t.Errorf("form body: base64=%v body=%q", got.IsBase64Encoded, got.Body)
	}
	post("text/plain", "\xff\xfe")
	if !got.IsBase64Encoded {
		t.Error("invalid UTF-8 text must be base64")
	}

	got = events.APIGatewayV2HTTPRequest{}
	resp := post("application/json", `"`+strings.Repeat("x", MaxInvokePayload)+`"`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" || got.Version != "" {
		t.Errorf("6 MB event: %d %s, invoked=%v", resp.StatusCode, resp.Header.Get("Content-Type"), got.Version != "")
	}
}

// The golden HTTP API event in events/ goes through the gateway's own
// decoding path: a function invoked with it by `sam local invoke -e` sees
// what the local stack sends.
func TestGoldenHTTPEventMatchesGateway(t *testing.T) {
	b, err := os.ReadFile("../../events/http-api.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(ev.RequestContext.HTTP.Method, ev.RawPath+"?"+ev.RawQueryString, strings.NewReader(ev.Body))
	r.Header.Set("Content-Type", ev.Headers["content-type"])
	mux := http.NewServeMux()
	var built events.APIGatewayV2HTTPRequest
	mux.HandleFunc(strings.Replace(ev.RouteKey, "+}", "...}", 1), func(_ http.ResponseWriter, r *http.Request) {
		built = ToEvent(r, ev.RouteKey, pathParams(strings.SplitN(ev.RouteKey, " ", 2)[1]), []byte(ev.Body))
	})
	mux.ServeHTTP(httptest.NewRecorder(), r)
	if built.RouteKey != ev.RouteKey || built.IsBase64Encoded != ev.IsBase64Encoded || built.Body != ev.Body ||
		!mapsEqual(built.PathParameters, ev.PathParameters) || !mapsEqual(built.QueryStringParameters, ev.QueryStringParameters) {
		t.Fatalf("gateway event differs from events/http-api.json:\n%+v\n%+v", built, ev)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
